//! What a handler receives (the authenticated, scoped request) and what it returns.

use std::sync::Arc;

use serde_json::Value;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{ApiKey, Team};

use crate::services::Services;
use crate::validate::{Fields, Query};

/// The key behind a request and the team that owns it.
#[derive(Debug)]
pub struct Principal {
    pub key: ApiKey,
    pub team: Team,
}

pub struct Call {
    pub services: Services,
    pub principal: Arc<Principal>,
    /// The team the request acts on: the key's own, or a client subteam chosen by `teamId`.
    pub team: Arc<Team>,
    pub params: Vec<(&'static str, String)>,
    pub query: Vec<(String, String)>,
    pub body: Option<Value>,
    /// The raw multipart body of an upload route.
    pub upload: Option<crate::body::Upload>,
    pub max_upload_bytes: usize,
}

impl Call {
    pub fn team_id(&self) -> &str {
        &self.team.id
    }

    /// True when an agency key acts on one of its subteams through `teamId`.
    pub fn via_agency(&self) -> bool {
        self.team.id != self.principal.team.id
    }

    pub fn has_param(&self, name: &str) -> bool {
        self.params.iter().any(|(key, _)| *key == name)
    }

    pub fn param(&self, name: &str) -> &str {
        self.params.iter().find(|(key, _)| *key == name).map(|(_, value)| value.as_str()).unwrap_or_default()
    }

    pub fn query(&self) -> Query<'_> {
        Query::new(&self.query)
    }

    pub fn fields(&self) -> ServiceResult<Fields<'_>> {
        match &self.body {
            Some(body) => Fields::of(body),
            None => Err(crate::body::body_required()),
        }
    }
}

/// An answer: status, body and any headers beyond the ones every response gets.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub headers: Vec<(&'static str, String)>,
    /// Bytes sent as they are, with their content type, instead of `body`.
    pub raw: Option<(&'static str, bytes::Bytes)>,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Self {
        Self { status, body, headers: Vec::new(), raw: None }
    }

    /// A status without a body, e.g. 202 for an MCP notification.
    pub fn empty(status: u16) -> Self {
        Self { raw: Some(("application/json", bytes::Bytes::new())), ..Self::json(status, Value::Null) }
    }

    /// A document that is not built per request: the OpenAPI description, the skill file.
    pub fn document(content_type: &'static str, bytes: bytes::Bytes) -> Self {
        Self { raw: Some((content_type, bytes)), ..Self::json(200, Value::Null) }
            .with_header("Cache-Control", "public, max-age=300".to_owned())
    }

    /// `200 {"data": ...}`
    pub fn data(data: Value) -> Self {
        Self::json(200, serde_json::json!({ "data": data }))
    }

    /// `201 {"data": ..., "message": ...}`
    pub fn created(data: Value, message: &str) -> Self {
        Self::json(201, serde_json::json!({ "data": data, "message": message }))
    }

    /// `200 {"data": ..., "message": ...}`
    pub fn updated(data: Value, message: &str) -> Self {
        Self::json(200, serde_json::json!({ "data": data, "message": message }))
    }

    pub fn with_header(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The public error envelope: `{error, code, hint?, details?}`.
    pub fn error(error: &ServiceError) -> Self {
        if let Some(source) = &error.source {
            tracing::error!(error = format!("{source:#}"), "internal error");
        }
        let mut body = serde_json::json!({
            "error": error.message,
            "code": error.kind.code(),
        });
        if let Some(hint) = &error.hint {
            body["hint"] = Value::from(hint.as_str());
        }
        if !error.details.is_empty() {
            body["details"] =
                error.details.iter().map(|v| serde_json::json!({ "field": v.field, "message": v.message })).collect();
        }
        let mut reply = Self::json(error.kind.http_status(), body);
        if let Some(retry_at_ms) = error.retry_at_ms {
            let seconds = ((retry_at_ms - switchboard_kit::time::now_ms()).max(0) + 999) / 1000;
            let at = Value::from(switchboard_kit::time::iso_ms(retry_at_ms));
            // `resetAt` as on every 429; `nextAvailableAt` is the spec's name for this one.
            reply.body["resetAt"] = at.clone();
            reply.body["nextAvailableAt"] = at;
            reply.body["retryAfter"] = Value::from(seconds);
            reply = reply.with_header("Retry-After", seconds.to_string());
        }
        reply
    }
}

pub type HandlerResult = Result<Reply, ServiceError>;
