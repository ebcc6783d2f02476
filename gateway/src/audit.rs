//! Writing what authenticated callers did to the team's audit log. Every write of a team's
//! data is declared `.audited(action)` (a test of the endpoint table holds that), and is
//! recorded once it has succeeded, over REST or MCP alike, with the caller (key or person),
//! the client's address and user agent, its target (the id of what it made, or else the
//! last id in its path) with the target's name as the answer shows it, and the names of the
//! fields its body set. The write happens after the answer and never fails the request; the
//! identity service keeps the log.

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
    /// The last id in the path, e.g. the `keyId` of `DELETE /v1/api-keys/{keyId}`, the domain
    /// of `.../domains/{domain}/verify`, the `agentId` of
    /// `.../{agentId}/instructions/history/{version}/restore` (a version names no resource).
    path_target: Option<String>,
    /// The fields the body set, by name: what a change changed. Values stay out of the log
    /// (a webhook's secret, a contact's details).
    changes: Vec<String>,
}

pub fn pending(route: &Endpoint, call: &Call, raw: &RawInput) -> Option<Pending> {
    let action = route.audit?;
    let path_target = route
        .path_parameters()
        .filter(|name| *name != "version")
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
        changes: fields_set(route, raw),
    })
}

/// The members of the body the operation reads: the others are ignored, so they changed
/// nothing.
fn fields_set(route: &Endpoint, raw: &RawInput) -> Vec<String> {
    let known = route.inputs.body.as_ref().and_then(|schema| schema.get("properties")).and_then(Value::as_object);
    match (&raw.body, &raw.upload, known) {
        (Some(Value::Object(fields)), _, Some(known)) => {
            fields.keys().filter(|name| known.contains_key(*name)).cloned().collect()
        }
        (_, Some(_), _) => vec!["file".to_owned()],
        _ => Vec::new(),
    }
}

/// Records `pending` when `reply` says the operation succeeded. The entry is made from the
/// answer at once; the future writes it.
pub fn record(services: Arc<Services>, pending: Pending, reply: &Reply) -> impl Future<Output = ()> + Send + use<> {
    let entry = entry(pending, reply);
    async move {
        let Some(entry) = entry else { return };
        let written = tokio::spawn(async move {
            if let Err(status) = services.accounts.clone().record_audit(entry).await {
                tracing::warn!(error = %status.message(), "an audit entry was not written");
            }
        });
        // Awaited, so that the log holds the entry once the answer has arrived (a person who
        // opens the audit log right after a change finds it). A slow identity service holds
        // the answer back at most AUDIT_WAIT; the entry is still written after.
        if tokio::time::timeout(AUDIT_WAIT, written).await.is_err() {
            tracing::warn!("an audit entry took more than {AUDIT_WAIT:?}; the answer went before it");
        }
    }
}

/// The entry of a successful answer; `None` for a failure.
fn entry(pending: Pending, reply: &Reply) -> Option<AuditEntry> {
    if !(200..300).contains(&reply.status) {
        return None;
    }
    // A built answer is read where it is; a serialized one is parsed for its `data` alone.
    let parsed;
    let data = match &reply.raw {
        Some((_, bytes)) => {
            parsed = serde_json::from_slice::<Envelope>(bytes).ok().map(|envelope| envelope.data);
            parsed.as_ref()
        }
        None => reply.body.get("data"),
    };
    let made = data.filter(|_| reply.status == 201).and_then(id_of);
    let target = made.or(pending.path_target).or_else(|| data.and_then(id_of)).unwrap_or_default();
    // The answer's name for it, when the answer is the target (not a list, nor the delivery
    // of a webhook test).
    let target_name = data.filter(|data| id_of(data).as_deref() == Some(&target)).map(name_of).unwrap_or_default();
    Some(AuditEntry {
        team_id: pending.team_id,
        action: pending.action.as_str().to_owned(),
        actor: Some(pending.actor),
        target,
        target_name,
        changes: pending.changes,
        ip: pending.client.ip,
        user_agent: pending.client.user_agent,
        ..AuditEntry::default()
    })
}

/// How long an answer waits for its audit entry.
const AUDIT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A JSON answer's `data`; its other members are skipped unread.
#[derive(serde::Deserialize)]
struct Envelope {
    #[serde(default)]
    data: Value,
}

/// The id, or else the e-mail (an invitation), of an answered resource.
fn id_of(data: &Value) -> Option<String> {
    data.get("id").or_else(|| data.get("email")).and_then(Value::as_str).map(str::to_owned)
}

/// What people call a resource: its name, title or question; a person's full name; else its
/// e-mail, URL (a webhook's) or number; a call's two numbers; a chat's contact; a note's first
/// words. The e-mail comes before the URL: an invitation's `url` is the secret link.
fn name_of(data: &Value) -> String {
    let text = |field: &str| data.get(field).and_then(Value::as_str).map(str::trim).filter(|text| !text.is_empty());
    if let Some(name) = ["name", "title", "question"].into_iter().find_map(text) {
        return name.to_owned();
    }
    let full_name = [text("firstName"), text("lastName")].into_iter().flatten().collect::<Vec<_>>().join(" ");
    if !full_name.is_empty() {
        return full_name;
    }
    if let Some(found) = ["email", "url", "number"].into_iter().find_map(text) {
        return found.to_owned();
    }
    if let (Some(from), Some(to)) = (text("from"), text("to")) {
        return format!("{from} → {to}");
    }
    let contact = data.get("contact").map(name_of).filter(|name| !name.is_empty());
    if let Some(contact) = contact {
        return contact;
    }
    text("note").map(|note| first_words(note, NOTE_NAME)).unwrap_or_default()
}

/// The characters of a note that name it in the log.
const NOTE_NAME: usize = 60;

/// The start of `text`, at most `most` characters, with "…" when it goes on.
fn first_words(text: &str, most: usize) -> String {
    let mut start: String = text.chars().take(most).collect();
    if text.chars().nth(most).is_some() {
        start.push('…');
    }
    start
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{NOTE_NAME, name_of};

    #[test]
    fn targets_are_named_as_people_know_them() {
        assert_eq!(name_of(&json!({"id": "a", "name": "Receptionist", "url": "https://x"})), "Receptionist");
        assert_eq!(name_of(&json!({"id": "a", "question": "Opening hours?"})), "Opening hours?");
        assert_eq!(name_of(&json!({"firstName": "Ada", "lastName": "King", "number": "+1"})), "Ada King");
        assert_eq!(name_of(&json!({"firstName": " ", "number": "+14155550100"})), "+14155550100");
        assert_eq!(name_of(&json!({"id": "a", "favorite": true})), "");
        assert_eq!(
            name_of(&json!({"id": "c", "from": "+14155550100", "to": "+14155550111"})),
            "+14155550100 → +14155550111"
        );
        assert_eq!(name_of(&json!({"id": "c", "contact": {"number": "+14155550100", "email": null}})), "+14155550100");
        let long = "word ".repeat(20);
        assert_eq!(name_of(&json!({"id": "n", "note": long})).chars().count(), NOTE_NAME + 1, "cut, with an ellipsis");
        let invitation = json!({"id": "a", "email": "mia@example.com", "url": "https://portal/invite/secret"});
        assert_eq!(name_of(&invitation), "mia@example.com", "never the invitation's link");
    }
}
