//! Reading a request body: JSON (content type 415, size 413, also from `Content-Length`
//! before reading, syntax 400) or a multipart upload (content type 415, size 413).

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

/// A `multipart/form-data` body, read whole but not yet parsed.
#[derive(Debug, Clone)]
pub struct Upload {
    pub boundary: String,
    pub body: bytes::Bytes,
}

/// Bodies this much over their limit are still read (and dropped) before the 413, so that
/// a client that sends the whole body before reading sees the answer instead of a reset.
fn drain_limit(max: usize) -> usize {
    max.saturating_mul(2).max(max.saturating_add(4 * 1024 * 1024)).min(128 * 1024 * 1024)
}

async fn read_capped(session: &mut Session, max: usize) -> ServiceResult<BytesMut> {
    let declared_len = session
        .req_header()
        .headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    if declared_len.is_some_and(|len| len > drain_limit(max)) {
        return Err(too_large(max));
    }
    let mut body = BytesMut::new();
    let mut seen = 0usize;
    while let Some(chunk) = session
        .read_request_body()
        .await
        .map_err(|e| ServiceError::new(ErrorKind::MalformedJson, format!("Cannot read the request body: {e}")))?
    {
        seen = seen.saturating_add(chunk.len());
        if seen > drain_limit(max) {
            return Err(too_large(max));
        }
        if seen <= max {
            body.extend_from_slice(&chunk);
        }
    }
    if seen > max {
        return Err(too_large(max));
    }
    Ok(body)
}

/// Reads an upload of at most `max` bytes in all.
pub async fn read_upload(session: &mut Session, max: usize) -> ServiceResult<Upload> {
    let content_type =
        session.req_header().headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let not_multipart = || {
        ServiceError::new(ErrorKind::UnsupportedMediaType, "Content-Type must be multipart/form-data")
            .with_hint("Send the file as a multipart form with the field `file` (and optional `name`, `notes`).")
    };
    let boundary = multer::parse_boundary(&content_type).map_err(|_| not_multipart())?;
    let body = read_capped(session, max).await?;
    Ok(Upload { boundary, body: body.freeze() })
}

/// `None` when the request has no body.
pub async fn read_json(session: &mut Session, max: usize) -> ServiceResult<Option<Value>> {
    let header = session.req_header();
    let content_type = header.headers.get("content-type").map(|v| v.to_str().unwrap_or_default().to_owned());
    let body = read_capped(session, max).await?;
    // An empty body is no body, whatever its declared type: `curl -d ''` on a refresh, which
    // takes none, sends a form type.
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if !content_type.as_deref().is_some_and(is_json) {
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
