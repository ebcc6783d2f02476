//! The agents store: SQL once for both engines (see `switchboard_kit::db`).

mod agents;
mod changes;
mod instructions;
mod runtime;

use switchboard_kit::db::Db;
use switchboard_kit::{ServiceError, ServiceResult};

pub use agents::{AgentChanges, NewAgent};
pub use changes::{ChangeRow, DELETED, UPDATED, WatchError};
pub use instructions::HISTORY_LIMIT;

/// The kind of job that rewrites an agent's prompt from its instructions (`prompt::OptimizePrompt`):
/// the store enqueues it whenever the instructions or the agent change.
pub const OPTIMIZE_PROMPT: &str = "optimize_prompt";

#[derive(Clone, Debug)]
pub struct AgentStore {
    db: Db,
    /// Rung after a change to agents is committed, so that watchers hear of it at once
    /// (changes committed by another replica are found by the watch feed's poll).
    changed: std::sync::Arc<tokio::sync::Notify>,
}

impl AgentStore {
    pub async fn open(url: &str) -> anyhow::Result<Self> {
        Ok(Self { db: Db::connect(url, &crate::MIGRATIONS).await?, changed: Default::default() })
    }

    /// Rung after each committed change to agents.
    pub fn changes_committed(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.changed.clone()
    }

    fn changed(&self) {
        self.changed.notify_one();
    }

    pub fn db(&self) -> &Db {
        &self.db
    }
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

/// Both checks' violations at once, and the second one's value when neither failed.
pub(crate) fn together<T>(first: ServiceResult<()>, second: ServiceResult<T>) -> ServiceResult<T> {
    match (first, second) {
        (Ok(()), second) => second,
        (Err(error), Ok(_)) => Err(error),
        (Err(mut error), Err(other)) => {
            error.details.extend(other.details);
            Err(error)
        }
    }
}
