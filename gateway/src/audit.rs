//! Writing what authenticated callers did to the team's audit log. An operation declared
//! `.audited(action)` is recorded once it has succeeded, over REST or MCP alike, with the
//! caller (key or person), the client's address and user agent, and its target: the id in
//! its path, or else the id (or e-mail) of what it made. The write happens after the answer
//! and never fails the request; the identity service keeps the log.

use std::sync::Arc;

use serde_json::Value;
use switchboard_kit::vocabulary::AuditAction;
use switchboard_proto::v1::{Actor, AuditEntry};

use crate::call::Call;
use crate::endpoint::{Endpoint, RawInput};
use crate::reply::Reply;
use crate::services::Services;

/// What will be written if the operation succeeds.
pub struct Pending {
    action: AuditAction,
    team_id: String,
    actor: Actor,
    client: crate::origin::Client,
    /// The last id in the path, e.g. the `keyId` of `DELETE /v1/api-keys/{keyId}`, the `agentId`
    /// of `.../{agentId}/instructions/history/{version}/restore` (a version names no resource).
    path_target: Option<String>,
}

pub fn pending(route: &Endpoint, call: &Call, raw: &RawInput) -> Option<Pending> {
    let action = route.audit?;
    let path_target = route
        .path_parameters()
        .filter(|name| name.ends_with("Id"))
        .last()
        .and_then(|name| raw.path.get(name))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Some(Pending {
        action,
        team_id: call.team_id().to_owned(),
        actor: call.principal.actor(),
        client: call.client.clone(),
        path_target,
    })
}

/// Records `pending` when `reply` says the operation succeeded.
pub fn record(services: Arc<Services>, pending: Pending, reply: &Reply) {
    if !(200..300).contains(&reply.status) {
        return;
    }
    let target = pending.path_target.clone().or_else(|| made(reply)).unwrap_or_default();
    let entry = AuditEntry {
        team_id: pending.team_id,
        action: pending.action.as_str().to_owned(),
        actor: Some(pending.actor),
        target,
        ip: pending.client.ip,
        user_agent: pending.client.user_agent,
        ..AuditEntry::default()
    };
    tokio::spawn(async move {
        if let Err(status) = services.accounts.clone().record_audit(entry).await {
            tracing::warn!(error = %status.message(), "an audit entry was not written");
        }
    });
}

/// The id, or else the e-mail, of what an answer made.
fn made(reply: &Reply) -> Option<String> {
    let body: Value = match &reply.raw {
        Some((_, bytes)) => serde_json::from_slice(bytes).ok()?,
        None => reply.body.clone(),
    };
    let data = body.get("data")?;
    data.get("id").or_else(|| data.get("email")).and_then(Value::as_str).map(str::to_owned)
}
