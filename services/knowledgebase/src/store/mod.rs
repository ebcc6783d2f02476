//! The knowledgebase store. SQL is written once for both engines (see
//! `switchboard_kit::db`); rows come back as the proto messages the service answers with.

mod documents;
mod entries;
mod extracted;
mod knowledgebases;
mod outbox;
mod sources;
mod transitions;
mod webpages;

use switchboard_kit::db::Db;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult};

pub use documents::{EXTRACT_DOCUMENT, NewDocument};
pub use entries::{EntryText, IndexedEntry, StaleEntry};
pub use extracted::ExtractedEntry;
pub use knowledgebases::UNLINK_AGENTS;
pub use outbox::OutboxItem;
pub use sources::{RefreshInterval, SourceKind, SourcePatch, url_violation};
pub use webpages::{REFRESH_INTERVAL_MS, SCRAPE_WEBPAGE, ScheduledRefresh};

#[derive(Clone, Debug)]
pub struct KnowledgeStore {
    db: Db,
    /// The least time between two refreshes of a webpage ([`REFRESH_INTERVAL_MS`]); a daily
    /// schedule refreshes after one, a weekly one after seven. Shorter only in tests.
    refresh_day_ms: i64,
}

impl KnowledgeStore {
    pub async fn open(url: &str) -> anyhow::Result<Self> {
        Ok(Self { db: Db::connect(url, &crate::MIGRATIONS).await?, refresh_day_ms: REFRESH_INTERVAL_MS })
    }

    /// The same store with another refresh day (`SWITCHBOARD_WEBPAGE_REFRESH_DAY`, for tests).
    #[must_use]
    pub fn with_refresh_day(mut self, day_ms: i64) -> Self {
        self.refresh_day_ms = day_ms.max(1);
        self
    }

    pub fn refresh_day_ms(&self) -> i64 {
        self.refresh_day_ms
    }

    pub fn db(&self) -> &Db {
        &self.db
    }
}

pub fn knowledgebase_not_found() -> ServiceError {
    ServiceError::not_found("Knowledgebase not found")
}

pub fn reference_not_found() -> ServiceError {
    ServiceError::not_found("Reference not found")
}

pub(crate) fn check_ids(ids: &[(&str, &str)]) -> ServiceResult<()> {
    let violations: Vec<_> = ids
        .iter()
        .filter(|(_, id)| uuid::Uuid::parse_str(id).is_err())
        .map(|(field, _)| FieldViolation::new(*field, "must be a UUID"))
        .collect();
    if violations.is_empty() { Ok(()) } else { Err(ServiceError::validation(violations)) }
}

pub(crate) fn encode_vector(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|value| value.to_le_bytes()).collect()
}

pub(crate) fn decode_vector(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_through_bytes() {
        let vector = vec![0.5, -1.25, f32::MIN_POSITIVE, 3.0e-8];
        assert_eq!(decode_vector(&encode_vector(&vector)), vector);
    }
}
