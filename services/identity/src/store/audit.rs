//! The audit log: who did what to a team, and when. Entries are kept 90 days; older ones of a
//! team go when the team's next entry is written (one range delete on the team's index).

use sqlx::Row;
use sqlx::any::AnyRow;
use switchboard_kit::listing::{self, Total};
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{Actor, AuditEntry, PageInfo, PageRequest};

use super::{IdentityStore, check_id};

pub const KEPT_MS: i64 = 90 * 24 * 60 * 60 * 1000;

/// The longest text kept of a client-supplied value (a user agent, a target).
const MOST_CHARS: usize = 512;

fn clipped(value: &str) -> String {
    value.chars().take(MOST_CHARS).collect()
}

/// The most field names kept of one write; a body names its fields, so a client could send
/// thousands.
const MOST_FIELDS: usize = 32;

/// Field names as kept: at most [`MOST_FIELDS`], each a plain identifier (a comma would split
/// the stored list, and a name is shown as text).
fn fields_of(changes: &[String]) -> Vec<String> {
    changes
        .iter()
        .filter(|name| {
            !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .take(MOST_FIELDS)
        .cloned()
        .collect()
}

fn entry_from_row(row: &AnyRow) -> Result<AuditEntry, sqlx::Error> {
    Ok(AuditEntry {
        id: row.try_get("id")?,
        team_id: row.try_get("team_id")?,
        action: row.try_get("action")?,
        actor: Some(Actor {
            r#type: row.try_get("actor_type")?,
            id: row.try_get("actor_id")?,
            name: row.try_get("actor_name")?,
        }),
        target: row.try_get("target")?,
        ip: row.try_get("ip")?,
        user_agent: row.try_get("user_agent")?,
        created_at_ms: row.try_get("created_at")?,
        target_name: row.try_get("target_name")?,
        changes: row
            .try_get::<String, _>("changes")?
            .split(',')
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

impl IdentityStore {
    pub async fn record_audit(&self, entry: AuditEntry) -> ServiceResult<AuditEntry> {
        check_id("teamId", &entry.team_id)?;
        if AuditAction::parse(&entry.action).is_none() {
            return Err(ServiceError::invalid_field("action", format!("must be one of {}", AuditAction::names())));
        }
        let now = now_ms();
        let actor = entry.actor.clone().unwrap_or_default();
        let entry = AuditEntry {
            id: uuid::Uuid::now_v7().to_string(),
            created_at_ms: now,
            target: clipped(&entry.target),
            target_name: clipped(&entry.target_name),
            changes: fields_of(&entry.changes),
            user_agent: clipped(&entry.user_agent),
            ip: clipped(&entry.ip),
            actor: Some(Actor { name: clipped(&actor.name), ..actor }),
            ..entry
        };
        let actor = entry.actor.as_ref().cloned().unwrap_or_default();
        let mut tx = self.db.begin_write().await?;
        sqlx::query(
            "INSERT INTO audit_log (id, team_id, action, actor_type, actor_id, actor_name, target, ip, user_agent, \
             created_at, target_name, changes) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&entry.id)
        .bind(&entry.team_id)
        .bind(&entry.action)
        .bind(&actor.r#type)
        .bind(&actor.id)
        .bind(&actor.name)
        .bind(&entry.target)
        .bind(&entry.ip)
        .bind(&entry.user_agent)
        .bind(now)
        .bind(&entry.target_name)
        .bind(entry.changes.join(","))
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM audit_log WHERE team_id = $1 AND created_at < $2")
            .bind(&entry.team_id)
            .bind(now - KEPT_MS)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(entry)
    }

    /// A page of the team's entries, newest first; only `action`'s when it is not empty.
    pub async fn audit_log(
        &self,
        team_id: &str,
        action: &str,
        page: &PageRequest,
    ) -> ServiceResult<(Vec<AuditEntry>, PageInfo)> {
        check_id("teamId", team_id)?;
        let limit = i64::from(page.limit.clamp(1, 100));
        let page_number = i64::from(page.page.max(1));
        let since = now_ms() - KEPT_MS;
        // One statement for both cases (a parameter a statement does not use is an error on
        // PostgreSQL); a team's 90 days of entries are few enough for the team index.
        let filter = " AND ($3 = '' OR action = $3)";
        let total: i64 = sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM audit_log WHERE team_id = $1 AND created_at >= $2{filter}"
        ))
        .bind(team_id)
        .bind(since)
        .bind(action)
        .fetch_one(self.db.pool())
        .await?;
        let rows = sqlx::query(&format!(
            "SELECT id, team_id, action, actor_type, actor_id, actor_name, target, ip, user_agent, created_at, \
             target_name, changes \
             FROM audit_log WHERE team_id = $1 AND created_at >= $2{filter} \
             ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5"
        ))
        .bind(team_id)
        .bind(since)
        .bind(action)
        .bind(limit)
        .bind((page_number - 1) * limit)
        .fetch_all(self.db.pool())
        .await?;
        let entries = rows.iter().map(entry_from_row).collect::<Result<_, _>>()?;
        let (page, limit) = (u32::try_from(page_number).unwrap_or(1), u32::try_from(limit).unwrap_or(20));
        Ok((entries, listing::page_info(page, limit, Total::exact(total))))
    }
}

#[cfg(test)]
mod tests {
    use switchboard_kit::vocabulary::{AuditAction, checked_values, listed_values};

    #[test]
    fn the_audit_log_takes_exactly_the_audit_actions() {
        let all: Vec<String> = AuditAction::ALL.iter().map(ToString::to_string).collect();
        let postgres = include_str!("../../migrations/postgres/0903_audit_every_write.sql");
        assert_eq!(checked_values(postgres, "action"), vec![all.clone()]);
        // SQLite: one trigger for inserts, one for updates.
        let sqlite = include_str!("../../migrations/sqlite/0903_audit_every_write.sql");
        assert_eq!(listed_values(sqlite, "NEW.action IN ("), vec![all.clone(), all]);
    }
}
