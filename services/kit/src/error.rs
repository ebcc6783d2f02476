//! The one error type of every Switchboard service and of the gateway.
//!
//! Each [`ErrorKind`] names its stable public code, its HTTP status and its gRPC code in one
//! table, so that a service error survives the trip service → gRPC → gateway → HTTP without a
//! second mapping anywhere.
//!
//! Across gRPC an error follows the richer error model (`google.rpc.Status` in
//! `grpc-status-details-bin`), so that any gRPC client, in any language, reads it with its
//! standard library: `ErrorInfo` (reason = the public code, domain [`ERROR_DOMAIN`], metadata
//! `message` and `hint`), `BadRequest` with the field violations, and `RetryInfo` when the
//! action is allowed again later.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

/// `ErrorInfo.domain` of every Switchboard error.
pub const ERROR_DOMAIN: &str = "switchboard";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    Validation,
    MalformedJson,
    Unauthorized,
    Forbidden,
    /// A change to a person's factors, password, address or sessions from a session that has
    /// not proved who it is lately: `POST /v1/auth/reauthenticate` first.
    ReauthenticationRequired,
    InsufficientCredits,
    NotFound,
    MethodNotAllowed,
    Conflict,
    /// A contact with the same number exists in the team (its id is in the details).
    ContactExists,
    /// An `Idempotency-Key` whose first request is still being answered.
    IdempotencyKeyInUse,
    /// An `Idempotency-Key` used before with another method, path or body.
    IdempotencyKeyReused,
    /// A replay of a write whose answer held a secret shown once: the secret is not kept.
    IdempotencySecretShown,
    PayloadTooLarge,
    UnsupportedMediaType,
    Unprocessable,
    RateLimited,
    Unavailable,
    Internal,
}

impl ErrorKind {
    /// Every kind, for lookups by code.
    pub const ALL: [ErrorKind; 19] = [
        ErrorKind::Validation,
        ErrorKind::MalformedJson,
        ErrorKind::Unauthorized,
        ErrorKind::Forbidden,
        ErrorKind::ReauthenticationRequired,
        ErrorKind::InsufficientCredits,
        ErrorKind::NotFound,
        ErrorKind::MethodNotAllowed,
        ErrorKind::Conflict,
        ErrorKind::ContactExists,
        ErrorKind::IdempotencyKeyInUse,
        ErrorKind::IdempotencyKeyReused,
        ErrorKind::IdempotencySecretShown,
        ErrorKind::PayloadTooLarge,
        ErrorKind::UnsupportedMediaType,
        ErrorKind::Unprocessable,
        ErrorKind::RateLimited,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
    ];

    /// `(public code, HTTP status, gRPC code)`: the single source of the mapping. The match is
    /// exhaustive, so a new kind does not compile until it has all three.
    const fn parts(self) -> (&'static str, u16, Code) {
        match self {
            ErrorKind::Validation => ("VALIDATION_ERROR", 400, Code::InvalidArgument),
            ErrorKind::MalformedJson => ("INVALID_JSON", 400, Code::InvalidArgument),
            ErrorKind::Unauthorized => ("UNAUTHORIZED", 401, Code::Unauthenticated),
            ErrorKind::Forbidden => ("FORBIDDEN", 403, Code::PermissionDenied),
            ErrorKind::ReauthenticationRequired => ("REAUTHENTICATION_REQUIRED", 403, Code::PermissionDenied),
            ErrorKind::InsufficientCredits => ("INSUFFICIENT_CREDITS", 402, Code::FailedPrecondition),
            ErrorKind::NotFound => ("NOT_FOUND", 404, Code::NotFound),
            ErrorKind::MethodNotAllowed => ("METHOD_NOT_ALLOWED", 405, Code::Unimplemented),
            ErrorKind::Conflict => ("CONFLICT", 409, Code::Aborted),
            ErrorKind::ContactExists => ("CONTACT_EXISTS", 409, Code::AlreadyExists),
            ErrorKind::IdempotencyKeyInUse => ("IDEMPOTENCY_KEY_IN_USE", 409, Code::Aborted),
            ErrorKind::IdempotencyKeyReused => ("IDEMPOTENCY_KEY_REUSED", 422, Code::InvalidArgument),
            ErrorKind::IdempotencySecretShown => ("IDEMPOTENCY_SECRET_SHOWN", 409, Code::Aborted),
            ErrorKind::PayloadTooLarge => ("PAYLOAD_TOO_LARGE", 413, Code::OutOfRange),
            ErrorKind::UnsupportedMediaType => ("UNSUPPORTED_MEDIA_TYPE", 415, Code::InvalidArgument),
            ErrorKind::Unprocessable => ("UNPROCESSABLE_ENTITY", 422, Code::InvalidArgument),
            ErrorKind::RateLimited => ("RATE_LIMITED", 429, Code::ResourceExhausted),
            ErrorKind::Unavailable => ("SERVICE_UNAVAILABLE", 503, Code::Unavailable),
            ErrorKind::Internal => ("INTERNAL_ERROR", 500, Code::Internal),
        }
    }

    pub fn code(self) -> &'static str {
        self.parts().0
    }

    pub fn http_status(self) -> u16 {
        self.parts().1
    }

    pub fn grpc_code(self) -> Code {
        self.parts().2
    }

    pub fn from_code(code: &str) -> Option<ErrorKind> {
        Self::ALL.into_iter().find(|kind| kind.code() == code)
    }

    /// For statuses that did not come from a Switchboard service (no details attached).
    fn from_grpc(code: Code) -> ErrorKind {
        match code {
            Code::InvalidArgument | Code::OutOfRange => ErrorKind::Validation,
            Code::Unauthenticated => ErrorKind::Unauthorized,
            Code::PermissionDenied => ErrorKind::Forbidden,
            Code::NotFound => ErrorKind::NotFound,
            Code::AlreadyExists | Code::Aborted => ErrorKind::Conflict,
            Code::FailedPrecondition => ErrorKind::Conflict,
            Code::ResourceExhausted => ErrorKind::RateLimited,
            // Unknown without details is the transport's word for a call that got no answer
            // (the service died mid-call, measured by bench/faults.sh): retryable, not a 500.
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    pub field: String,
    pub message: String,
    /// What to do about it, when there is advice (how to make a password harder to guess).
    pub hint: Option<String>,
}

impl FieldViolation {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into(), hint: None }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// The `ErrorInfo` metadata key of the hint of violation `index` (`BadRequest` has no place for
/// advice of its own).
fn violation_hint_key(index: usize) -> String {
    format!("details.{index}.hint")
}

/// An error as a client may see it, plus (for internal errors) a cause that is logged and
/// never shown.
#[derive(Debug)]
pub struct ServiceError {
    pub kind: ErrorKind,
    pub message: String,
    pub hint: Option<String>,
    pub details: Vec<FieldViolation>,
    /// For a 429 of a per-resource limit: when the action is allowed again (ms since epoch).
    pub retry_at_ms: Option<i64>,
    pub source: Option<anyhow::Error>,
}

pub type ServiceResult<T> = Result<T, ServiceError>;

impl ServiceError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), hint: None, details: Vec::new(), retry_at_ms: None, source: None }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// The caller's team (or the `teamId` subteam) is gone: every service answers it alike.
    pub fn team_not_found() -> Self {
        Self::not_found("Team not found")
    }

    /// An agent of the team that does not exist (or is another team's).
    pub fn agent_not_found() -> Self {
        Self::not_found("Agent not found")
    }

    /// A call without a recording, or whose recording is gone.
    pub fn recording_not_found() -> Self {
        Self::not_found("Recording not found")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, message)
    }

    /// 403 `REAUTHENTICATION_REQUIRED`: the session must prove again who its person is before
    /// this change (`POST /v1/auth/reauthenticate`).
    pub fn reauthentication_required() -> Self {
        Self::new(ErrorKind::ReauthenticationRequired, "Confirm it is you first").with_hint(
            "Changes to your second factors, password, e-mail address and sessions need a sign-in of the last few \
                 minutes: POST /v1/auth/reauthenticate with a code of your second factor, a passkey, or (without a \
                 second factor) your password, then try again.",
        )
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// A validation failure with its per-field issues.
    pub fn validation(details: Vec<FieldViolation>) -> Self {
        Self { details, ..Self::new(ErrorKind::Validation, "Validation error") }
    }

    /// A validation failure of a single field.
    pub fn invalid_field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::validation(vec![FieldViolation::new(field, message)])
    }

    /// A per-resource limit (not the request rate): allowed again at `retry_at_ms`.
    pub fn limited_until(message: impl Into<String>, retry_at_ms: i64) -> Self {
        Self { retry_at_ms: Some(retry_at_ms), ..Self::new(ErrorKind::RateLimited, message) }
    }

    pub fn insufficient_credits() -> Self {
        Self::new(ErrorKind::InsufficientCredits, "Insufficient credits")
            .with_hint("Add credits to the team's balance, then retry.")
    }

    /// An internal failure: the cause is kept for the log, the client sees a generic text.
    pub fn internal(source: impl Into<anyhow::Error>) -> Self {
        Self { source: Some(source.into()), ..Self::new(ErrorKind::Internal, "Internal server error") }
    }

    pub fn to_status(&self) -> tonic::Status {
        if let Some(source) = &self.source {
            tracing::error!(error = format!("{source:#}"), "internal error");
        }
        let mut metadata = HashMap::from([("message".to_owned(), self.message.clone())]);
        if let Some(hint) = &self.hint {
            metadata.insert("hint".to_owned(), hint.clone());
        }
        for (index, violation) in self.details.iter().enumerate() {
            if let Some(hint) = &violation.hint {
                metadata.insert(violation_hint_key(index), hint.clone());
            }
        }
        let mut details = ErrorDetails::with_error_info(self.kind.code(), ERROR_DOMAIN, metadata);
        if !self.details.is_empty() {
            details.set_bad_request(
                self.details
                    .iter()
                    .map(|v| tonic_types::FieldViolation::new(v.field.clone(), v.message.clone()))
                    .collect::<Vec<_>>(),
            );
        }
        if let Some(retry_at_ms) = self.retry_at_ms {
            let delay_ms = (retry_at_ms - crate::time::now_ms()).max(0);
            details.set_retry_info(Some(Duration::from_millis(delay_ms.unsigned_abs())));
        }
        // Clients that show only the status message (grpcurl) still see which fields are wrong.
        let text = if self.details.is_empty() {
            self.message.clone()
        } else {
            let violations: Vec<String> = self.details.iter().map(|v| format!("{} {}", v.field, v.message)).collect();
            format!("{}: {}", self.message, violations.join("; "))
        };
        tonic::Status::with_error_details(self.kind.grpc_code(), text, details)
    }

    /// Rebuilds the service's error from a status; statuses without Switchboard details
    /// (transport failures, timeouts) are classified by their gRPC code.
    pub fn from_status(status: &tonic::Status) -> Self {
        let details = status.check_error_details().ok();
        let info = details
            .as_ref()
            .and_then(ErrorDetails::error_info)
            .filter(|info| info.domain == ERROR_DOMAIN)
            .and_then(|info| ErrorKind::from_code(&info.reason).map(|kind| (kind, info)));
        let Some((kind, info)) = info else {
            let kind = ErrorKind::from_grpc(status.code());
            let message = match kind {
                ErrorKind::Unavailable => "Service unavailable".to_owned(),
                ErrorKind::Internal => "Internal server error".to_owned(),
                _ => status.message().to_owned(),
            };
            let mut error = Self::new(kind, message);
            if kind == ErrorKind::Internal {
                error.source = Some(anyhow::anyhow!("upstream status: {status}"));
            }
            return error;
        };
        let message = info.metadata.get("message").cloned().unwrap_or_else(|| status.message().to_owned());
        let mut error = Self::new(kind, message);
        error.hint = info.metadata.get("hint").cloned().filter(|hint| !hint.is_empty());
        let details = details.as_ref();
        if let Some(bad_request) = details.and_then(ErrorDetails::bad_request) {
            error.details = bad_request
                .field_violations
                .iter()
                .enumerate()
                .map(|(index, v)| FieldViolation {
                    hint: info.metadata.get(&violation_hint_key(index)).cloned(),
                    ..FieldViolation::new(v.field.clone(), v.description.clone())
                })
                .collect();
        }
        if let Some(delay) = details.and_then(ErrorDetails::retry_info).and_then(|retry| retry.retry_delay) {
            let delay_ms = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
            error.retry_at_ms = Some(crate::time::now_ms().saturating_add(delay_ms));
        }
        error
    }
}

/// An item of a bulk create that was not written, with the error a single create of it would
/// have answered.
pub fn bulk_failure(index: u32, error: ServiceError) -> switchboard_proto::v1::BulkFailure {
    switchboard_proto::v1::BulkFailure {
        index,
        code: error.kind.code().to_owned(),
        error: error.message,
        details: error
            .details
            .into_iter()
            .map(|v| switchboard_proto::v1::FieldViolation { field: v.field, message: v.message })
            .collect(),
    }
}

/// Fails with every violation found, or passes when there are none: how a service checks all
/// fields of a request before answering.
pub fn validate(violations: impl IntoIterator<Item = Option<FieldViolation>>) -> ServiceResult<()> {
    let found: Vec<FieldViolation> = violations.into_iter().flatten().collect();
    if found.is_empty() { Ok(()) } else { Err(ServiceError::validation(found)) }
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.code(), self.message)?;
        if let Some(source) = &self.source {
            write!(f, " ({source:#})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ServiceError {}

impl From<ServiceError> for tonic::Status {
    fn from(error: ServiceError) -> Self {
        error.to_status()
    }
}

impl From<tonic::Status> for ServiceError {
    fn from(status: tonic::Status) -> Self {
        ServiceError::from_status(&status)
    }
}

impl From<sqlx::Error> for ServiceError {
    /// A database that cannot be reached (down, restarting, out of connections) is a 503 the
    /// client may retry, not a 500; anything else is an internal error. The cause is logged
    /// either way, never shown.
    fn from(error: sqlx::Error) -> Self {
        let unreachable = database_unreachable(&error);
        let source = anyhow::Error::new(error).context("database");
        if unreachable {
            return ServiceError {
                source: Some(source),
                ..ServiceError::new(ErrorKind::Unavailable, "The database is unavailable")
                    .with_hint("Retry in a few seconds.")
            };
        }
        ServiceError::internal(source)
    }
}

/// Errors of reaching the database rather than of the statement: I/O, the pool, and the
/// server's connection (class 08) and shutdown (57P01-57P03) codes.
fn database_unreachable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(database) => {
            database.code().is_some_and(|code| code.starts_with("08") || code.starts_with("57P"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_database_is_503_and_a_bad_statement_500() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(ServiceError::from(sqlx::Error::Io(refused)).kind, ErrorKind::Unavailable);
        assert_eq!(ServiceError::from(sqlx::Error::PoolTimedOut).kind, ErrorKind::Unavailable);
        assert_eq!(ServiceError::from(sqlx::Error::RowNotFound).kind, ErrorKind::Internal);
    }

    #[test]
    fn every_kind_round_trips_through_a_grpc_status() {
        for kind in ErrorKind::ALL {
            let original = ServiceError::new(kind, "something happened").with_hint("try again");
            let back = ServiceError::from_status(&original.to_status());
            assert_eq!(back.kind, kind, "{}", kind.code());
            assert_eq!(back.message, "something happened");
            assert_eq!(back.hint.as_deref(), Some("try again"));
        }
    }

    #[test]
    fn field_violations_survive_the_trip() {
        let original = ServiceError::validation(vec![
            FieldViolation::new("question", "must be 1 to 5000 characters"),
            FieldViolation::new("answer", "is required").with_hint("Say what the caller should hear."),
        ]);
        let status = original.to_status();
        // Plain gRPC clients (grpcurl) read which fields are wrong off the message.
        assert_eq!(status.message(), "Validation error: question must be 1 to 5000 characters; answer is required");
        let back = ServiceError::from_status(&status);
        assert_eq!(back.details, original.details);
        assert_eq!(back.message, "Validation error");
        assert_eq!(back.kind.http_status(), 400);
    }

    #[test]
    fn a_retry_time_travels_as_retry_info() {
        let retry_at_ms = crate::time::now_ms() + 30_000;
        let status = ServiceError::limited_until("Refreshed too recently", retry_at_ms).to_status();
        let delay = status.get_details_retry_info().and_then(|retry| retry.retry_delay).unwrap();
        assert!((29..=30).contains(&delay.as_secs()), "{delay:?}");
        let back = ServiceError::from_status(&status);
        assert_eq!(back.kind, ErrorKind::RateLimited);
        assert!((back.retry_at_ms.unwrap() - retry_at_ms).abs() < 1_000);
    }

    #[test]
    fn the_details_are_a_standard_google_rpc_status() {
        let status = ServiceError::invalid_field("teamId", "must be a UUID").to_status();
        let info = status.get_details_error_info().unwrap();
        assert_eq!((info.reason.as_str(), info.domain.as_str()), ("VALIDATION_ERROR", ERROR_DOMAIN));
        let bad_request = status.get_details_bad_request().unwrap();
        assert_eq!(bad_request.field_violations[0].field, "teamId");
        assert_eq!(bad_request.field_violations[0].description, "must be a UUID");
        assert!(status.get_details_retry_info().is_none());
    }

    #[test]
    fn internal_causes_are_not_sent() {
        let status = ServiceError::internal(anyhow::anyhow!("password=hunter2")).to_status();
        assert!(!status.message().contains("hunter2"));
    }

    #[test]
    fn foreign_statuses_are_classified_by_code() {
        let back = ServiceError::from_status(&tonic::Status::unavailable("tcp connect error"));
        assert_eq!(back.kind, ErrorKind::Unavailable);
        assert_eq!(back.message, "Service unavailable");
        assert_eq!(back.kind.http_status(), 503);
    }

    #[test]
    fn codes_are_unique() {
        let mut codes: Vec<_> = ErrorKind::ALL.iter().map(|kind| kind.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), ErrorKind::ALL.len());
    }
}
