//! A person's own sessions: listed with where and when they were used, and ended one by one or
//! all but the one asking ("sign out everywhere else"). Only the session's own user reaches
//! them: every call starts from the caller's token.

use sqlx::Row;
use sqlx::any::AnyRow;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{Session, SessionInfo};

use super::IdentityStore;
use super::accounts::SessionTimes;

fn session_not_found() -> ServiceError {
    ServiceError::not_found("Session not found: not one of yours, or ended already")
}

fn info_from_row(row: &AnyRow, token_hash: &str) -> Result<SessionInfo, sqlx::Error> {
    Ok(SessionInfo {
        id: row.try_get("id")?,
        created_at_ms: row.try_get("created_at")?,
        last_seen_at_ms: row.try_get("last_seen_at")?,
        expires_at_ms: row.try_get("expires_at")?,
        ip: row.try_get("ip")?,
        user_agent: row.try_get("user_agent")?,
        current: row.try_get::<String, _>("token_hash")? == token_hash,
    })
}

fn user_id(session: &Session) -> &str {
    session.user.as_ref().map_or("", |user| user.id.as_str())
}

impl IdentityStore {
    /// Ends every session of `user_id` but the one with `keep_token_hash`: what a new or removed
    /// second factor does, so that a session opened before it (or a stolen one) does not outlive
    /// the change. Answers how many ended.
    pub async fn end_other_sessions(&self, user_id: &str, keep_token_hash: &str) -> ServiceResult<u64> {
        let mut tx = self.db.begin_write().await?;
        let ended = sqlx::query(
            "UPDATE sessions SET ended_at = $1 WHERE user_id = $2 AND token_hash <> $3 AND ended_at IS NULL",
        )
        .bind(now_ms())
        .bind(user_id)
        .bind(keep_token_hash)
        .execute(&mut *tx)
        .await?;
        super::accounts::end_pending_sign_ins(&mut tx, user_id).await?;
        tx.commit().await?;
        Ok(ended.rows_affected())
    }

    /// The live sessions of the caller's user, newest first; the caller's is `current`.
    pub async fn user_sessions(&self, token_hash: &str, times: SessionTimes) -> ServiceResult<Vec<SessionInfo>> {
        let caller = self.session(token_hash, times).await?;
        let now = now_ms();
        let rows = sqlx::query(
            "SELECT id, token_hash, created_at, last_seen_at, expires_at, ip, user_agent FROM sessions \
             WHERE user_id = $1 AND ended_at IS NULL AND expires_at > $2 AND last_seen_at > $3 \
             ORDER BY created_at DESC, id",
        )
        .bind(user_id(&caller))
        .bind(now)
        .bind(now - times.idle_ms)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.iter().map(|row| info_from_row(row, token_hash)).collect::<Result<_, _>>()?)
    }

    /// Ends the caller's user's session `session_id`, or (without one) every one of them but
    /// the caller's. Answers the caller's session (for the audit log) and how many ended.
    pub async fn end_user_sessions(
        &self,
        token_hash: &str,
        session_id: Option<&str>,
        times: SessionTimes,
    ) -> ServiceResult<(Session, i32)> {
        let caller = self.session(token_hash, times).await?;
        let now = now_ms();
        let ended = match session_id {
            Some(id) => {
                if uuid::Uuid::parse_str(id).is_err() {
                    return Err(session_not_found());
                }
                let ended = sqlx::query(
                    "UPDATE sessions SET ended_at = $1 WHERE id = $2 AND user_id = $3 AND ended_at IS NULL \
                     AND expires_at > $1",
                )
                .bind(now)
                .bind(id)
                .bind(user_id(&caller))
                .execute(self.db.pool())
                .await?;
                if ended.rows_affected() == 0 {
                    return Err(session_not_found());
                }
                1
            }
            None => self.end_other_sessions(user_id(&caller), token_hash).await?,
        };
        Ok((caller, i32::try_from(ended).unwrap_or(i32::MAX)))
    }
}
