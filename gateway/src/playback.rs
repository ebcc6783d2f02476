//! Recordings a browser can play: an `<audio>` element sends no headers, so a call's
//! `recordingUrl` carries its own short-lived authority, a signature over the team, the call and
//! the expiry (HMAC-SHA256 with the gateway's URL key). The gateway serves such a URL without an
//! API key, with `Range` support, from the conversations service. When recordings live in S3, the
//! service's presigned URL is given instead and the bytes never pass through the gateway.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use hmac::{Hmac, Mac};
use pingora::http::RequestHeader;
use sha2::Sha256;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::ReadRecordingRequest;

use switchboard_api::id::canonical_uuid;

use crate::config::UrlKey;
use crate::reply::Reply;
use crate::services::Services;

/// How long a playback URL works.
pub const VALID_FOR: Duration = Duration::from_secs(15 * 60);

/// How a key signs and checks playback URLs; the key itself is configuration (`config.rs`).
impl UrlKey {
    fn mac(&self, team_id: &str, call_id: &str, expires: i64) -> Hmac<Sha256> {
        // Any key length is accepted by HMAC.
        let mut mac =
            Hmac::<Sha256>::new_from_slice(self.secret()).unwrap_or_else(|_| unreachable!("HMAC takes any key"));
        mac.update(format!("{team_id}\n{call_id}\n{expires}").as_bytes());
        mac
    }

    /// The playback URL of a call's recording, under `base` (scheme and host of the gateway).
    pub fn url(&self, base: &str, team_id: &str, call_id: &str, now_ms: i64) -> String {
        let expires = now_ms / 1000 + VALID_FOR.as_secs() as i64;
        let signature = hex::encode(self.mac(team_id, call_id, expires).finalize().into_bytes());
        format!("{base}/v1/calls/{call_id}/recording?team={team_id}&expires={expires}&signature={signature}")
    }

    fn verify(&self, team_id: &str, call_id: &str, expires: i64, signature: &str, now_ms: i64) -> bool {
        let Ok(signature) = hex::decode(signature) else {
            return false;
        };
        expires >= now_ms / 1000 && self.mac(team_id, call_id, expires).verify_slice(&signature).is_ok()
    }
}

/// The call id of a playback path, `/v1/calls/{callId}/recording`.
pub fn call_of(path: &str) -> Option<&str> {
    path.strip_prefix("/v1/calls/")?.strip_suffix("/recording").filter(|id| !id.contains('/'))
}

fn forbidden() -> ServiceError {
    ServiceError::forbidden("This playback URL is invalid or has expired")
        .with_hint("Read the call again for a fresh recordingUrl.")
}

/// A `Range: bytes=a-b` header as (offset, length); `None` for the whole recording. Only single
/// ranges are served; a suffix range (`bytes=-n`) needs the size, so it is read as the tail.
fn range(header: &RequestHeader) -> Option<(u64, Option<u64>, Option<u64>)> {
    let spec = header.headers.get("range")?.to_str().ok()?.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (start, end) = spec.split_once('-')?;
    match (start.trim(), end.trim()) {
        ("", suffix) => suffix.parse().ok().map(|n| (0, None, Some(n))),
        (start, "") => start.parse().ok().map(|s| (s, None, None)),
        (start, end) => {
            let (start, end): (u64, u64) = (start.parse().ok()?, end.parse().ok()?);
            (end >= start).then(|| (start, Some(end - start + 1), None))
        }
    }
}

/// Answers a playback request: the recording (or the asked range of it) as it is read.
pub async fn serve(
    key: &UrlKey,
    services: &Services,
    header: &RequestHeader,
    call_id: &str,
    query: &[(String, String)],
) -> ServiceResult<Reply> {
    let value = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let (Some(team_id), Some(expires), Some(signature)) = (value("team"), value("expires"), value("signature")) else {
        return Err(forbidden());
    };
    let (Some(team_id), Some(call_id), Ok(expires)) =
        (canonical_uuid(team_id), canonical_uuid(call_id), expires.parse())
    else {
        return Err(forbidden());
    };
    if !key.verify(&team_id, &call_id, expires, signature, switchboard_kit::time::now_ms()) {
        return Err(forbidden());
    }
    let range = range(header);
    let (offset, length) = match range {
        Some((start, length, None)) => (start, length.unwrap_or(0)),
        // The size is learnt from the first chunk; a suffix needs it before reading.
        Some((_, _, Some(_))) | None => (0, 0),
    };
    let request = ReadRecordingRequest { team_id: team_id.clone(), call_id: call_id.clone(), offset, length };
    let stream = services.conversations.clone().read_recording(request).await;
    let mut stream = match stream {
        Ok(stream) => stream.into_inner(),
        Err(status) => {
            let error = ServiceError::from_status(&status);
            // An offset past the end is a range that cannot be satisfied.
            if error.kind == ErrorKind::Validation && range.is_some() {
                return unsatisfiable(services, &team_id, &call_id).await;
            }
            return Err(error);
        }
    };
    let first = stream.message().await?.ok_or_else(ServiceError::recording_not_found)?;
    let (content_type, size) = (first.content_type.clone(), first.size_bytes);
    let (offset, length, suffix_skip) = match range {
        Some((_, _, Some(suffix))) => {
            let length = suffix.min(size);
            (size - length, length, size - length)
        }
        Some((start, length, None)) => {
            let left = size.saturating_sub(start);
            (start, length.map_or(left, |l| l.min(left)), 0)
        }
        None => (0, size, 0),
    };
    if range.is_some() && length == 0 {
        return Ok(range_not_satisfiable(size));
    }
    let mut skip = suffix_skip;
    let mut remaining = length;
    let body =
        futures::stream::once(async move { Ok(first) }).chain(stream.map(|chunk| chunk)).filter_map(move |chunk| {
            let piece = match chunk {
                Ok(chunk) => {
                    let mut data = Bytes::from(chunk.data);
                    let dropped = skip.min(data.len() as u64);
                    skip -= dropped;
                    data = data.slice(usize::try_from(dropped).unwrap_or(data.len())..);
                    let kept = remaining.min(data.len() as u64);
                    remaining -= kept;
                    data.truncate(usize::try_from(kept).unwrap_or(0));
                    (!data.is_empty()).then_some(Ok(data))
                }
                Err(status) => Some(Err(ServiceError::from_status(&status))),
            };
            async move { piece }
        });
    let mut reply = Reply::stream(if range.is_some() { 206 } else { 200 }, content_type, Some(length), body.boxed())
        .with_header("Accept-Ranges", "bytes".to_owned())
        .with_header("Cache-Control", "private, max-age=900".to_owned());
    if range.is_some() {
        let end = (offset + length).saturating_sub(1);
        reply = reply.with_header("Content-Range", format!("bytes {offset}-{end}/{size}"));
    }
    Ok(reply)
}

/// 416 for a range that starts past the end, with the size in `Content-Range` as RFC 9110
/// asks, so that a player learns the length; the service is asked for the first byte to learn it.
async fn unsatisfiable(services: &Services, team_id: &str, call_id: &str) -> ServiceResult<Reply> {
    let request =
        ReadRecordingRequest { team_id: team_id.to_owned(), call_id: call_id.to_owned(), offset: 0, length: 1 };
    let mut stream = services.conversations.clone().read_recording(request).await?.into_inner();
    let first = stream.message().await?.ok_or_else(ServiceError::recording_not_found)?;
    Ok(range_not_satisfiable(first.size_bytes))
}

fn range_not_satisfiable(size: u64) -> Reply {
    let body = serde_json::json!({ "error": "The range is outside the recording", "code": "RANGE_NOT_SATISFIABLE" });
    Reply::json(416, body).with_header("Content-Range", format!("bytes */{size}"))
}

/// The public playback path in the API description: reached through a call's `recordingUrl`,
/// never built by hand, so it is documented for what it answers rather than for its inputs.
pub fn openapi_path(error: &serde_json::Value) -> serde_json::Value {
    let query = |name: &str, description: &str, schema: serde_json::Value| serde_json::json!({ "name": name, "in": "query", "required": true, "description": description, "schema": schema });
    let error_answer = |description: &str| serde_json::json!({ "description": description, "content": { "application/json": { "schema": error } } });
    let audio = serde_json::json!({ "audio/*": { "schema": { "type": "string", "contentMediaType": "audio/*" } } });
    serde_json::json!({
        "get": {
            "operationId": "playCallRecording",
            "tags": ["Calls"],
            "summary": "Play a call's recording from its signed `recordingUrl`.",
            "description": "Needs no API key: the URL's signature is its authority, for 15 minutes from \
                the read that gave it. Single byte ranges (`Range: bytes=a-b`, `a-`, `-n`) are answered \
                with 206 so that players can seek. When recordings are kept in S3, `recordingUrl` is a \
                presigned S3 URL instead and this path is not used.",
            "security": [],
            "parameters": [
                { "name": "callId", "in": "path", "required": true, "schema": { "type": "string", "format": "uuid" } },
                query("team", "The team the URL was signed for.", serde_json::json!({ "type": "string", "format": "uuid" })),
                query("expires", "Unix time in seconds after which the URL is refused.", serde_json::json!({ "type": "integer" })),
                query("signature", "HMAC-SHA256 over team, call and expiry, hex.", serde_json::json!({ "type": "string" })),
                { "name": "Range", "in": "header", "required": false, "schema": { "type": "string" } },
            ],
            "responses": {
                "200": { "description": "The whole recording.", "content": audio.clone() },
                "206": { "description": "The asked range; `Content-Range` says which.", "content": audio },
                "416": error_answer("The range starts past the end; `Content-Range: bytes */<size>` gives the size."),
                "403": error_answer("The signature is wrong or the URL has expired."),
                "404": error_answer("The call or its recording no longer exists."),
            },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_bind_team_call_and_expiry() {
        let key = UrlKey::new(b"a key");
        let (team, call) = ("9b0c6f5e-1111-4222-8333-944455556666", "01a20c88-29d0-7307-bb87-352125769735");
        let url = key.url("http://h", team, call, 1_000_000);
        let signature = url.rsplit("signature=").next().unwrap();
        let expires = 1_000 + VALID_FOR.as_secs() as i64;
        assert!(key.verify(team, call, expires, signature, 1_000_000));
        assert!(!key.verify(team, call, expires + 1, signature, 1_000_000), "another expiry");
        assert!(!key.verify(call, team, expires, signature, 1_000_000), "another team");
        assert!(!key.verify(team, call, expires, signature, (expires + 1) * 1000), "expired");
        assert!(!UrlKey::new(b"other").verify(team, call, expires, signature, 1_000_000), "another key");
        assert_eq!(call_of(&format!("/v1/calls/{call}/recording")), Some(call));
        assert_eq!(call_of("/v1/calls/x/y/recording"), None);
    }

    #[test]
    fn ranges_are_read_as_offsets() {
        let header = |value: &str| {
            let mut header = RequestHeader::build("GET", b"/", None).unwrap();
            header.insert_header("Range", value).unwrap();
            header
        };
        assert_eq!(range(&header("bytes=0-99")), Some((0, Some(100), None)));
        assert_eq!(range(&header("bytes=100-")), Some((100, None, None)));
        assert_eq!(range(&header("bytes=-50")), Some((0, None, Some(50))));
        assert_eq!(range(&header("bytes=5-1")), None);
        assert_eq!(range(&header("bytes=0-1,4-5")), None);
    }
}
