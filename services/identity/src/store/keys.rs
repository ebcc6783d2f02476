//! API keys: created with a fresh secret that is returned once, stored as a SHA-256 hash,
//! looked up by that hash, listed without secrets, revoked for good.

use sqlx::Row;
use sqlx::any::AnyRow;
use switchboard_kit::apikey::{display_prefix, hash_key};
use switchboard_kit::db::Engine;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::{Actor, ApiKey, CreatedApiKey, KeyAccess, Team};

use super::{IdentityStore, TEAM_COLUMNS, check_id, team_from_row};
use crate::validate;

pub(super) const KEY_COLUMNS: &str = "k.id, k.team_id, k.name, k.prefix, k.access, k.created_at, k.last_used_at, k.revoked_at, \
     k.created_by_type, k.created_by_id, k.created_by_name";
/// The most keys a team has that are not revoked: a key per integration, with room to rotate.
pub const MAX_ACTIVE_KEYS: i64 = 100;
/// `last_used_at` is written at most this often per key, so that a busy key does not turn
/// every authentication into a write.
const LAST_USED_RESOLUTION_MS: i64 = 60_000;

fn access_to_str(access: KeyAccess) -> &'static str {
    match access {
        KeyAccess::ReadOnly => "read_only",
        _ => "full",
    }
}

fn access_from_row(row: &AnyRow) -> Result<KeyAccess, sqlx::Error> {
    let access: String = row.try_get("access")?;
    Ok(if access == "read_only" { KeyAccess::ReadOnly } else { KeyAccess::Full })
}

pub(super) fn key_from_row(row: &AnyRow) -> Result<ApiKey, sqlx::Error> {
    Ok(ApiKey {
        id: row.try_get("id")?,
        team_id: row.try_get("team_id")?,
        name: row.try_get("name")?,
        prefix: row.try_get("prefix")?,
        access: access_from_row(row)?.into(),
        created_at_ms: row.try_get("created_at")?,
        last_used_at_ms: row.try_get("last_used_at")?,
        revoked_at_ms: row.try_get("revoked_at")?,
        created_by: actor_from_row(row)?,
    })
}

fn actor_from_row(row: &AnyRow) -> Result<Option<Actor>, sqlx::Error> {
    let kind: Option<String> = row.try_get("created_by_type")?;
    let Some(kind) = kind else { return Ok(None) };
    Ok(Some(Actor {
        r#type: kind,
        id: row.try_get::<Option<String>, _>("created_by_id")?.unwrap_or_default(),
        name: row.try_get::<Option<String>, _>("created_by_name")?.unwrap_or_default(),
    }))
}

fn unauthorized() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, "Invalid API key")
}

impl IdentityStore {
    /// A key made by an operator (`switchboard admin`, the dev banner's): no creator is recorded.
    pub async fn create_key(&self, team_id: &str, name: &str, access: KeyAccess) -> ServiceResult<CreatedApiKey> {
        self.create_key_by(team_id, name, access, None).await
    }

    /// A key of the team, made by `created_by`; at most [`MAX_ACTIVE_KEYS`] live at once (409).
    pub async fn create_key_by(
        &self,
        team_id: &str,
        name: &str,
        access: KeyAccess,
        created_by: Option<Actor>,
    ) -> ServiceResult<CreatedApiKey> {
        let name = if name.trim().is_empty() { "API key" } else { name };
        validate::all([switchboard_kit::limits::KEY_NAME.check("name", name)])?;
        self.team(team_id).await?;
        let secret = crate::keys::generate_secret();
        let key = ApiKey {
            id: uuid::Uuid::new_v4().to_string(),
            team_id: team_id.to_owned(),
            name: name.trim().to_owned(),
            prefix: display_prefix(&secret),
            access: access.into(),
            created_at_ms: now_ms(),
            last_used_at_ms: None,
            revoked_at_ms: None,
            created_by,
        };
        // The count and the insert in one write transaction, the team's row locked on
        // PostgreSQL: two creates at once cannot both take the 100th place.
        let mut tx = self.db.begin_write().await?;
        if self.db.engine() == Engine::Postgres {
            sqlx::query("SELECT id FROM teams WHERE id = $1 FOR UPDATE").bind(team_id).execute(&mut *tx).await?;
        }
        let active: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM api_keys WHERE team_id = $1 AND revoked_at IS NULL")
            .bind(team_id)
            .fetch_one(&mut *tx)
            .await?;
        if active >= MAX_ACTIVE_KEYS {
            return Err(ServiceError::conflict(format!("A team has at most {MAX_ACTIVE_KEYS} active API keys"))
                .with_hint("Revoke a key the team no longer uses, then create this one."));
        }
        let creator = key.created_by.as_ref();
        sqlx::query(
            "INSERT INTO api_keys (id, team_id, name, prefix, key_hash, access, created_at, created_by_type, \
             created_by_id, created_by_name) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&key.id)
        .bind(&key.team_id)
        .bind(&key.name)
        .bind(&key.prefix)
        .bind(hash_key(&secret))
        .bind(access_to_str(access))
        .bind(key.created_at_ms)
        .bind(creator.map(|actor| actor.r#type.clone()))
        .bind(creator.map(|actor| actor.id.clone()))
        .bind(creator.map(|actor| actor.name.clone()))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(CreatedApiKey { key: Some(key), secret })
    }

    /// The live key with this hash and its team (deleted teams included: the caller decides
    /// what a deleted team may still see). Unknown and revoked keys are both "Invalid API key".
    pub async fn authenticate(&self, key_hash: &str) -> ServiceResult<(ApiKey, Team)> {
        // Team columns keep their names; the key's are aliased so that none collide.
        let row = sqlx::query(&format!(
            "SELECT {TEAM_COLUMNS}, k.id AS key_id, k.name AS key_name, k.prefix, k.access, \
             k.created_at AS key_created_at, k.last_used_at, k.revoked_at \
             FROM api_keys k JOIN teams t ON t.id = k.team_id \
             WHERE k.key_hash = $1 AND k.revoked_at IS NULL"
        ))
        .bind(key_hash)
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(unauthorized)?;
        let team = team_from_row(&row)?;
        let mut key = ApiKey {
            id: row.try_get("key_id")?,
            team_id: team.id.clone(),
            name: row.try_get("key_name")?,
            prefix: row.try_get("prefix")?,
            access: access_from_row(&row)?.into(),
            created_at_ms: row.try_get("key_created_at")?,
            last_used_at_ms: row.try_get("last_used_at")?,
            revoked_at_ms: None,
            created_by: None,
        };
        let now = now_ms();
        if key.last_used_at_ms.is_none_or(|last| now - last >= LAST_USED_RESOLUTION_MS) {
            sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
                .bind(now)
                .bind(&key.id)
                .execute(self.db.pool())
                .await?;
            key.last_used_at_ms = Some(now);
        }
        Ok((key, team))
    }

    pub async fn list_keys(&self, team_id: &str) -> ServiceResult<Vec<ApiKey>> {
        check_id("teamId", team_id)?;
        let rows = sqlx::query(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys k WHERE k.team_id = $1 ORDER BY k.created_at DESC, k.id"
        ))
        .bind(team_id)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.iter().map(key_from_row).collect::<Result<_, _>>()?)
    }

    /// Revokes a key; with `team_id`, only a key of that team. Revoking twice is harmless.
    pub async fn revoke_key(&self, key_id: &str, team_id: Option<&str>) -> ServiceResult<ApiKey> {
        check_id("keyId", key_id)?;
        let not_found = || ServiceError::not_found("API key not found");
        let row = sqlx::query(&format!("SELECT {KEY_COLUMNS} FROM api_keys k WHERE k.id = $1"))
            .bind(key_id)
            .fetch_optional(self.db.pool())
            .await?
            .ok_or_else(not_found)?;
        let key = key_from_row(&row)?;
        if team_id.is_some_and(|team| team != key.team_id) {
            return Err(not_found());
        }
        sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
            .bind(now_ms())
            .bind(key_id)
            .execute(self.db.pool())
            .await?;
        let row = sqlx::query(&format!("SELECT {KEY_COLUMNS} FROM api_keys k WHERE k.id = $1"))
            .bind(key_id)
            .fetch_one(self.db.pool())
            .await?;
        Ok(key_from_row(&row)?)
    }
}
