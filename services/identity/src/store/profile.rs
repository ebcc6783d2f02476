//! What a signed-in person changes about themselves: their names, and their e-mail address,
//! which changes only when a link mailed to the new address is opened (so that no one signs
//! in with an address they cannot read). The token is in the mail only (stored as its
//! SHA-256), works once and expires; a newer request ends the older ones.

use sqlx::{AnyConnection, Row};
use switchboard_kit::apikey::hash_key;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ServiceError, ServiceResult, limits};
use switchboard_proto::v1::User;

use super::IdentityStore;
use super::accounts::{new_token, user_in};
use super::credentials::{LinkKind, end_email_changes, end_reset_links};
use crate::validate;

/// The user before and after a confirmed change: the old address is told.
pub struct EmailChanged {
    pub old_email: String,
    pub user: User,
}

fn link_gone() -> ServiceError {
    ServiceError::not_found("E-mail confirmation link not found: unknown, used already, or expired")
        .with_hint("Ask for a new link on your profile page.")
}

/// The same answer whoever holds the address, and however (an account of this or another team,
/// a pending invitation): it says no more than that it cannot be used.
pub fn address_taken() -> ServiceError {
    ServiceError::conflict("This e-mail address cannot be used: another account uses it")
        .with_hint("Choose another address.")
}

fn user_gone() -> ServiceError {
    ServiceError::not_found("User not found")
}

/// Whether `email_key` is someone else's: an account that signs in with it (any team), a user
/// of the same team with it, or a live invitation of it (whose acceptance would then fail).
async fn taken_in(conn: &mut AnyConnection, user: &User, email_key: &str) -> ServiceResult<bool> {
    let user_taken = sqlx::query(
        "SELECT id FROM users WHERE email_key = $1 AND id <> $2 \
         AND (team_id = $3 OR password_hash IS NOT NULL OR sso_subject IS NOT NULL)",
    )
    .bind(email_key)
    .bind(&user.id)
    .bind(&user.team_id)
    .fetch_optional(&mut *conn)
    .await?;
    if user_taken.is_some() {
        return Ok(true);
    }
    let invited = sqlx::query(
        "SELECT id FROM link_tokens WHERE email = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3 \
         AND user_id IS NULL",
    )
    .bind(email_key)
    .bind(LinkKind::Invite.as_str())
    .bind(now_ms())
    .fetch_optional(&mut *conn)
    .await?;
    Ok(invited.is_some())
}

/// `email` as `user`'s new address would be stored (trimmed, lower case): 400 when it is not
/// an address, or is the user's own already. Whether someone else has it is not said here.
pub fn new_address(user: &User, email: &str) -> ServiceResult<String> {
    let email = email.trim();
    validate::all([validate::email("email", email), limits::EMAIL.check("email", email)])?;
    let email_key = email.to_lowercase();
    if email_key == user.email.to_lowercase() {
        return Err(ServiceError::invalid_field("email", "is your address already"));
    }
    Ok(email_key)
}

impl IdentityStore {
    /// New names for `user_id`; an empty one keeps its value. Answers the user as now stored.
    pub async fn set_names(&self, user_id: &str, first_name: &str, last_name: &str) -> ServiceResult<User> {
        let (first_name, last_name) = (first_name.trim(), last_name.trim());
        validate::all([
            (!first_name.is_empty()).then(|| limits::PERSON_NAME.check("firstName", first_name)).flatten(),
            (!last_name.is_empty()).then(|| limits::PERSON_NAME.check("lastName", last_name)).flatten(),
        ])?;
        let mut tx = self.db.begin_write().await?;
        sqlx::query(
            "UPDATE users SET first_name = CASE WHEN $1 = '' THEN first_name ELSE $1 END, \
             last_name = CASE WHEN $2 = '' THEN last_name ELSE $2 END WHERE id = $3",
        )
        .bind(first_name)
        .bind(last_name)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        let user = user_in(&mut tx, user_id).await?.ok_or_else(user_gone)?;
        tx.commit().await?;
        Ok(user)
    }

    /// A confirmation link for `user` to sign in with `email_key` (see [`new_address`]) from
    /// then on, valid until `expires_at_ms`: its token, for the mail only. `None` when the
    /// address is someone else's: no link is made, and the caller answers as if one were.
    pub async fn begin_email_change(
        &self,
        user: &User,
        email_key: &str,
        expires_at_ms: i64,
    ) -> ServiceResult<Option<String>> {
        let mut tx = self.db.begin_write().await?;
        if taken_in(&mut tx, user, email_key).await? {
            return Ok(None);
        }
        // Only the newest request can be confirmed: an older link mailed elsewhere stops working.
        end_email_changes(&mut tx, &user.id).await?;
        let token = new_token();
        sqlx::query(
            "INSERT INTO email_changes (id, token_hash, user_id, email, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(uuid::Uuid::new_v4().to_string())
        .bind(hash_key(&token))
        .bind(&user.id)
        .bind(email_key)
        .bind(now_ms())
        .bind(expires_at_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(token))
    }

    /// Uses a confirmation link: the user signs in with the new address from now on. Its
    /// sessions stay. 404 when the link is unknown, used or expired; 409 when the address was
    /// taken since the link was made.
    pub async fn confirm_email_change(&self, token: &str) -> ServiceResult<EmailChanged> {
        if token.is_empty() || token.len() > 128 {
            return Err(link_gone());
        }
        let mut tx = self.db.begin_write().await?;
        let row = sqlx::query(
            "SELECT id, user_id, email FROM email_changes \
             WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2",
        )
        .bind(hash_key(token))
        .bind(now_ms())
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(link_gone)?;
        let (change_id, user_id, email): (String, String, String) =
            (row.try_get("id")?, row.try_get("user_id")?, row.try_get("email")?);
        let before = user_in(&mut tx, &user_id).await?.ok_or_else(link_gone)?;
        if taken_in(&mut tx, &before, &email).await? {
            return Err(address_taken());
        }
        let used = sqlx::query("UPDATE email_changes SET used_at = $1 WHERE id = $2 AND used_at IS NULL")
            .bind(now_ms())
            .bind(&change_id)
            .execute(&mut *tx)
            .await?;
        // Used by another request between our read and this write (PostgreSQL, read committed).
        if used.rows_affected() == 0 {
            return Err(link_gone());
        }
        sqlx::query("UPDATE users SET email = $1, email_key = $1 WHERE id = $2")
            .bind(&email)
            .bind(&user_id)
            .execute(&mut *tx)
            .await
            .map_err(|error| {
                // Taken by an account made between the check and this write.
                if switchboard_kit::db::is_unique_violation(&error) { address_taken() } else { error.into() }
            })?;
        // A reset link mailed to the old address must not sign in after the address changed.
        end_reset_links(&mut tx, &user_id).await?;
        let user = user_in(&mut tx, &user_id).await?.ok_or_else(link_gone)?;
        tx.commit().await?;
        Ok(EmailChanged { old_email: before.email, user })
    }
}
