//! A person's standing credentials other than their password (sessions, invitation and reset
//! links, pending e-mail changes) and what ends them. Accounts, links, members and profile
//! changes each end some of them; they share these primitives instead of reaching into each
//! other.

use sqlx::AnyConnection;
use switchboard_kit::ServiceResult;
use switchboard_kit::time::now_ms;

/// What a link lets its holder do; stored as its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// Join a team (a new member, or a subteam's first user).
    Invite,
    /// Set a new password.
    Reset,
}

impl LinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Invite => "invite",
            LinkKind::Reset => "reset",
        }
    }
}

/// Ends the pending invitations `user_id` made (within `conn`'s transaction); answers how many
/// were still live. An invitation is only as good as its maker's standing.
pub(super) async fn end_invitations_by(conn: &mut AnyConnection, user_id: &str) -> ServiceResult<i32> {
    let live: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM link_tokens WHERE kind = $1 AND created_by_type = 'user' AND created_by_id = $2 \
         AND used_at IS NULL AND expires_at > $3",
    )
    .bind(LinkKind::Invite.as_str())
    .bind(user_id)
    .bind(now_ms())
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query(
        "DELETE FROM link_tokens WHERE kind = $1 AND created_by_type = 'user' AND created_by_id = $2 AND used_at IS NULL",
    )
    .bind(LinkKind::Invite.as_str())
    .bind(user_id)
    .execute(&mut *conn)
    .await?;
    Ok(i32::try_from(live).unwrap_or(i32::MAX))
}

/// Ends the password-reset links of `user_id` that are still out (within `conn`'s
/// transaction): a new one, a reset, a password change and an e-mail change each end the older.
pub(super) async fn end_reset_links(conn: &mut AnyConnection, user_id: &str) -> ServiceResult<()> {
    sqlx::query("DELETE FROM link_tokens WHERE kind = $1 AND user_id = $2 AND used_at IS NULL")
        .bind(LinkKind::Reset.as_str())
        .bind(user_id)
        .execute(conn)
        .await?;
    Ok(())
}

pub(super) async fn end_sessions_of(conn: &mut AnyConnection, user_id: &str) -> ServiceResult<()> {
    sqlx::query("UPDATE sessions SET ended_at = $1 WHERE user_id = $2 AND ended_at IS NULL")
        .bind(now_ms())
        .bind(user_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Ends the e-mail changes of `user_id` that wait for their link (within `conn`'s transaction).
pub(super) async fn end_email_changes(conn: &mut AnyConnection, user_id: &str) -> ServiceResult<()> {
    sqlx::query("DELETE FROM email_changes WHERE user_id = $1 AND used_at IS NULL").bind(user_id).execute(conn).await?;
    Ok(())
}
