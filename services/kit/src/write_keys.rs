//! Exactly-once creates across an answer that was lost.
//!
//! The gateway keeps a write's answer under its `Idempotency-Key` (gateway/src/idempotency),
//! but releases the key when the answer is a 5xx: the write may not have happened, and a retry
//! must be able to do it. Yet a 5xx can follow a commit (the primary failed over between the
//! commit and its acknowledgement, or the service died after committing): the retry then
//! creates the resource a second time, or meets its own first copy (a contact's number is
//! taken: 409). So the gateway also sends a digest of the key to the services as
//! [`METADATA`], and a service that creates something records `(team, key, operation) → id`
//! in the transaction that creates it. A retry whose key is recorded is answered with the
//! resource made the first time, whatever happened to the first answer.
//!
//! Recorded keys are kept as long as the gateway keeps answers (a day) and pruned by the
//! writes that record new ones.

use std::future::Future;

use sha2::{Digest, Sha256};
use sqlx::AnyConnection;

use crate::ServiceResult;
use crate::time::now_ms;

/// The gRPC metadata carrying a write's key: 64 lowercase hex characters.
pub const METADATA: &str = "x-switchboard-write-key";
/// How long a recorded key answers a retry: as long as the gateway keeps an answer.
const KEEP_MS: i64 = 24 * 60 * 60 * 1000;

tokio::task_local! {
    /// The key of the write being answered by this task: every gRPC call the task makes
    /// carries it (`grpc::client::Traced`).
    static CURRENT: WriteKey;
}

/// The digest that names one write of one caller; never the client's key itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteKey(String);

impl WriteKey {
    /// The key of a request: its parts (team, caller, the client's key, the request's
    /// fingerprint) are length-prefixed, so that no two different requests share a key.
    pub fn of(parts: &[&str]) -> WriteKey {
        let mut hash = Sha256::new();
        for part in parts {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
        WriteKey(hex::encode(hash.finalize()))
    }

    /// The key a call carries, if it carries a well-formed one (anything else is ignored: the
    /// write then happens as a write without a key).
    pub fn from_metadata(metadata: &tonic::metadata::MetadataMap) -> Option<WriteKey> {
        let value = metadata.get(METADATA)?.to_str().ok()?;
        let well_formed = value.len() == 64 && value.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
        well_formed.then(|| WriteKey(value.to_owned()))
    }

    /// Runs `work` with this key sent on each of its gRPC calls.
    pub async fn scope<F: Future>(self, work: F) -> F::Output {
        CURRENT.scope(self, work).await
    }

    /// The key of the write this task answers, as a header value.
    pub(crate) fn current_header() -> Option<http::HeaderValue> {
        CURRENT.try_with(|key| http::HeaderValue::from_str(&key.0).ok()).ok().flatten()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The resource an earlier write with `key` created by `operation` in `team_id`, if any.
pub async fn recorded(
    conn: &mut AnyConnection,
    team_id: &str,
    key: &WriteKey,
    operation: &str,
) -> ServiceResult<Option<String>> {
    let row: Option<(String,)> = sqlx::query_as(
        "SELECT resource_id FROM write_keys WHERE team_id = $1 AND write_key = $2 AND operation = $3 \
         AND created_at >= $4",
    )
    .bind(team_id)
    .bind(key.as_str())
    .bind(operation)
    .bind(now_ms() - KEEP_MS)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map(|(id,)| id))
}

/// Records that `key` created `resource_id` by `operation`, in the caller's transaction (so
/// that the record exists exactly when the resource does). A key recorded already (an
/// expired record, or a concurrent retry that won) is replaced: the caller looked it up first
/// in the same transaction.
pub async fn record(
    conn: &mut AnyConnection,
    team_id: &str,
    key: &WriteKey,
    operation: &str,
    resource_id: &str,
) -> ServiceResult<()> {
    let now = now_ms();
    // One write in 32 prunes: the index on created_at makes it cheap, and doing it on every
    // write would have concurrent writers queue on the same expired rows.
    if rand::random::<u8>() < 8 {
        sqlx::query("DELETE FROM write_keys WHERE created_at < $1").bind(now - KEEP_MS).execute(&mut *conn).await?;
    }
    sqlx::query(
        "INSERT INTO write_keys (team_id, write_key, operation, resource_id, created_at) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (team_id, write_key, operation) DO UPDATE SET resource_id = excluded.resource_id, created_at = excluded.created_at",
    )
    .bind(team_id)
    .bind(key.as_str())
    .bind(operation)
    .bind(resource_id)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The resources an earlier write with `key` created by `operation`, for a write that makes
/// several (see [`record_all`]).
pub async fn recorded_all(
    conn: &mut AnyConnection,
    team_id: &str,
    key: &WriteKey,
    operation: &str,
) -> ServiceResult<Option<Vec<String>>> {
    let made = recorded(conn, team_id, key, operation).await?;
    Ok(made.map(|ids| ids.split(',').filter(|id| !id.is_empty()).map(str::to_owned).collect()))
}

/// Records that `key` created `ids` by `operation`, in order, in one row: ids are UUIDs, which
/// hold no comma.
pub async fn record_all(
    conn: &mut AnyConnection,
    team_id: &str,
    key: &WriteKey,
    operation: &str,
    ids: &[String],
) -> ServiceResult<()> {
    record(conn, team_id, key, operation, &ids.join(",")).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_digests_of_their_length_prefixed_parts() {
        let key = WriteKey::of(&["team", "key:1", "order-42", "f"]);
        assert_eq!(key.as_str().len(), 64);
        assert_eq!(key, WriteKey::of(&["team", "key:1", "order-42", "f"]));
        assert_ne!(key, WriteKey::of(&["team", "key:1", "order-4", "2f"]));
        assert_ne!(key, WriteKey::of(&["team", "key:2", "order-42", "f"]));
    }

    #[test]
    fn only_well_formed_keys_are_read_from_metadata() {
        let mut metadata = tonic::metadata::MetadataMap::new();
        assert_eq!(WriteKey::from_metadata(&metadata), None);
        let key = WriteKey::of(&["a"]);
        metadata.insert(METADATA, key.as_str().parse().unwrap());
        assert_eq!(WriteKey::from_metadata(&metadata), Some(key));
        metadata.insert(METADATA, "not-a-digest".parse().unwrap());
        assert_eq!(WriteKey::from_metadata(&metadata), None);
        metadata.insert(METADATA, "A".repeat(64).parse().unwrap());
        assert_eq!(WriteKey::from_metadata(&metadata), None);
    }

    #[tokio::test]
    async fn the_current_key_is_the_scopes() {
        assert!(WriteKey::current_header().is_none());
        let key = WriteKey::of(&["b"]);
        let header = key.clone().scope(async { WriteKey::current_header() }).await;
        assert_eq!(header.and_then(|value| value.to_str().ok().map(str::to_owned)), Some(key.as_str().to_owned()));
    }
}
