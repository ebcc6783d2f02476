//! Second factors as stored: a TOTP secret per user (pending until a code made from it is
//! entered), recovery codes as SHA-256, the sign-ins that passed the password and wait for a
//! second factor (challenges), and each team's requirement of one. The codes are checked in
//! `crate::second_factor`; here every step that must happen once happens in one statement.

use sqlx::{AnyConnection, Row};
use switchboard_kit::apikey::hash_key;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::{Client, SecondFactors, User};

use super::IdentityStore;
use super::accounts::new_token;
use super::users::{USER_COLUMNS, user_from_row};

/// What a sealed TOTP secret is bound to: its user, so that it opens in their row only.
fn totp_context(user_id: &str) -> String {
    format!("totp:{user_id}")
}

/// The user's second factors, `$1` the user's id: the SQL expression every count of them uses.
pub const FACTOR_COUNT: &str = "(SELECT COUNT(*) FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL) \
     + (SELECT COUNT(*) FROM passkeys WHERE user_id = $1)";

/// How long a sign-in waits for its second factor.
pub const CHALLENGE_FOR_MS: i64 = 5 * 60 * 1000;
/// Codes tried on one challenge before it is spent.
pub const ATTEMPTS_PER_CHALLENGE: i64 = 5;
/// Wrong second factors of one user in [`FAILURE_WINDOW_MS`] before every try waits: one in
/// a million codes cannot be guessed in ten tries.
pub const FAILURES_PER_WINDOW: i64 = 10;
pub const FAILURE_WINDOW_MS: i64 = 15 * 60 * 1000;

/// A user's TOTP secret as stored.
pub struct TotpFactor {
    pub secret: String,
    pub confirmed: bool,
    pub last_step: i64,
}

/// What passing a challenge's second factor finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A sign-in that passed the password: a session begins.
    SignIn,
    /// A password reset: a session begins, which lists the passkeys that still sign in.
    Reset,
    /// The re-authentication of a session: made and used within one request, never handed
    /// out, so that its tries count with the person's other wrong codes.
    Reauth,
}

impl Purpose {
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::SignIn => "sign_in",
            Purpose::Reset => "reset",
            Purpose::Reauth => "reauth",
        }
    }

    fn parse(text: &str) -> Option<Purpose> {
        [Purpose::SignIn, Purpose::Reset, Purpose::Reauth].into_iter().find(|purpose| purpose.as_str() == text)
    }
}

/// A pending sign-in found by its token: the user, the challenge's id and what it finishes.
#[derive(Debug)]
pub struct Challenge {
    pub id: String,
    pub user: User,
    pub purpose: Purpose,
}

/// The challenge of `row`, which holds `challenge_id`, `purpose` and the user's columns.
fn challenge_from_row(row: &sqlx::any::AnyRow) -> ServiceResult<Challenge> {
    let purpose: String = row.try_get("purpose")?;
    Ok(Challenge {
        id: row.try_get("challenge_id")?,
        user: user_from_row(row)?,
        purpose: Purpose::parse(&purpose).ok_or_else(challenge_gone)?,
    })
}

fn challenge_gone() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, "This sign-in has expired or was used; sign in again")
        .with_hint("Start again with POST /v1/auth/sign-in.")
}

impl IdentityStore {
    /// The user's TOTP secret, confirmed or pending.
    pub async fn totp_factor(&self, user_id: &str) -> ServiceResult<Option<TotpFactor>> {
        let row = sqlx::query("SELECT secret, confirmed_at, last_step FROM totp_factors WHERE user_id = $1")
            .bind(user_id)
            .fetch_optional(self.db.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let stored: String = row.try_get("secret")?;
        let secret = match &self.sealer {
            Some(sealer) => sealer.open(&stored, &totp_context(user_id))?,
            None => stored,
        };
        Ok(Some(TotpFactor {
            secret,
            confirmed: row.try_get::<Option<i64>, _>("confirmed_at")?.is_some(),
            last_step: row.try_get("last_step")?,
        }))
    }

    /// `secret` as stored for `user_id`: sealed, when the store has a sealer.
    fn sealed(&self, secret: &str, user_id: &str) -> ServiceResult<String> {
        match &self.sealer {
            Some(sealer) => sealer.seal(secret, &totp_context(user_id)),
            None => Ok(secret.to_owned()),
        }
    }

    /// Seals again every TOTP secret not sealed under the current key: those kept before
    /// sealing existed, and those of a key being rotated out. Answers how many. Run at start.
    pub async fn reseal_totp_secrets(&self) -> ServiceResult<usize> {
        let Some(sealer) = &self.sealer else { return Ok(0) };
        let rows = sqlx::query("SELECT user_id, secret FROM totp_factors").fetch_all(self.db.pool()).await?;
        let mut resealed = 0;
        for row in rows {
            let (user_id, stored): (String, String) = (row.try_get("user_id")?, row.try_get("secret")?);
            if sealer.is_current(&stored) {
                continue;
            }
            let secret = sealer.open(&stored, &totp_context(&user_id))?;
            // Compared with what was read: a secret replaced meanwhile is left to its writer.
            let updated = sqlx::query("UPDATE totp_factors SET secret = $1 WHERE user_id = $2 AND secret = $3")
                .bind(sealer.seal(&secret, &totp_context(&user_id))?)
                .bind(&user_id)
                .bind(&stored)
                .execute(self.db.pool())
                .await?;
            resealed += usize::try_from(updated.rows_affected()).unwrap_or(0);
        }
        Ok(resealed)
    }

    /// What the user has, and whether their team requires a second factor.
    pub async fn second_factors(&self, user: &User) -> ServiceResult<SecondFactors> {
        let totp = sqlx::query("SELECT confirmed_at FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL")
            .bind(&user.id)
            .fetch_optional(self.db.pool())
            .await?;
        let left: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM recovery_codes WHERE user_id = $1 AND used_at IS NULL")
                .bind(&user.id)
                .fetch_one(self.db.pool())
                .await?;
        Ok(SecondFactors {
            totp: totp.is_some(),
            totp_confirmed_at_ms: totp.map(|row| row.try_get("confirmed_at")).transpose()?,
            recovery_codes_left: i32::try_from(left).unwrap_or(i32::MAX),
            required: self.requires_second_factor(&user.team_id).await?,
            passkeys: self.passkey_infos(&user.id).await?,
            password: self.password_hash(&user.id).await?.is_some(),
        })
    }

    /// Whether the user has a second factor that sign-in asks for: an authenticator app, or a
    /// passkey.
    pub async fn has_second_factor(&self, user_id: &str) -> ServiceResult<bool> {
        let found: i64 =
            sqlx::query_scalar(&format!("SELECT {FACTOR_COUNT}")).bind(user_id).fetch_one(self.db.pool()).await?;
        Ok(found > 0)
    }

    /// The pending sign-in with this token, without counting a try (a passkey ceremony is
    /// counted when its assertion comes back).
    pub async fn peek_challenge(&self, token: &str) -> ServiceResult<Challenge> {
        let columns = USER_COLUMNS.split(", ").map(|column| format!("u.{column}")).collect::<Vec<_>>().join(", ");
        let row = sqlx::query(&format!(
            "SELECT c.id AS challenge_id, c.purpose, {columns} FROM sign_in_challenges c \
             JOIN users u ON u.id = c.user_id \
             WHERE c.token_hash = $1 AND c.used_at IS NULL AND c.expires_at > $2 AND c.attempts < $3"
        ))
        .bind(hash_key(token))
        .bind(now_ms())
        .bind(ATTEMPTS_PER_CHALLENGE)
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(challenge_gone)?;
        challenge_from_row(&row)
    }

    /// Keeps a new pending TOTP secret for the user (replacing a pending one); 409 when one is
    /// in use already.
    pub async fn begin_totp(&self, user_id: &str, secret: &str) -> ServiceResult<()> {
        let mut tx = self.db.begin_write().await?;
        let confirmed: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL")
                .bind(user_id)
                .fetch_one(&mut *tx)
                .await?;
        if confirmed > 0 {
            return Err(ServiceError::conflict("An authenticator app is set up already")
                .with_hint("Remove it first (DELETE /v1/auth/second-factors/totp) to set up another."));
        }
        sqlx::query("DELETE FROM totp_factors WHERE user_id = $1").bind(user_id).execute(&mut *tx).await?;
        let stored = self.sealed(secret, user_id)?;
        sqlx::query("INSERT INTO totp_factors (user_id, secret, created_at) VALUES ($1, $2, $3)")
            .bind(user_id)
            .bind(&stored)
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes `step` as the user's last accepted time step: false when it was taken already (or
    /// a later one was), so that each code works once. With `confirm`, the pending secret is
    /// put in use and the recovery codes replaced by `recovery_hashes`, in one transaction.
    pub async fn accept_totp_step(&self, user_id: &str, step: i64, confirm: Option<&[String]>) -> ServiceResult<bool> {
        let mut tx = self.db.begin_write().await?;
        let confirmed = if confirm.is_some() { "confirmed_at IS NULL" } else { "confirmed_at IS NOT NULL" };
        let taken = sqlx::query(&format!(
            "UPDATE totp_factors SET last_step = $1, confirmed_at = COALESCE(confirmed_at, $2) \
             WHERE user_id = $3 AND last_step < $1 AND {confirmed}"
        ))
        .bind(step)
        .bind(now_ms())
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        if taken.rows_affected() == 0 {
            return Ok(false);
        }
        if let Some(hashes) = confirm {
            replace_recovery_codes(&mut tx, user_id, hashes).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Uses one of the user's recovery codes (by its hash): false when it is not one, or was used.
    pub async fn use_recovery_code(&self, user_id: &str, code_hash: &str) -> ServiceResult<bool> {
        let used = sqlx::query(
            "UPDATE recovery_codes SET used_at = $1 WHERE user_id = $2 AND code_hash = $3 AND used_at IS NULL",
        )
        .bind(now_ms())
        .bind(user_id)
        .bind(code_hash)
        .execute(self.db.pool())
        .await?;
        Ok(used.rows_affected() > 0)
    }

    /// New recovery codes (their hashes) for a user who has a second factor.
    pub async fn renew_recovery_codes(&self, user_id: &str, hashes: &[String]) -> ServiceResult<()> {
        if !self.has_second_factor(user_id).await? {
            return Err(ServiceError::conflict("Recovery codes go with a second factor; set one up first"));
        }
        let mut tx = self.db.begin_write().await?;
        replace_recovery_codes(&mut tx, user_id, hashes).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes the user's TOTP secret and recovery codes. 409 when their team requires a
    /// second factor and this is their only one.
    pub async fn remove_totp(&self, user: &User) -> ServiceResult<()> {
        let passkeys: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM passkeys WHERE user_id = $1")
            .bind(&user.id)
            .fetch_one(self.db.pool())
            .await?;
        if passkeys == 0 && self.requires_second_factor(&user.team_id).await? {
            return Err(ServiceError::conflict("Your team requires a second factor")
                .with_hint("An owner can lift the requirement; until then the authenticator app stays."));
        }
        let mut tx = self.db.begin_write().await?;
        sqlx::query("DELETE FROM totp_factors WHERE user_id = $1").bind(&user.id).execute(&mut *tx).await?;
        // Recovery codes go with the last second factor.
        if passkeys == 0 {
            sqlx::query("DELETE FROM recovery_codes WHERE user_id = $1").bind(&user.id).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A pending sign-in of `user`, which passed the password (or used a reset link, or
    /// re-authenticates): answers its token (shown once).
    pub async fn create_challenge(
        &self,
        user: &User,
        client: &Client,
        purpose: Purpose,
    ) -> ServiceResult<(String, i64)> {
        let token = new_token();
        let now = now_ms();
        let expires_at = now + CHALLENGE_FOR_MS;
        sqlx::query(
            "INSERT INTO sign_in_challenges (id, token_hash, user_id, created_at, expires_at, ip, user_agent, purpose) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(uuid::Uuid::new_v4().to_string())
        .bind(hash_key(&token))
        .bind(&user.id)
        .bind(now)
        .bind(expires_at)
        .bind(&client.ip)
        .bind(&client.user_agent)
        .bind(purpose.as_str())
        .execute(self.db.pool())
        .await?;
        Ok((token, expires_at))
    }

    /// The pending sign-in with this token, counting this try: refused when it is unknown,
    /// used, expired or out of tries (401), or when its user failed too often lately (429).
    pub async fn challenge(&self, token: &str) -> ServiceResult<Challenge> {
        let now = now_ms();
        let counted = sqlx::query(
            "UPDATE sign_in_challenges SET attempts = attempts + 1 \
             WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 AND attempts < $3",
        )
        .bind(hash_key(token))
        .bind(now)
        .bind(ATTEMPTS_PER_CHALLENGE)
        .execute(self.db.pool())
        .await?;
        if counted.rows_affected() == 0 {
            return Err(challenge_gone());
        }
        let columns = USER_COLUMNS.split(", ").map(|column| format!("u.{column}")).collect::<Vec<_>>().join(", ");
        let row = sqlx::query(&format!(
            "SELECT c.id AS challenge_id, c.purpose, {columns} FROM sign_in_challenges c \
             JOIN users u ON u.id = c.user_id WHERE c.token_hash = $1"
        ))
        .bind(hash_key(token))
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(challenge_gone)?;
        let challenge = challenge_from_row(&row)?;
        let user = &challenge.user;
        // Every try but a challenge's successful one is a failure; counted over all challenges.
        let (failures, oldest): (i64, Option<i64>) = {
            let row = sqlx::query(
                "SELECT CAST(COALESCE(SUM(CASE WHEN used_at IS NULL THEN attempts ELSE attempts - 1 END), 0) AS BIGINT) \
                 AS failures, \
                 MIN(created_at) AS oldest FROM sign_in_challenges WHERE user_id = $1 AND created_at > $2",
            )
            .bind(&user.id)
            .bind(now - FAILURE_WINDOW_MS)
            .fetch_one(self.db.pool())
            .await?;
            (row.try_get("failures")?, row.try_get("oldest")?)
        };
        // This try is among the attempts counted: more than the limit before it waits.
        if failures > FAILURES_PER_WINDOW {
            // A try refused here checked no code: it must not count as a failure, or a burst of
            // tries in flight together would lock the person out for the whole window.
            sqlx::query("UPDATE sign_in_challenges SET attempts = attempts - 1 WHERE id = $1 AND attempts > 0")
                .bind(&challenge.id)
                .execute(self.db.pool())
                .await?;
            let retry_at = oldest.unwrap_or(now) + FAILURE_WINDOW_MS;
            return Err(ServiceError::limited_until("Too many wrong codes; try again later", retry_at)
                .with_hint("After 10 wrong codes in 15 minutes, a second factor waits."));
        }
        Ok(challenge)
    }

    /// A pending sign-in is done: it cannot be used again.
    pub async fn finish_challenge(&self, challenge_id: &str) -> ServiceResult<()> {
        let done = sqlx::query("UPDATE sign_in_challenges SET used_at = $1 WHERE id = $2 AND used_at IS NULL")
            .bind(now_ms())
            .bind(challenge_id)
            .execute(self.db.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(challenge_gone());
        }
        Ok(())
    }

    pub async fn requires_second_factor(&self, team_id: &str) -> ServiceResult<bool> {
        let required: Option<i64> = sqlx::query_scalar("SELECT require_second_factor FROM teams WHERE id = $1")
            .bind(team_id)
            .fetch_optional(self.db.pool())
            .await?;
        Ok(required.unwrap_or(0) != 0)
    }

    pub async fn set_requires_second_factor(&self, team_id: &str, required: bool) -> ServiceResult<()> {
        let updated = sqlx::query("UPDATE teams SET require_second_factor = $1 WHERE id = $2 AND deleted_at IS NULL")
            .bind(i64::from(required))
            .bind(team_id)
            .execute(self.db.pool())
            .await?;
        if updated.rows_affected() == 0 {
            return Err(ServiceError::team_not_found());
        }
        Ok(())
    }
}

async fn replace_recovery_codes(conn: &mut AnyConnection, user_id: &str, hashes: &[String]) -> ServiceResult<()> {
    sqlx::query("DELETE FROM recovery_codes WHERE user_id = $1").bind(user_id).execute(&mut *conn).await?;
    let now = now_ms();
    for hash in hashes {
        sqlx::query("INSERT INTO recovery_codes (id, user_id, code_hash, created_at) VALUES ($1, $2, $3, $4)")
            .bind(uuid::Uuid::new_v4().to_string())
            .bind(user_id)
            .bind(hash)
            .bind(now)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
