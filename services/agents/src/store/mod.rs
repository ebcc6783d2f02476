//! The agents store: SQL once for both engines (see `switchboard_kit::db`).

mod agents;
mod instructions;

use switchboard_kit::db::Db;
use switchboard_kit::{ServiceError, ServiceResult};

pub use agents::{AgentChanges, NewAgent};
pub use instructions::HISTORY_LIMIT;

#[derive(Clone, Debug)]
pub struct AgentStore {
    db: Db,
}

impl AgentStore {
    pub async fn open(url: &str) -> anyhow::Result<Self> {
        Ok(Self { db: Db::connect(url, &crate::MIGRATIONS).await? })
    }

    pub fn db(&self) -> &Db {
        &self.db
    }
}

pub(crate) fn agent_not_found() -> ServiceError {
    ServiceError::not_found("Agent not found")
}

/// An id that is not a UUID can match no row; say so instead of looking.
pub(crate) fn check_ids(ids: &[(&str, &str)]) -> ServiceResult<()> {
    let violations: Vec<_> = ids
        .iter()
        .filter(|(_, id)| uuid::Uuid::parse_str(id).is_err())
        .map(|(field, _)| switchboard_kit::FieldViolation::new(*field, "must be a UUID"))
        .collect();
    if violations.is_empty() { Ok(()) } else { Err(ServiceError::validation(violations)) }
}
