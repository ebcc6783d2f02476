//! The identity store. SQL is written once for both engines (see `switchboard_kit::db`);
//! rows come back as the proto messages the service answers with, so there is one model.

pub mod accounts;
mod audit;
mod credentials;
mod credits;
mod keys;
pub mod links;
pub mod members;
pub mod passkeys;
pub mod profile;
pub mod second_factor;
mod sessions;
pub mod sso;
mod subteams;
mod teams;
mod users;

use sqlx::Row;
use sqlx::any::AnyRow;
use switchboard_kit::ServiceResult;
use switchboard_kit::db::Db;
use switchboard_proto::v1::{AccessConfig, Team};

pub use credits::Debit;
pub use subteams::{SubteamChange, TopUp};
pub use teams::{DEFAULT_PERIOD_MS, NewSubteam, NewTeam};

#[derive(Clone, Debug)]
pub struct IdentityStore {
    db: Db,
    /// The length of a billing period (`SWITCHBOARD_BILLING_PERIOD`, 30 days): subscriptions
    /// roll over, and subteams are topped up to their allowance, once per period.
    period_ms: i64,
    /// Seals the TOTP secrets at rest (`crate::sealing`); without one (store tests, admin
    /// commands) they are kept as they are. The service is never built without one.
    sealer: Option<std::sync::Arc<crate::sealing::Sealer>>,
}

/// The columns that make a [`Team`], in the order [`team_from_row`] reads them.
const TEAM_COLUMNS: &str = "t.id, t.name, t.parent_team_id, t.owns_agency, t.monthly_credits, \
     t.access_users, t.access_instructions, t.access_instructions_write, t.access_testing, \
     t.access_knowledge_base, t.access_agent_configuration, t.access_agent_creation, \
     t.access_conversations, t.access_crm, t.created_at, t.deleted_at";

impl IdentityStore {
    pub async fn open(url: &str) -> anyhow::Result<Self> {
        Ok(Self::from_db(Db::connect(url, &crate::MIGRATIONS).await?))
    }

    pub fn from_db(db: Db) -> Self {
        Self { db, period_ms: teams::DEFAULT_PERIOD_MS, sealer: None }
    }

    /// The same store, sealing the secrets it keeps with `sealer`.
    pub fn with_sealer(self, sealer: crate::sealing::Sealer) -> Self {
        Self { sealer: Some(std::sync::Arc::new(sealer)), ..self }
    }

    /// The same store with billing periods of `period_ms`.
    pub fn with_billing_period(self, period_ms: i64) -> Self {
        Self { period_ms: period_ms.max(1), ..self }
    }

    pub fn db(&self) -> &Db {
        &self.db
    }
}

fn team_from_row(row: &AnyRow) -> Result<Team, sqlx::Error> {
    let flag = |name: &str| -> Result<bool, sqlx::Error> { Ok(row.try_get::<i64, _>(name)? != 0) };
    Ok(Team {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        parent_team_id: row.try_get("parent_team_id")?,
        owns_agency: flag("owns_agency")?,
        monthly_credits: row.try_get("monthly_credits")?,
        access: Some(AccessConfig {
            users: flag("access_users")?,
            instructions: flag("access_instructions")?,
            instructions_write: flag("access_instructions_write")?,
            testing: flag("access_testing")?,
            knowledge_base: flag("access_knowledge_base")?,
            agent_configuration: flag("access_agent_configuration")?,
            agent_creation: flag("access_agent_creation")?,
            conversations: flag("access_conversations")?,
            crm: flag("access_crm")?,
        }),
        created_at_ms: row.try_get("created_at")?,
        deleted: row.try_get::<Option<i64>, _>("deleted_at")?.is_some(),
    })
}

/// Ids arrive as strings from any gRPC consumer; a malformed one can match no row.
fn check_id(field: &str, id: &str) -> ServiceResult<()> {
    crate::validate::all([crate::validate::uuid(field, id)])
}
