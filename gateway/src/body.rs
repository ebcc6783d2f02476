//! Reading a JSON request body: content type (415), size (413, also from `Content-Length`
//! before reading), syntax (400).

use bytes::BytesMut;
use pingora::proxy::Session;
use serde_json::Value;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};

pub fn body_required() -> ServiceError {
    ServiceError::new(ErrorKind::MalformedJson, "Request body is required")
        .with_hint("Send a JSON object with Content-Type: application/json.")
}

fn too_large(max: usize) -> ServiceError {
    ServiceError::new(ErrorKind::PayloadTooLarge, format!("Request body is larger than {max} bytes"))
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// `None` when the request has no body.
pub async fn read_json(session: &mut Session, max: usize) -> ServiceResult<Option<Value>> {
    let header = session.req_header();
    let content_type = header.headers.get("content-type").map(|v| v.to_str().unwrap_or_default().to_owned());
    let declared_len =
        header.headers.get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<usize>().ok());
    if let Some(content_type) = &content_type
        && !is_json(content_type)
    {
        return Err(ServiceError::new(ErrorKind::UnsupportedMediaType, "Content-Type must be application/json")
            .with_hint("Send the body as JSON with Content-Type: application/json."));
    }
    if declared_len.is_some_and(|len| len > max) {
        return Err(too_large(max));
    }
    let mut body = BytesMut::new();
    while let Some(chunk) = session
        .read_request_body()
        .await
        .map_err(|e| ServiceError::new(ErrorKind::MalformedJson, format!("Cannot read the request body: {e}")))?
    {
        if body.len() + chunk.len() > max {
            return Err(too_large(max));
        }
        body.extend_from_slice(&chunk);
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if content_type.is_none() {
        return Err(ServiceError::new(ErrorKind::UnsupportedMediaType, "Content-Type must be application/json")
            .with_hint("Send the body as JSON with Content-Type: application/json."));
    }
    serde_json::from_slice(&body).map(Some).map_err(|error| {
        ServiceError::new(ErrorKind::MalformedJson, "Malformed JSON body").with_hint(format!("{error}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_media_types() {
        assert!(is_json("application/json"));
        assert!(is_json("application/json; charset=utf-8"));
        assert!(is_json("application/merge-patch+json"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("multipart/form-data; boundary=x"));
    }
}
