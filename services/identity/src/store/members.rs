//! Members: a team's users with their role and sign-in state. Owners may do everything; only
//! an owner makes, changes or removes an owner; a team always keeps one owner.

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_api::role::Role;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{ApiKey, Member, RemovedMember};

use super::credentials::{end_invitations_by, end_sessions_of};
use super::keys::{KEY_COLUMNS, key_from_row};
pub use super::users::is_owner;
use super::users::{USER_COLUMNS, role_violation, user_from_row};
use super::{IdentityStore, check_id};
use crate::validate;

fn member_from_row(row: &AnyRow) -> Result<Member, sqlx::Error> {
    Ok(Member {
        user: Some(user_from_row(row)?),
        can_sign_in: row.try_get::<Option<String>, _>("password_hash")?.is_some()
            || row.try_get::<Option<String>, _>("sso_subject")?.is_some(),
        last_sign_in_at_ms: row.try_get("last_sign_in_at")?,
    })
}

fn member_not_found() -> ServiceError {
    ServiceError::not_found("Member not found (not a user of this team)")
}

fn owners_only() -> ServiceError {
    ServiceError::forbidden("Only an owner can make, change or remove an owner")
}

fn last_owner() -> ServiceError {
    ServiceError::conflict("A team keeps at least one owner").with_hint("Make another member an owner first.")
}

async fn member_in(conn: &mut AnyConnection, team_id: &str, user_id: &str) -> ServiceResult<Member> {
    let row = sqlx::query(&format!(
        "SELECT {USER_COLUMNS}, password_hash, sso_subject, last_sign_in_at FROM users WHERE id = $1 AND team_id = $2"
    ))
    .bind(user_id)
    .bind(team_id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(member_not_found)?;
    Ok(member_from_row(&row)?)
}

async fn owner_count(conn: &mut AnyConnection, team_id: &str) -> ServiceResult<i64> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE team_id = $1 AND role = $2")
        .bind(team_id)
        .bind(Role::Owner.as_str())
        .fetch_one(conn)
        .await?)
}

/// The active API keys of the team that `user_id` made.
async fn keys_made_by(conn: &mut AnyConnection, team_id: &str, user_id: &str) -> ServiceResult<Vec<ApiKey>> {
    let rows = sqlx::query(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys k WHERE k.team_id = $1 AND k.created_by_type = 'user' \
         AND k.created_by_id = $2 AND k.revoked_at IS NULL ORDER BY k.created_at DESC, k.id"
    ))
    .bind(team_id)
    .bind(user_id)
    .fetch_all(conn)
    .await?;
    Ok(rows.iter().map(key_from_row).collect::<Result<_, _>>()?)
}

fn role_of(member: &Member) -> &str {
    member.user.as_ref().map_or("", |user| user.role.as_str())
}

impl IdentityStore {
    pub async fn members(&self, team_id: &str) -> ServiceResult<Vec<Member>> {
        check_id("teamId", team_id)?;
        let rows = sqlx::query(&format!(
            "SELECT {USER_COLUMNS}, password_hash, sso_subject, last_sign_in_at FROM users WHERE team_id = $1 \
             ORDER BY created_at, id"
        ))
        .bind(team_id)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.iter().map(member_from_row).collect::<Result<_, _>>()?)
    }

    /// Gives a member another role; `caller_role` is the role of whoever asks ("key" for an
    /// API key, which may do what an admin may).
    pub async fn set_role(&self, team_id: &str, user_id: &str, role: &str, caller_role: &str) -> ServiceResult<Member> {
        validate::all([validate::uuid("userId", user_id), role_violation(role)])?;
        let mut tx = self.db.begin_write().await?;
        self.db.lock_scope(&mut tx, &format!("members:{team_id}")).await?;
        let member = member_in(&mut tx, team_id, user_id).await?;
        if !is_owner(caller_role) && (is_owner(role_of(&member)) || is_owner(role)) {
            return Err(owners_only());
        }
        if is_owner(role_of(&member)) && !is_owner(role) && owner_count(&mut tx, team_id).await? <= 1 {
            return Err(last_owner());
        }
        sqlx::query("UPDATE users SET role = $1 WHERE id = $2").bind(role).bind(user_id).execute(&mut *tx).await?;
        // Invitations are only as good as their maker's standing: one who no longer manages
        // members lets no one in.
        if !Role::parse(role).is_some_and(Role::manages) {
            end_invitations_by(&mut tx, user_id).await?;
        }
        let member = member_in(&mut tx, team_id, user_id).await?;
        tx.commit().await?;
        Ok(member)
    }

    /// Removes a member: their sessions end, and their pending links with them (the ones that let
    /// them in and the invitations they made). Answers the API keys they made that are still
    /// active, revoked too when `revoke_keys`.
    pub async fn remove_member(
        &self,
        team_id: &str,
        user_id: &str,
        caller_role: &str,
        revoke_keys: bool,
    ) -> ServiceResult<RemovedMember> {
        check_id("userId", user_id)?;
        let mut tx = self.db.begin_write().await?;
        self.db.lock_scope(&mut tx, &format!("members:{team_id}")).await?;
        let member = member_in(&mut tx, team_id, user_id).await?;
        if is_owner(role_of(&member)) {
            if !is_owner(caller_role) {
                return Err(owners_only());
            }
            if owner_count(&mut tx, team_id).await? <= 1 {
                return Err(last_owner());
            }
        }
        end_sessions_of(&mut tx, user_id).await?;
        sqlx::query("DELETE FROM sessions WHERE user_id = $1").bind(user_id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM link_tokens WHERE user_id = $1").bind(user_id).execute(&mut *tx).await?;
        let invitations_ended = end_invitations_by(&mut tx, user_id).await?;
        let mut keys = keys_made_by(&mut tx, team_id, user_id).await?;
        if revoke_keys && !keys.is_empty() {
            let now = now_ms();
            sqlx::query(
                "UPDATE api_keys SET revoked_at = $1 WHERE team_id = $2 AND created_by_type = 'user' \
                 AND created_by_id = $3 AND revoked_at IS NULL",
            )
            .bind(now)
            .bind(team_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
            for key in &mut keys {
                key.revoked_at_ms = Some(now);
            }
        }
        sqlx::query("DELETE FROM users WHERE id = $1").bind(user_id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(RemovedMember { member: Some(member), invitations_ended, keys, keys_revoked: revoke_keys })
    }
}
