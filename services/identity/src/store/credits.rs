//! Credit balances and their append-only ledger. A balance changes only through
//! [`apply`], which moves it with one conditional `UPDATE` (so it can never go below zero,
//! whatever runs concurrently) and writes the ledger row in the same transaction.

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::limits;
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::EventType;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{CreditEntry, CreditsAlert, TransferCreditsResponse, UsageDay};

use super::{IdentityStore, check_id};

/// A debit's reference: `call:<uuid>` and the like.
const REFERENCE: limits::Length = limits::Length::new(1, 255);
use crate::validate;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Grant,
    Debit,
    Refund,
    TransferIn,
    TransferOut,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Grant => "grant",
            Kind::Debit => "debit",
            Kind::Refund => "refund",
            Kind::TransferIn => "transfer_in",
            Kind::TransferOut => "transfer_out",
        }
    }
}

const ENTRY_COLUMNS: &str = "id, team_id, delta, balance_after, kind, reason, reference_id, created_at";

fn entry_from_row(row: &AnyRow) -> Result<CreditEntry, sqlx::Error> {
    Ok(CreditEntry {
        id: row.try_get("id")?,
        team_id: row.try_get("team_id")?,
        delta: row.try_get("delta")?,
        balance_after: row.try_get("balance_after")?,
        kind: row.try_get("kind")?,
        reason: row.try_get("reason")?,
        reference_id: row.try_get("reference_id")?,
        created_at_ms: row.try_get("created_at")?,
    })
}

/// Moves `team_id`'s balance by `delta` and records it. A debit larger than the balance
/// fails with `INSUFFICIENT_CREDITS` and changes nothing.
pub(super) async fn apply(
    conn: &mut AnyConnection,
    team_id: &str,
    delta: i64,
    kind: Kind,
    reason: &str,
    reference_id: Option<&str>,
) -> ServiceResult<CreditEntry> {
    let now = now_ms();
    let updated = sqlx::query(
        "UPDATE credit_balances SET balance = balance + $1, updated_at = $2 \
         WHERE team_id = $3 AND balance + $1 >= 0 RETURNING balance, low_threshold",
    )
    .bind(delta)
    .bind(now)
    .bind(team_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(updated) = updated else {
        let exists = sqlx::query("SELECT 1 FROM credit_balances WHERE team_id = $1")
            .bind(team_id)
            .fetch_optional(&mut *conn)
            .await?;
        return Err(if exists.is_some() {
            ServiceError::insufficient_credits()
        } else {
            ServiceError::team_not_found()
        });
    };
    let balance_after: i64 = updated.try_get("balance")?;
    let threshold: Option<i64> = updated.try_get("low_threshold")?;
    if let Some(threshold) = threshold
        && balance_after < threshold
        && balance_after - delta >= threshold
    {
        // Told once per crossing: the next debit starts under the threshold.
        let data = serde_json::json!({ "teamId": team_id, "balance": balance_after, "threshold": threshold });
        let resource = switchboard_proto::v1::event::Resource::Json(data.to_string());
        switchboard_kit::outbox::record(conn, EventType::CreditsLow, (team_id, team_id), resource).await?;
    }
    let entry = CreditEntry {
        id: uuid::Uuid::new_v4().to_string(),
        team_id: team_id.to_owned(),
        delta,
        balance_after,
        kind: kind.as_str().to_owned(),
        reason: reason.to_owned(),
        reference_id: reference_id.map(str::to_owned),
        created_at_ms: now,
    };
    sqlx::query(&format!("INSERT INTO credit_ledger ({ENTRY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"))
        .bind(&entry.id)
        .bind(&entry.team_id)
        .bind(entry.delta)
        .bind(entry.balance_after)
        .bind(&entry.kind)
        .bind(&entry.reason)
        .bind(&entry.reference_id)
        .bind(entry.created_at_ms)
        .execute(&mut *conn)
        .await
        .map_err(|error| {
            if !switchboard_kit::db::is_unique_violation(&error) {
                error.into()
            } else if kind == Kind::Refund {
                ServiceError::conflict("This debit has already been refunded")
            } else {
                ServiceError::conflict(REFERENCE_TAKEN)
            }
        })?;
    Ok(entry)
}

/// The conflict of a debit whose reference another debit took meanwhile (PostgreSQL: both
/// read no entry, the unique index lets one in); the loser answers with the winner's entry.
const REFERENCE_TAKEN: &str = "A debit with this reference exists";

/// A debit as a caller asks for it; see [`IdentityStore::debit_with`].
#[derive(Debug, Clone, Default)]
pub struct Debit<'a> {
    pub amount: i64,
    pub reason: &'a str,
    /// Unique per team among debits: the same reference again answers the first entry.
    pub reference_id: Option<&'a str>,
    /// Take what the balance has, up to `amount`, rather than fail.
    pub up_to_balance: bool,
}

/// The team's debit with `reference_id`, if it has one.
async fn debit_by_reference(
    conn: &mut AnyConnection,
    team_id: &str,
    reference_id: &str,
) -> ServiceResult<Option<CreditEntry>> {
    let row = sqlx::query(&format!(
        "SELECT {ENTRY_COLUMNS} FROM credit_ledger WHERE team_id = $1 AND reference_id = $2 AND kind = 'debit'"
    ))
    .bind(team_id)
    .bind(reference_id)
    .fetch_optional(conn)
    .await?;
    Ok(row.as_ref().map(entry_from_row).transpose()?)
}

/// The balance row every team gets at creation, at zero; grants then go through [`apply`].
pub(super) async fn open_account(conn: &mut AnyConnection, team_id: &str) -> ServiceResult<()> {
    sqlx::query("INSERT INTO credit_balances (team_id, balance, updated_at) VALUES ($1, 0, $2)")
        .bind(team_id)
        .bind(now_ms())
        .execute(conn)
        .await?;
    Ok(())
}

impl IdentityStore {
    pub async fn balance(&self, team_id: &str) -> ServiceResult<i64> {
        check_id("teamId", team_id)?;
        let row = sqlx::query("SELECT balance FROM credit_balances WHERE team_id = $1")
            .bind(team_id)
            .fetch_optional(self.db.pool())
            .await?
            .ok_or_else(ServiceError::team_not_found)?;
        Ok(row.try_get("balance")?)
    }

    /// The balance under which `credits.low` is told (`None`: never), and the balance.
    pub async fn credits_alert(&self, team_id: &str) -> ServiceResult<CreditsAlert> {
        check_id("teamId", team_id)?;
        let row = sqlx::query("SELECT balance, low_threshold FROM credit_balances WHERE team_id = $1")
            .bind(team_id)
            .fetch_optional(self.db.pool())
            .await?
            .ok_or_else(ServiceError::team_not_found)?;
        Ok(CreditsAlert { threshold: row.try_get("low_threshold")?, balance: row.try_get("balance")? })
    }

    pub async fn set_credits_alert(&self, team_id: &str, threshold: Option<i64>) -> ServiceResult<CreditsAlert> {
        check_id("teamId", team_id)?;
        if threshold.is_some_and(|threshold| !(0..=limits::CREDITS_ALERT_MAX).contains(&threshold)) {
            let message = format!("must be 0 to {}", limits::CREDITS_ALERT_MAX);
            return Err(ServiceError::invalid_field("threshold", message));
        }
        let done = sqlx::query("UPDATE credit_balances SET low_threshold = $1 WHERE team_id = $2")
            .bind(threshold)
            .bind(team_id)
            .execute(self.db.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(ServiceError::team_not_found());
        }
        self.credits_alert(team_id).await
    }

    pub async fn debit(&self, team_id: &str, amount: i64, reason: &str) -> ServiceResult<CreditEntry> {
        self.debit_with(team_id, Debit { amount, reason, ..Debit::default() }).await
    }

    /// Takes `debit.amount` from the balance with its ledger entry, in one transaction (where
    /// `credits.low` is recorded too, see [`apply`]). With a reference the debit is idempotent:
    /// the team's debit with that reference is answered again and nothing more is taken. With
    /// `up_to_balance` a balance smaller than the amount is emptied (a balance of 0 gives an
    /// entry of 0, which still holds the reference) instead of failing.
    pub async fn debit_with(&self, team_id: &str, debit: Debit<'_>) -> ServiceResult<CreditEntry> {
        validate::all([
            validate::uuid("teamId", team_id),
            validate::positive("amount", debit.amount),
            debit.reference_id.and_then(|reference| REFERENCE.check("referenceId", reference)),
        ])?;
        let mut tx = self.db.begin_write().await?;
        if let Some(reference) = debit.reference_id
            && let Some(first) = debit_by_reference(&mut tx, team_id, reference).await?
        {
            return Ok(first);
        }
        let amount = if debit.up_to_balance {
            let balance: i64 =
                sqlx::query(&format!("SELECT balance FROM credit_balances WHERE team_id = $1{}", self.db.for_update()))
                    .bind(team_id)
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or_else(ServiceError::team_not_found)?
                    .try_get("balance")?;
            debit.amount.min(balance.max(0))
        } else {
            debit.amount
        };
        let applied = apply(&mut tx, team_id, -amount, Kind::Debit, debit.reason, debit.reference_id).await;
        match (applied, debit.reference_id) {
            (Ok(entry), _) => {
                tx.commit().await?;
                Ok(entry)
            }
            (Err(error), Some(reference)) if error.message == REFERENCE_TAKEN => {
                drop(tx);
                let mut conn = self.db.pool().acquire().await?;
                debit_by_reference(&mut conn, team_id, reference).await?.ok_or(error)
            }
            (Err(error), _) => Err(error),
        }
    }

    pub async fn grant(&self, team_id: &str, amount: i64, reason: &str) -> ServiceResult<CreditEntry> {
        validate::all([validate::uuid("teamId", team_id), validate::positive("amount", amount)])?;
        let mut tx = self.db.begin_write().await?;
        let entry = apply(&mut tx, team_id, amount, Kind::Grant, reason, None).await?;
        tx.commit().await?;
        Ok(entry)
    }

    /// Gives back the credits of one debit of `team_id`. A second refund of the same debit
    /// is a conflict, so a retried refund cannot mint credits.
    pub async fn refund(&self, debit_entry_id: &str, team_id: &str, reason: &str) -> ServiceResult<CreditEntry> {
        validate::all([validate::uuid("debitEntryId", debit_entry_id), validate::uuid("teamId", team_id)])?;
        let mut tx = self.db.begin_write().await?;
        let debit = sqlx::query(&format!(
            "SELECT {ENTRY_COLUMNS} FROM credit_ledger WHERE id = $1 AND team_id = $2 AND kind = 'debit'"
        ))
        .bind(debit_entry_id)
        .bind(team_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| ServiceError::not_found("Debit not found"))?;
        let debit = entry_from_row(&debit)?;
        let entry = apply(&mut tx, team_id, -debit.delta, Kind::Refund, reason, Some(&debit.id)).await?;
        tx.commit().await?;
        Ok(entry)
    }

    /// Moves credits from an agency to one of its own subteams.
    pub async fn transfer(
        &self,
        from_team_id: &str,
        to_team_id: &str,
        amount: i64,
        reason: &str,
    ) -> ServiceResult<TransferCreditsResponse> {
        validate::all([
            validate::uuid("fromTeamId", from_team_id),
            validate::uuid("toTeamId", to_team_id),
            validate::positive("amount", amount),
        ])?;
        let mut tx = self.db.begin_write().await?;
        let parent: Option<String> =
            sqlx::query("SELECT parent_team_id FROM teams WHERE id = $1 AND deleted_at IS NULL")
                .bind(to_team_id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or_else(ServiceError::team_not_found)?
                .try_get("parent_team_id")?;
        if parent.as_deref() != Some(from_team_id) {
            return Err(ServiceError::forbidden("Credits can only be transferred from an agency to its own subteams"));
        }
        let debit = apply(&mut tx, from_team_id, -amount, Kind::TransferOut, reason, Some(to_team_id)).await?;
        let credit = apply(&mut tx, to_team_id, amount, Kind::TransferIn, reason, Some(from_team_id)).await?;
        tx.commit().await?;
        Ok(TransferCreditsResponse { debit: Some(debit), credit: Some(credit) })
    }

    /// The ledger of a team, newest first.
    pub async fn ledger(&self, team_id: &str, limit: i64) -> ServiceResult<Vec<CreditEntry>> {
        check_id("teamId", team_id)?;
        let rows = sqlx::query(&format!(
            "SELECT {ENTRY_COLUMNS} FROM credit_ledger WHERE team_id = $1 \
             ORDER BY created_at DESC, id DESC LIMIT $2"
        ))
        .bind(team_id)
        .bind(limit)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.iter().map(entry_from_row).collect::<Result<_, _>>()?)
    }
}

/// A day in milliseconds: usage is counted per UTC day.
const DAY_MS: i64 = 86_400_000;

impl IdentityStore {
    /// Searches and credits used per UTC day in `[from_ms, to_ms)`, days without either left
    /// out. Searches are the debits without a reference (each one credit or more; a call's
    /// cost is a debit referenced `call:<id>`, counted in the credits but not as a search); a
    /// refunded search (one that failed) is not counted, and its refund is taken off the
    /// credits used.
    pub async fn usage(&self, team_id: &str, from_ms: i64, to_ms: i64) -> ServiceResult<Vec<UsageDay>> {
        check_id("teamId", team_id)?;
        // Integer division by the day length gives the UTC day on both engines; the casts keep
        // PostgreSQL's SUM from answering NUMERIC.
        let rows = sqlx::query(
            "SELECT created_at / 86400000 AS day, \
                CAST(SUM(CASE WHEN kind = 'debit' AND reference_id IS NULL THEN 1 \
                    WHEN kind = 'refund' THEN -1 ELSE 0 END) AS BIGINT) AS searches, \
                CAST(SUM(CASE WHEN kind IN ('debit', 'refund') THEN -delta ELSE 0 END) AS BIGINT) AS used \
             FROM credit_ledger \
             WHERE team_id = $1 AND created_at >= $2 AND created_at < $3 AND kind IN ('debit', 'refund') \
             GROUP BY created_at / 86400000 ORDER BY day",
        )
        .bind(team_id)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(self.db.pool())
        .await?;
        rows.iter()
            .map(|row| {
                Ok(UsageDay {
                    day_ms: row.try_get::<i64, _>("day")? * DAY_MS,
                    searches: row.try_get("searches")?,
                    credits_used: row.try_get("used")?,
                    ..UsageDay::default()
                })
            })
            .collect()
    }
}
