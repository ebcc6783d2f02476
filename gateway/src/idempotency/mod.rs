//! `Idempotency-Key` on writes: a retried `POST`, `PUT`, `PATCH` or `DELETE` gets the first
//! request's answer instead of doing the work again.
//!
//! A key belongs to its caller: the API key, or the signed-in person, within the key-owning
//! team (as Stripe scopes keys to the account and its key), so that one caller's kept answer is
//! never another's. The first request with a key claims it with the request's fingerprint
//! (method, path with query, body); its answer is then kept for [`KEEP_FOR`]. A repeat with the
//! same fingerprint gets the kept answer (plus `Idempotent-Replayed: true`) without reaching a
//! service or the rate limiter; with another fingerprint it is 422 `IDEMPOTENCY_KEY_REUSED`;
//! while the first is still being answered it is 409 `IDEMPOTENCY_KEY_IN_USE`. Answers of 5xx
//! and 429 are not kept (the key is released: a retry does the work, and a service that had
//! committed it answers with what it made: `switchboard_kit::write_keys`), every other answer is,
//! errors included, as the outcome of that request. A success that showed a secret once (a new
//! key, a webhook secret, an invitation link) is kept as a marker only, never the secret: its
//! repeat is 409 `IDEMPOTENCY_SECRET_SHOWN`.
//!
//! The caller's access is checked before a key's state is looked at (`app.rs`): a stored answer
//! is only ever sent to a caller who may make the request now.
//!
//! Claims and answers live in Redis when configured (every gateway replica sees them), in
//! process otherwise, and in process for as long as Redis does not answer in time.

mod memory;
mod redis;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use switchboard_kit::{ErrorKind, FieldViolation, ServiceError};

use crate::reply::Reply;

pub const HEADER: &str = "idempotency-key";
/// Sent on an answer that was kept from an earlier request.
pub const REPLAYED_HEADER: &str = "Idempotent-Replayed";
/// How long an answer is kept.
pub const KEEP_FOR: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a claim holds when its gateway dies before answering: the key is usable again
/// after it. Longer than any request may take.
pub const CLAIM_FOR: Duration = Duration::from_secs(5 * 60);
const MAX_KEY_CHARS: usize = 255;

/// A checked `Idempotency-Key` value: 1 to 255 printable ASCII characters.
pub fn parse_key(value: &[u8]) -> Result<String, ServiceError> {
    let printable = value.iter().all(|byte| (0x20..=0x7e).contains(byte));
    let text = std::str::from_utf8(value).ok().filter(|_| printable).map(str::trim).unwrap_or_default();
    if text.is_empty() || text.len() > MAX_KEY_CHARS {
        return Err(ServiceError::validation(vec![FieldViolation::new(
            "Idempotency-Key",
            "must be 1 to 255 printable ASCII characters",
        )]));
    }
    Ok(text.to_owned())
}

/// What makes two requests "the same" for a key: method, path with query, and body.
pub fn fingerprint(method: &str, path_and_query: &str, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    for part in [method.as_bytes(), path_and_query.as_bytes(), body] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hex::encode(hash.finalize())
}

/// The bytes of a multipart body that say what was sent: the body without its boundary,
/// which each client picks at random, so that a retried upload has the same fingerprint.
pub fn without_boundary(body: &[u8], boundary: &str) -> Vec<u8> {
    let boundary = boundary.as_bytes();
    if boundary.is_empty() {
        return body.to_vec();
    }
    let mut kept = Vec::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = rest.windows(boundary.len()).position(|window| window == boundary) {
        kept.extend_from_slice(&rest[..at]);
        rest = &rest[at + boundary.len()..];
    }
    kept.extend_from_slice(rest);
    kept
}

/// An answer as it is kept: what the client saw, minus the per-request headers (request id,
/// rate limits).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Kept {
    pub status: u16,
    pub content_type: String,
    pub headers: Vec<(String, String)>,
    /// The body as sent (UTF-8: writes answer JSON or nothing).
    pub body: String,
    /// The answer showed a secret once: only this marker is kept, with no body or headers.
    #[serde(default)]
    pub shown_once: bool,
}

impl Kept {
    /// A kept `201 {}`.
    #[cfg(test)]
    pub fn created_for_tests() -> Kept {
        Kept::of(&Reply::raw(201, "application/json", bytes::Bytes::from_static(b"{}")), false)
            .unwrap_or_else(|| unreachable!("a 201 is kept"))
    }

    /// `None` for answers that are not kept: 5xx, 429, and streamed bodies. A success of an
    /// operation that `shows_secret` is kept as a marker without its body.
    pub fn of(reply: &Reply, shows_secret: bool) -> Option<Kept> {
        if reply.status >= 500 || reply.status == 429 || reply.streamed.is_some() {
            return None;
        }
        if shows_secret && (200..300).contains(&reply.status) {
            let content_type = "application/json".to_owned();
            return Some(Kept {
                status: reply.status,
                content_type,
                headers: Vec::new(),
                body: String::new(),
                shown_once: true,
            });
        }
        let (content_type, body) = match &reply.raw {
            Some((content_type, bytes)) => (content_type.to_string(), String::from_utf8(bytes.to_vec()).ok()?),
            None => ("application/json".to_owned(), serde_json::to_string(&reply.body).ok()?),
        };
        let headers = reply.headers.iter().map(|(name, value)| (name.to_string(), value.clone())).collect();
        Some(Kept { status: reply.status, content_type, headers, body, shown_once: false })
    }

    pub fn replay(self) -> Reply {
        if self.shown_once {
            return Reply::error(&secret_shown()).with_header(REPLAYED_HEADER, "true".to_owned());
        }
        let mut reply = Reply::raw(self.status, self.content_type, bytes::Bytes::from(self.body));
        for (name, value) in self.headers {
            reply = reply.with_header(name, value);
        }
        reply.with_header(REPLAYED_HEADER, "true".to_owned())
    }
}

/// A key's state as stored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "state", rename_all = "camelCase")]
enum Record {
    /// Claimed by a request being answered; `token` tells that claim from a later one.
    Running {
        fingerprint: String,
        token: String,
    },
    Done {
        fingerprint: String,
        kept: Kept,
    },
}

impl Record {
    fn fingerprint(&self) -> &str {
        match self {
            Record::Running { fingerprint, .. } | Record::Done { fingerprint, .. } => fingerprint,
        }
    }

    /// What a request with `fingerprint` gets when it finds this record.
    fn outcome(self, fingerprint: &str) -> Begin {
        if self.fingerprint() != fingerprint {
            return Begin::Refused(reused());
        }
        match self {
            Record::Running { .. } => Begin::Refused(in_use()),
            Record::Done { kept, .. } => Begin::Replay(Box::new(kept)),
        }
    }
}

fn reused() -> ServiceError {
    ServiceError::new(ErrorKind::IdempotencyKeyReused, "This Idempotency-Key was used for a different request")
        .with_hint("A key stands for one request (method, path and body); use a new key for a new request.")
}

fn secret_shown() -> ServiceError {
    ServiceError::new(
        ErrorKind::IdempotencySecretShown,
        "The first request with this Idempotency-Key succeeded, and its answer showed a secret once",
    )
    .with_hint(
        "The secret is not kept for replays. Find what was made in its list (GET), and revoke and make it again if \
         the secret was lost.",
    )
}

fn in_use() -> ServiceError {
    ServiceError::new(ErrorKind::IdempotencyKeyInUse, "A request with this Idempotency-Key is still being answered")
        .with_hint("Retry once the first request has been answered.")
}

/// What a request with a key does.
pub enum Begin {
    /// Do the work, then [`Idempotency::finish`] the claim.
    Claimed(Claim),
    /// Answer with what the first request got.
    Replay(Box<Kept>),
    /// 409 or 422.
    Refused(ServiceError),
}

/// A claimed key, to be finished with the answer.
#[derive(Debug)]
pub struct Claim {
    slot: String,
    running: Record,
    in_redis: bool,
}

pub struct Idempotency {
    memory: memory::MemoryStore,
    redis: Option<redis::RedisStore>,
}

impl Idempotency {
    pub fn new(redis: Option<std::sync::Arc<switchboard_kit::redis_client::RedisClient>>) -> Self {
        Self { memory: memory::MemoryStore::default(), redis: redis.map(redis::RedisStore::new) }
    }

    /// Claims `key` of `caller` (of `team_id`) for a request with `fingerprint`, or says why not.
    pub async fn begin(&self, team_id: &str, caller: &str, key: &str, fingerprint: &str) -> Begin {
        let slot = slot(team_id, caller, key);
        let running =
            Record::Running { fingerprint: fingerprint.to_owned(), token: uuid::Uuid::new_v4().simple().to_string() };
        if let Some(redis) = &self.redis
            && let Some(found) = redis.claim(&slot, &running).await
        {
            return match found {
                None => Begin::Claimed(Claim { slot, running, in_redis: true }),
                Some(record) => record.outcome(fingerprint),
            };
        }
        match self.memory.claim(&slot, &running) {
            None => Begin::Claimed(Claim { slot, running, in_redis: false }),
            Some(record) => record.outcome(fingerprint),
        }
    }

    /// Keeps the answer of a claimed key ([`Kept::of`] it), or releases the key when the
    /// answer is not kept.
    pub async fn finish(&self, claim: Claim, kept: Option<Kept>) {
        let done = kept.map(|kept| Record::Done { fingerprint: claim.running.fingerprint().to_owned(), kept });
        if claim.in_redis
            && let Some(redis) = &self.redis
        {
            redis.settle(&claim.slot, &claim.running, done.as_ref()).await;
            return;
        }
        self.memory.settle(&claim.slot, &claim.running, done);
    }
}

/// Where a caller's key is stored; the key is hashed so that any printable key makes a tidy name.
fn slot(team_id: &str, caller: &str, key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    format!("switchboard:idempotency:{team_id}:{caller}:{}", hex::encode(digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_printable_and_at_most_255_characters() {
        assert_eq!(parse_key(b"order-42").unwrap(), "order-42");
        assert!(parse_key(b"").is_err());
        assert!(parse_key(b"   ").is_err());
        assert!(parse_key("caf\u{e9}".as_bytes()).is_err());
        assert!(parse_key(b"tab\there").is_err());
        assert!(parse_key(&[b'k'; 255]).is_ok());
        assert!(parse_key(&[b'k'; 256]).is_err());
    }

    #[test]
    fn fingerprints_tell_method_path_and_body_apart() {
        let base = fingerprint("POST", "/v1/contacts", b"{}");
        assert_eq!(base, fingerprint("POST", "/v1/contacts", b"{}"));
        assert_ne!(base, fingerprint("PUT", "/v1/contacts", b"{}"));
        assert_ne!(base, fingerprint("POST", "/v1/contacts?teamId=x", b"{}"));
        assert_ne!(base, fingerprint("POST", "/v1/contacts", b"{\"a\":1}"));
        // Parts are length-prefixed: moving bytes between them changes the fingerprint.
        assert_ne!(fingerprint("POST", "/a", b"b"), fingerprint("POST", "/ab", b""));
    }

    #[test]
    fn multipart_fingerprints_ignore_the_boundary() {
        let one = b"--abc\r\ncontent\r\n--abc--";
        let two = b"--xyz\r\ncontent\r\n--xyz--";
        assert_eq!(without_boundary(one, "abc"), without_boundary(two, "xyz"));
        assert_ne!(without_boundary(one, "abc"), without_boundary(b"--abc\r\nother\r\n--abc--", "abc"));
    }

    #[test]
    fn a_record_answers_by_fingerprint_and_state() {
        let running = Record::Running { fingerprint: "f".into(), token: "t".into() };
        assert!(matches!(running.clone().outcome("f"), Begin::Refused(e) if e.kind == ErrorKind::IdempotencyKeyInUse));
        assert!(matches!(running.outcome("g"), Begin::Refused(e) if e.kind == ErrorKind::IdempotencyKeyReused));
        let kept = Kept::created_for_tests();
        let done = Record::Done { fingerprint: "f".into(), kept };
        assert!(matches!(done.clone().outcome("f"), Begin::Replay(kept) if kept.status == 201));
        assert!(matches!(done.outcome("g"), Begin::Refused(e) if e.kind == ErrorKind::IdempotencyKeyReused));
    }

    #[test]
    fn server_errors_and_rate_limits_are_not_kept() {
        assert!(Kept::of(&Reply::json(500, serde_json::json!({})), false).is_none());
        assert!(Kept::of(&Reply::json(503, serde_json::json!({})), false).is_none());
        assert!(Kept::of(&Reply::json(429, serde_json::json!({})), false).is_none());
        let kept = Kept::of(&Reply::json(400, serde_json::json!({"code": "VALIDATION_ERROR"})), false).unwrap();
        assert_eq!((kept.status, kept.body.as_str()), (400, "{\"code\":\"VALIDATION_ERROR\"}"));
    }

    #[test]
    fn a_replay_is_the_kept_answer_marked_as_replayed() {
        let kept = Kept::of(&Reply::json(201, serde_json::json!({"data": {"id": "c1"}})), false).unwrap();
        let reply = kept.replay();
        assert_eq!(reply.status, 201);
        assert!(reply.headers.iter().any(|(name, value)| name == REPLAYED_HEADER && value == "true"));
        assert_eq!(reply.raw.as_ref().map(|(_, body)| body.to_vec()), Some(b"{\"data\":{\"id\":\"c1\"}}".to_vec()));
    }

    #[test]
    fn a_shown_secret_is_kept_as_a_marker_and_replayed_as_a_conflict() {
        let answer = Reply::json(201, serde_json::json!({"data": {"key": "ew_secret"}}));
        let kept = Kept::of(&answer, true).expect("a success is kept as a marker");
        assert!(kept.shown_once);
        assert!(!serde_json::to_string(&kept).unwrap().contains("ew_secret"), "the secret is not stored");
        let reply = kept.replay();
        assert_eq!(reply.status, 409);
        assert_eq!(reply.body["code"], "IDEMPOTENCY_SECRET_SHOWN");
        // A refusal of such an operation holds no secret: it is kept as it was.
        let refused = Kept::of(&Reply::json(409, serde_json::json!({"code": "CONFLICT"})), true).unwrap();
        assert!(!refused.shown_once);
    }

    #[test]
    fn callers_of_one_team_have_their_own_slots() {
        assert_ne!(slot("t", "key:1", "k"), slot("t", "key:2", "k"));
        assert_ne!(slot("t", "key:1", "k"), slot("t", "user:1", "k"));
        assert_ne!(slot("t", "key:1", "k"), slot("u", "key:1", "k"));
    }
}
