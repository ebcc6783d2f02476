//! A client subteam after its creation: read, changed, deleted, given credits, and topped up
//! to its monthly allowance at the start of each of its billing periods.
//!
//! A top-up happens exactly once per period, whatever the number of identity replicas and
//! restarts: it advances the subteam's stored period end with a conditional `UPDATE` (the
//! end it read, or nothing) in the same transaction that moves the credits, so of two
//! replicas that see the same due period one moves credits and the other changes nothing.
//! Periods missed while no replica ran give one top-up, at the next start.

use sqlx::Row;
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::EventType;
use switchboard_kit::{ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{AccessFlags, Subteam};

use super::credits::{self, Kind};
use super::teams::{current_period_end, team_in};
use super::{IdentityStore, check_id};
use crate::validate;

/// What an update changes; `None` leaves a value as it is.
#[derive(Debug, Clone, Default)]
pub struct SubteamChange {
    pub name: Option<String>,
    pub total_monthly_credits: Option<i64>,
    /// Only the flags given change.
    pub access: Option<AccessFlags>,
}

/// What a top-up did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopUp {
    pub agency_team_id: String,
    pub subteam_id: String,
    /// Credits moved from the agency.
    pub moved: i64,
    /// Credits the agency lacked to reach the allowance (0 when it had enough).
    pub short: i64,
}

fn subteam_not_found() -> ServiceError {
    ServiceError::not_found("Subteam not found (not a live client subteam of this agency)")
}

/// The most due subteams one pass tops up; the next pass takes the rest.
const PER_PASS: i64 = 100;

impl IdentityStore {
    /// A live client subteam of the agency, with its balance and users. Another agency's
    /// subteam, a deleted one and an unknown id are all "not found".
    pub async fn subteam(&self, agency_team_id: &str, team_id: &str) -> ServiceResult<Subteam> {
        validate::all([validate::uuid("agencyTeamId", agency_team_id), validate::uuid("teamId", team_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        let team = team_in(&mut conn, team_id)
            .await?
            .filter(|team| !team.deleted && team.parent_team_id.as_deref() == Some(agency_team_id))
            .ok_or_else(subteam_not_found)?;
        drop(conn);
        let balance = self.balance(team_id).await?;
        let users = self.users_of(&[team_id.to_owned()]).await?.remove(team_id).unwrap_or_default();
        Ok(Subteam { team: Some(team), credit_balance: balance, users, invite_token: None })
    }

    /// Changes a subteam's name, allowance (from its next period on) or access flags.
    pub async fn update_subteam(
        &self,
        agency_team_id: &str,
        team_id: &str,
        change: SubteamChange,
    ) -> ServiceResult<Subteam> {
        let current = self.subteam(agency_team_id, team_id).await?;
        validate::all([
            change.name.as_deref().and_then(|name| limits::SUBTEAM_NAME.check("name", name)),
            change.total_monthly_credits.and_then(|c| limits::MONTHLY_CREDITS.check("totalMonthlyCredits", c)),
        ])?;
        let team = current.team.unwrap_or_default();
        let access = team.access.unwrap_or_default();
        let flags = change.access.unwrap_or_default();
        let flag = |given: Option<bool>, kept: bool| switchboard_kit::db::flag(given.unwrap_or(kept));
        sqlx::query(
            "UPDATE teams SET name = $1, monthly_credits = $2, access_users = $3, access_instructions = $4, \
             access_instructions_write = $5, access_testing = $6, access_knowledge_base = $7, \
             access_agent_configuration = $8, access_agent_creation = $9, access_conversations = $10, \
             access_crm = $11 WHERE id = $12",
        )
        .bind(change.name.as_deref().map_or(team.name.as_str(), str::trim))
        .bind(change.total_monthly_credits.unwrap_or(team.monthly_credits))
        .bind(flag(flags.users, access.users))
        .bind(flag(flags.instructions, access.instructions))
        .bind(flag(flags.instructions_write, access.instructions_write))
        .bind(flag(flags.testing, access.testing))
        .bind(flag(flags.knowledge_base, access.knowledge_base))
        .bind(flag(flags.agent_configuration, access.agent_configuration))
        .bind(flag(flags.agent_creation, access.agent_creation))
        .bind(flag(flags.conversations, access.conversations))
        .bind(flag(flags.crm, access.crm))
        .bind(team_id)
        .execute(self.db.pool())
        .await?;
        self.subteam(agency_team_id, team_id).await
    }

    /// Soft-deletes a subteam (its keys then meet "Team not found"); its balance stays with it.
    pub async fn delete_subteam(&self, agency_team_id: &str, team_id: &str) -> ServiceResult<Subteam> {
        let subteam = self.subteam(agency_team_id, team_id).await?;
        self.delete_team(team_id).await?;
        Ok(subteam)
    }

    /// The subteams whose period has ended, topped up; see the module's note.
    pub async fn top_up_due(&self) -> ServiceResult<Vec<TopUp>> {
        let now = now_ms();
        let due = sqlx::query(
            "SELECT s.team_id, s.current_period_end FROM subscriptions s JOIN teams t ON t.id = s.team_id \
             WHERE t.parent_team_id IS NOT NULL AND t.deleted_at IS NULL AND s.current_period_end <= $1 \
             ORDER BY s.current_period_end LIMIT $2",
        )
        .bind(now)
        .bind(PER_PASS)
        .fetch_all(self.db.pool())
        .await?;
        let mut done = Vec::new();
        for row in due {
            let (team_id, end): (String, i64) = (row.try_get("team_id")?, row.try_get("current_period_end")?);
            if let Some(top_up) = self.top_up(&team_id, end, now).await? {
                done.push(top_up);
            }
        }
        Ok(done)
    }

    /// Tops one subteam up for the period that ended at `end`, unless another replica did.
    async fn top_up(&self, team_id: &str, end: i64, now: i64) -> ServiceResult<Option<TopUp>> {
        check_id("teamId", team_id)?;
        let mut tx = self.db.begin_write().await?;
        let next = current_period_end(end, now, self.period_ms);
        let claimed = sqlx::query(
            "UPDATE subscriptions SET current_period_end = $1 WHERE team_id = $2 AND current_period_end = $3",
        )
        .bind(next)
        .bind(team_id)
        .bind(end)
        .execute(&mut *tx)
        .await?;
        if claimed.rows_affected() == 0 {
            return Ok(None);
        }
        let row = sqlx::query(
            "SELECT t.parent_team_id, t.monthly_credits, b.balance, a.balance AS agency_balance \
             FROM teams t JOIN credit_balances b ON b.team_id = t.id \
             JOIN credit_balances a ON a.team_id = t.parent_team_id WHERE t.id = $1",
        )
        .bind(team_id)
        .fetch_one(&mut *tx)
        .await?;
        let agency: String = row.try_get::<Option<String>, _>("parent_team_id")?.unwrap_or_default();
        let (allowance, balance, agency_balance): (i64, i64, i64) =
            (row.try_get("monthly_credits")?, row.try_get("balance")?, row.try_get("agency_balance")?);
        let wanted = (allowance - balance).max(0);
        let moved = wanted.min(agency_balance.max(0));
        let reason = "monthly allowance";
        if moved > 0 {
            credits::apply(&mut tx, &agency, -moved, Kind::TransferOut, reason, Some(team_id)).await?;
            credits::apply(&mut tx, team_id, moved, Kind::TransferIn, reason, Some(&agency)).await?;
        }
        let short = wanted - moved;
        if short > 0 {
            // The agency hears of it whatever its alert threshold: a client went without.
            let data = serde_json::json!({
                "teamId": agency,
                "balance": agency_balance - moved,
                "subteamId": team_id,
                "short": short,
                "reason": "a subteam's monthly allowance could not be met",
            });
            let resource = switchboard_proto::v1::event::Resource::Json(data.to_string());
            switchboard_kit::outbox::record(&mut tx, EventType::CreditsLow, (&agency, &agency), resource).await?;
        }
        tx.commit().await?;
        Ok(Some(TopUp { agency_team_id: agency, subteam_id: team_id.to_owned(), moved, short }))
    }
}
