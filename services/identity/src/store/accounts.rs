//! Accounts that sign in: the password on a user, and sessions.
//!
//! A session is an opaque token of 256 random bits, stored as its SHA-256 hash. It ends at its
//! absolute expiry, after its idle time without a request, at sign-out, and when its user's
//! password changes or the user is removed. Every replica reads the same rows, so an ended
//! session is refused by every identity replica at once (gateways cache an answer for their
//! auth cache time, as for keys).

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::apikey::hash_key;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::{Client, Session, SignedIn, Team, User};

use super::credentials::{end_email_changes, end_reset_links, end_sessions_of};
use super::users::{USER_COLUMNS, user_from_row};
use super::{IdentityStore, TEAM_COLUMNS, team_from_row};

/// `last_seen_at` is written at most this often per session: a busy portal does not turn every
/// request into a write, and the idle expiry is exact to within this.
const LAST_SEEN_RESOLUTION_MS: i64 = 60_000;

/// How long sessions last.
#[derive(Debug, Clone, Copy)]
pub struct SessionTimes {
    /// Ended after this long without a request.
    pub idle_ms: i64,
    /// Ended this long after sign-in, whatever happens.
    pub max_ms: i64,
    /// A sign-in, or a re-authentication, counts as recent this long: changes to the person's
    /// factors, password, address and sessions need one (ASVS 3.7.1).
    pub reauth_ms: i64,
}

/// A user who can sign in, with the hash to check a password against.
pub struct Account {
    pub user: User,
    pub password_hash: String,
}

fn unauthenticated() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, "Not signed in, or the session has ended")
        .with_hint("Sign in again: POST /v1/auth/sign-in.")
}

/// An opaque secret of 43 letters and digits (256 bits), for sessions and links.
pub fn new_token() -> String {
    use rand::Rng;
    rand::rng().sample_iter(&rand::distr::Alphanumeric).take(43).map(char::from).collect()
}

fn prefixed_user_columns() -> String {
    USER_COLUMNS.split(", ").map(|column| format!("u.{column}")).collect::<Vec<_>>().join(", ")
}

fn session_from_row(row: &AnyRow, times: SessionTimes) -> Result<Session, sqlx::Error> {
    let user = User {
        id: row.try_get("user_id")?,
        team_id: row.try_get("user_team_id")?,
        first_name: row.try_get("first_name")?,
        last_name: row.try_get("last_name")?,
        email: row.try_get("email")?,
        role: row.try_get("role")?,
        created_at_ms: row.try_get("user_created_at")?,
    };
    Ok(Session {
        id: row.try_get("session_id")?,
        user: Some(user),
        team: Some(team_from_row(row)?),
        expires_at_ms: row.try_get("expires_at")?,
        created_at_ms: row.try_get("session_created_at")?,
        second_factor_needed: row.try_get::<i64, _>("require_second_factor")? != 0
            && row.try_get::<i64, _>("factor_count")? == 0
            && row.try_get::<String, _>("method")? != SSO_METHOD,
        // A session from before re-authentication was recorded has none: it proves itself again.
        reauthenticate_after_ms: row
            .try_get::<Option<i64>, _>("authenticated_at")?
            .map_or(0, |at| at.saturating_add(times.reauth_ms)),
    })
}

/// The columns [`session_from_row`] reads beyond the session's, user's and team's: whether the
/// user still has to set up a second factor their team requires.
/// A session begun through the team's own identity provider is its business: the second
/// factor is the provider's to ask for.
const SECOND_FACTOR_COLUMNS: &str = "t.require_second_factor, \
     (SELECT COUNT(*) FROM totp_factors f WHERE f.user_id = u.id AND f.confirmed_at IS NOT NULL) \
     + (SELECT COUNT(*) FROM passkeys p WHERE p.user_id = u.id) AS factor_count";

impl IdentityStore {
    /// The account that signs in with `email` (compared ignoring case), if there is one.
    pub async fn account(&self, email: &str) -> ServiceResult<Option<Account>> {
        let row = sqlx::query(&format!(
            "SELECT {USER_COLUMNS}, password_hash FROM users WHERE email_key = $1 AND password_hash IS NOT NULL"
        ))
        .bind(email.trim().to_lowercase())
        .fetch_optional(self.db.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(Account { user: user_from_row(&row)?, password_hash: row.try_get("password_hash")? }))
    }

    /// The hash of the password of a user, when they have one.
    pub async fn password_hash(&self, user_id: &str) -> ServiceResult<Option<String>> {
        let row = sqlx::query("SELECT password_hash FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional(self.db.pool())
            .await?;
        Ok(row.map(|row| row.try_get("password_hash")).transpose()?.flatten())
    }

    /// Begins a session for `user` who signed in with a passkey alone (user verification made
    /// it two factors).
    pub async fn begin_passkey_session(
        &self,
        user: &User,
        client: &Client,
        times: SessionTimes,
    ) -> ServiceResult<SignedIn> {
        let mut tx = self.db.begin_write().await?;
        let signed_in = begin_session_with(&mut tx, user, client, times, "passkey").await?;
        tx.commit().await?;
        Ok(signed_in)
    }

    /// The user with this id, if they can sign in.
    pub async fn user(&self, user_id: &str) -> ServiceResult<User> {
        let row = sqlx::query(&format!(
            "SELECT {USER_COLUMNS} FROM users WHERE id = $1 AND (password_hash IS NOT NULL OR sso_subject IS NOT NULL)"
        ))
        .bind(user_id)
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(unauthenticated)?;
        Ok(user_from_row(&row)?)
    }

    /// Begins a session for `user`, whose team must be live.
    pub async fn begin_session(&self, user: &User, client: &Client, times: SessionTimes) -> ServiceResult<SignedIn> {
        let mut tx = self.db.begin_write().await?;
        let signed_in = begin_session_in(&mut tx, user, client, times).await?;
        tx.commit().await?;
        Ok(signed_in)
    }

    /// The live session with this token hash; refreshes its idle time.
    pub async fn session(&self, token_hash: &str, times: SessionTimes) -> ServiceResult<Session> {
        let now = now_ms();
        let row = sqlx::query(&format!(
            "SELECT s.id AS session_id, s.created_at AS session_created_at, s.expires_at, s.last_seen_at, \
             u.id AS user_id, u.team_id AS user_team_id, u.first_name, u.last_name, u.email, u.role, \
             u.created_at AS user_created_at, {TEAM_COLUMNS}, {SECOND_FACTOR_COLUMNS}, s.method, \
             s.authenticated_at \
             FROM sessions s JOIN users u ON u.id = s.user_id JOIN teams t ON t.id = u.team_id \
             WHERE s.token_hash = $1 AND s.ended_at IS NULL AND s.expires_at > $2 AND s.last_seen_at > $3 \
             AND (u.password_hash IS NOT NULL OR u.sso_subject IS NOT NULL) AND t.deleted_at IS NULL"
        ))
        .bind(token_hash)
        .bind(now)
        .bind(now - times.idle_ms)
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(unauthenticated)?;
        let session = session_from_row(&row, times)?;
        let last_seen: i64 = row.try_get("last_seen_at")?;
        // A short idle time (tests use seconds) is refreshed often enough not to end a busy session.
        if now - last_seen >= LAST_SEEN_RESOLUTION_MS.min(times.idle_ms / 4) {
            sqlx::query("UPDATE sessions SET last_seen_at = $1 WHERE id = $2")
                .bind(now)
                .bind(&session.id)
                .execute(self.db.pool())
                .await?;
        }
        Ok(session)
    }

    /// Ends the session with this token hash; false when it had ended already (or never was).
    /// Answers the session's user and team for the audit log.
    pub async fn end_session(&self, token_hash: &str) -> ServiceResult<Option<(String, String)>> {
        let row = sqlx::query("SELECT id, user_id, team_id FROM sessions WHERE token_hash = $1 AND ended_at IS NULL")
            .bind(token_hash)
            .fetch_optional(self.db.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let id: String = row.try_get("id")?;
        sqlx::query("UPDATE sessions SET ended_at = $1 WHERE id = $2 AND ended_at IS NULL")
            .bind(now_ms())
            .bind(&id)
            .execute(self.db.pool())
            .await?;
        Ok(Some((row.try_get("user_id")?, row.try_get("team_id")?)))
    }

    /// This session proved again who its person is (`Reauthenticate`): recent from now on.
    pub async fn mark_reauthenticated(&self, session_id: &str) -> ServiceResult<()> {
        sqlx::query("UPDATE sessions SET authenticated_at = $1 WHERE id = $2 AND ended_at IS NULL")
            .bind(now_ms())
            .bind(session_id)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// When this session last proved who its person is (a sign-in or a re-authentication);
    /// `None` for a session from before that was recorded.
    pub async fn session_proven_at(&self, session_id: &str) -> ServiceResult<Option<i64>> {
        let proven_at = sqlx::query_scalar::<_, Option<i64>>("SELECT authenticated_at FROM sessions WHERE id = $1")
            .bind(session_id)
            .fetch_optional(self.db.pool())
            .await?;
        Ok(proven_at.flatten())
    }

    /// Sets a user's password and ends all their sessions, then begins one: a changed or reset
    /// password leaves exactly the session of whoever changed it. The new session counts as
    /// proven at `proven_at`: a password change proves only the password.
    pub async fn set_password(
        &self,
        user_id: &str,
        password_hash: &str,
        client: &Client,
        times: SessionTimes,
        proven_at: Option<i64>,
    ) -> ServiceResult<SignedIn> {
        let mut tx = self.db.begin_write().await?;
        let user = set_password_in(&mut tx, user_id, password_hash).await?;
        let signed_in = begin_session_proven(&mut tx, &user, client, times, "password", proven_at).await?;
        tx.commit().await?;
        Ok(signed_in)
    }
}

/// Within `conn`'s transaction: the password set, every session of the user ended, and every
/// link still out that acts on the account (password resets, e-mail changes): a link mailed
/// before the password changed must not outlive it.
pub(super) async fn set_password_in(
    conn: &mut AnyConnection,
    user_id: &str,
    password_hash: &str,
) -> ServiceResult<User> {
    let updated = sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
        .bind(password_hash)
        .bind(user_id)
        .execute(&mut *conn)
        .await
        .map_err(|error| {
            if switchboard_kit::db::is_unique_violation(&error) {
                ServiceError::conflict("An account with this e-mail address exists already")
                    .with_hint("Sign in with it, or ask for a password reset.")
            } else {
                error.into()
            }
        })?;
    if updated.rows_affected() == 0 {
        return Err(ServiceError::not_found("User not found"));
    }
    end_sessions_of(conn, user_id).await?;
    end_pending_sign_ins(conn, user_id).await?;
    end_reset_links(conn, user_id).await?;
    end_email_changes(conn, user_id).await?;
    let row = sqlx::query(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"))
        .bind(user_id)
        .fetch_one(&mut *conn)
        .await?;
    Ok(user_from_row(&row)?)
}

/// Ends the user's sign-ins that wait for their second factor (`sign_in_challenges`): one that
/// began with the old password must not become a session after the password changed, nor
/// after the person signed out everywhere else. They expire rather than count as used, so
/// their failed tries still count against the person's second factor. A re-authentication's
/// challenge (`Purpose::Reauth`, named by its text here: `second_factor` already depends on this
/// module) lives within one request of a live session and is left alone.
pub(super) async fn end_pending_sign_ins(conn: &mut AnyConnection, user_id: &str) -> ServiceResult<()> {
    let now = now_ms();
    sqlx::query(
        "UPDATE sign_in_challenges SET expires_at = $1 \
         WHERE user_id = $2 AND used_at IS NULL AND expires_at > $1 AND purpose <> 'reauth'",
    )
    .bind(now)
    .bind(user_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// How a session began through single sign-on (`sessions.method`).
pub const SSO_METHOD: &str = "sso";

pub(super) async fn begin_session_in(
    conn: &mut AnyConnection,
    user: &User,
    client: &Client,
    times: SessionTimes,
) -> ServiceResult<SignedIn> {
    begin_session_with(conn, user, client, times, "password").await
}

/// Begins a session of `user`, as `method` (`password` or [`SSO_METHOD`]) began it: a sign-in
/// is a proof of who the person is, recent until the re-authentication window ends.
pub(super) async fn begin_session_with(
    conn: &mut AnyConnection,
    user: &User,
    client: &Client,
    times: SessionTimes,
    method: &str,
) -> ServiceResult<SignedIn> {
    begin_session_proven(conn, user, client, times, method, Some(now_ms())).await
}

/// Begins a session that counts as proven at `proven_at` (`None`: never, it proves itself
/// again before any change to the account's security).
async fn begin_session_proven(
    conn: &mut AnyConnection,
    user: &User,
    client: &Client,
    times: SessionTimes,
    method: &str,
    proven_at: Option<i64>,
) -> ServiceResult<SignedIn> {
    let row = sqlx::query(&format!(
        "SELECT {TEAM_COLUMNS}, {SECOND_FACTOR_COLUMNS} FROM teams t JOIN users u ON u.team_id = t.id \
         WHERE t.id = $1 AND u.id = $2 AND t.deleted_at IS NULL"
    ))
    .bind(&user.team_id)
    .bind(&user.id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or_else(|| ServiceError::new(ErrorKind::Unauthorized, "Invalid email or password"))?;
    let team: Team = team_from_row(&row)?;
    let second_factor_needed = row.try_get::<i64, _>("require_second_factor")? != 0
        && row.try_get::<i64, _>("factor_count")? == 0
        && method != SSO_METHOD;
    let token = new_token();
    let now = now_ms();
    let session = Session {
        id: uuid::Uuid::new_v4().to_string(),
        user: Some(user.clone()),
        team: Some(team),
        expires_at_ms: now + times.max_ms,
        created_at_ms: now,
        second_factor_needed,
        reauthenticate_after_ms: proven_at.map_or(0, |at| at.saturating_add(times.reauth_ms)),
    };
    sqlx::query(
        "INSERT INTO sessions (id, token_hash, user_id, team_id, created_at, last_seen_at, expires_at, ip, user_agent, \
         method, authenticated_at) VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&session.id)
    .bind(hash_key(&token))
    .bind(&user.id)
    .bind(&user.team_id)
    .bind(now)
    .bind(session.expires_at_ms)
    .bind(&client.ip)
    .bind(&client.user_agent)
    .bind(method)
    .bind(proven_at)
    .execute(&mut *conn)
    .await?;
    sqlx::query("UPDATE users SET last_sign_in_at = $1 WHERE id = $2")
        .bind(now)
        .bind(&user.id)
        .execute(&mut *conn)
        .await?;
    Ok(SignedIn { token, session: Some(session), challenge: None, passkeys: Vec::new() })
}

/// The user with this id in `conn`'s view.
pub(super) async fn user_in(conn: &mut AnyConnection, user_id: &str) -> ServiceResult<Option<User>> {
    let columns = prefixed_user_columns();
    let row = sqlx::query(&format!("SELECT {columns} FROM users u WHERE u.id = $1"))
        .bind(user_id)
        .fetch_optional(conn)
        .await?;
    Ok(row.as_ref().map(user_from_row).transpose()?)
}
