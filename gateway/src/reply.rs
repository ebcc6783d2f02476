//! What a request is answered with: a status, a JSON body (or bytes, or a stream) and headers;
//! errors become the public error envelope here.

use std::borrow::Cow;

use serde_json::Value;
use switchboard_api::errors::{Code, ErrorBody, FieldError};
use switchboard_kit::ServiceError;

/// A body sent as it is read, e.g. a recording.
pub type BodyStream = futures::stream::BoxStream<'static, Result<bytes::Bytes, ServiceError>>;

pub struct Streamed {
    pub content_type: String,
    /// `None` when it is not known before the body ends: sent chunked.
    pub length: Option<u64>,
    pub body: BodyStream,
}

/// An answer: status, body and any headers beyond the ones every response gets.
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub headers: Vec<(Cow<'static, str>, String)>,
    /// Bytes sent as they are, with their content type, instead of `body`.
    pub raw: Option<(Cow<'static, str>, bytes::Bytes)>,
    /// A body sent as it is read, instead of `body` (boxed: rare, and it keeps every other
    /// answer small).
    pub streamed: Option<Box<Streamed>>,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reply").field("status", &self.status).field("body", &self.body).finish_non_exhaustive()
    }
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Self {
        Self { status, body, headers: Vec::new(), raw: None, streamed: None }
    }

    /// `length` bytes of `content_type`, sent as `body` yields them.
    pub fn stream(status: u16, content_type: String, length: Option<u64>, body: BodyStream) -> Self {
        Self { streamed: Some(Box::new(Streamed { content_type, length, body })), ..Self::json(status, Value::Null) }
    }

    /// A status without a body, e.g. 202 for an MCP notification.
    pub fn empty(status: u16) -> Self {
        Self::raw(status, "application/json", bytes::Bytes::new())
    }

    /// Bytes sent as they are, with their content type.
    pub fn raw(status: u16, content_type: impl Into<Cow<'static, str>>, bytes: bytes::Bytes) -> Self {
        Self { raw: Some((content_type.into(), bytes)), ..Self::json(status, Value::Null) }
    }

    /// The JSON body, whether built as a value or already serialized (`None` for other
    /// content, such as a recording).
    pub fn json_body(self) -> Option<Value> {
        if self.streamed.is_some() {
            return None;
        }
        match self.raw {
            None => Some(self.body),
            Some((content_type, bytes)) if content_type.starts_with("application/json") => {
                serde_json::from_slice(&bytes).ok()
            }
            Some(_) => None,
        }
    }

    /// A document that is not built per request: the OpenAPI description, the skill file.
    /// A public document (the OpenAPI description, the skill file), gzip-compressed when the
    /// client accepts it: the description is close to 1 MB as JSON and about a tenth of that
    /// compressed, and the portal reads it for the platform's vocabularies.
    pub fn document(
        content_type: &'static str,
        body: &crate::compression::Compressed,
        header: &pingora::http::RequestHeader,
    ) -> Self {
        let (bytes, compressed) = body.for_request(header);
        let reply = Self::raw(200, content_type, bytes)
            .with_header("Cache-Control", "public, max-age=300".to_owned())
            .with_header("Vary", "Accept-Encoding".to_owned());
        if compressed { reply.with_header("Content-Encoding", "gzip".to_owned()) } else { reply }
    }

    pub fn with_header(mut self, name: impl Into<Cow<'static, str>>, value: String) -> Self {
        self.headers.push((name.into(), value));
        self
    }

    /// The public error envelope: `{error, code, hint?, details?}`, and when a per-resource
    /// rule allows the action again later, `retryAfter`, `resetAt` and `nextAvailableAt`.
    pub fn error(error: &ServiceError) -> Self {
        if let Some(source) = &error.source {
            tracing::error!(error = format!("{source:#}"), "internal error");
        }
        let details = (!error.details.is_empty()).then(|| error.details.iter().map(FieldError::from).collect());
        let retry = error.retry_at_ms.map(|retry_at_ms| {
            let seconds = ((retry_at_ms - switchboard_kit::time::now_ms()).max(0) + 999) / 1000;
            (seconds, switchboard_kit::time::iso_ms(retry_at_ms))
        });
        let body = ErrorBody {
            error: error.message.clone(),
            code: Code(error.kind.code()),
            hint: error.hint.clone(),
            details,
            retry_after: retry.as_ref().map(|(seconds, _)| *seconds),
            // `resetAt` as on every 429; `nextAvailableAt` is the spec's name for this one.
            reset_at: retry.as_ref().map(|(_, at)| at.clone()),
            next_available_at: retry.as_ref().map(|(_, at)| at.clone()),
        };
        let reply = Self::json(error.kind.http_status(), serde_json::to_value(&body).unwrap_or(Value::Null));
        match retry {
            Some((seconds, _)) => reply.with_header("Retry-After", seconds.to_string()),
            None => reply,
        }
    }
}

pub type HandlerResult = Result<Reply, ServiceError>;

impl Reply {
    /// The answer to a request, errors included; failures of the platform are logged with the
    /// request's id.
    pub fn of(answered: HandlerResult, request_id: &str) -> Self {
        answered.unwrap_or_else(|error| {
            if error.kind == switchboard_kit::ErrorKind::Internal
                || error.kind == switchboard_kit::ErrorKind::Unavailable
            {
                tracing::warn!(request_id, %error, "request failed");
            }
            Reply::error(&error)
        })
    }
}
