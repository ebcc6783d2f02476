//! Single-use links: invitations into a team and password resets. The token is in the answer
//! that made the link and nowhere else (it is stored as its SHA-256); using a link, or its
//! expiry, ends it.

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::apikey::hash_key;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{Actor, Client, Invitation, InvitationPreview, NewUser, SignedIn, User};

use super::accounts::{SessionTimes, begin_session_in, new_token, set_password_in, user_in};
pub use super::credentials::LinkKind;
use super::credentials::end_reset_links;
use super::users::{insert_user, is_owner, role_violation};
use super::{IdentityStore, check_id};
use crate::validate;

/// What a new link is for.
pub struct NewLink<'a> {
    pub kind: LinkKind,
    pub team_id: &'a str,
    pub email: &'a str,
    pub role: &'a str,
    /// The existing user it lets in (a subteam's first user, a reset); none for a new member.
    pub user_id: Option<&'a str>,
    pub created_by: Option<&'a Actor>,
    pub valid_ms: i64,
}

/// The names an accepted invitation gives its user.
pub struct Names<'a> {
    pub first_name: &'a str,
    pub last_name: &'a str,
}

fn link_gone(kind: LinkKind) -> ServiceError {
    let what = match kind {
        LinkKind::Reset => "Password reset link",
        LinkKind::Invite => "Invitation",
    };
    ServiceError::not_found(format!("{what} not found: unknown, used already, or expired"))
        .with_hint("Ask for a new link.")
}

/// Inserts a link within `conn`'s transaction; answers it with its token.
pub(super) async fn insert_link(conn: &mut AnyConnection, new: &NewLink<'_>) -> ServiceResult<Invitation> {
    let token = new_token();
    let now = now_ms();
    let invitation = Invitation {
        id: uuid::Uuid::new_v4().to_string(),
        team_id: new.team_id.to_owned(),
        email: new.email.trim().to_lowercase(),
        role: new.role.to_owned(),
        token,
        expires_at_ms: now + new.valid_ms,
        kind: new.kind.as_str().to_owned(),
        created_at_ms: now,
        created_by: new.created_by.cloned(),
        mailed: false,
    };
    sqlx::query(
        "INSERT INTO link_tokens (id, token_hash, kind, team_id, email, role, user_id, created_by_type, \
         created_by_id, created_by_name, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(&invitation.id)
    .bind(hash_key(&invitation.token))
    .bind(new.kind.as_str())
    .bind(new.team_id)
    .bind(&invitation.email)
    .bind(new.role)
    .bind(new.user_id)
    .bind(new.created_by.map(|actor| actor.r#type.clone()))
    .bind(new.created_by.map(|actor| actor.id.clone()))
    .bind(new.created_by.map(|actor| actor.name.clone()))
    .bind(now)
    .bind(invitation.expires_at_ms)
    .execute(conn)
    .await?;
    Ok(invitation)
}

/// A live link of `kind` with this token, locked for this transaction's use.
async fn live_link(conn: &mut AnyConnection, kind: LinkKind, token: &str) -> ServiceResult<AnyRow> {
    sqlx::query(
        "SELECT id, team_id, email, role, user_id FROM link_tokens \
         WHERE token_hash = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3",
    )
    .bind(hash_key(token))
    .bind(kind.as_str())
    .bind(now_ms())
    .fetch_optional(&mut *conn)
    .await?
    .ok_or_else(|| link_gone(kind))
}

async fn mark_used(conn: &mut AnyConnection, kind: LinkKind, link_id: &str) -> ServiceResult<()> {
    let used = sqlx::query("UPDATE link_tokens SET used_at = $1 WHERE id = $2 AND used_at IS NULL")
        .bind(now_ms())
        .bind(link_id)
        .execute(conn)
        .await?;
    // Another request used it between our read and this write (PostgreSQL, read committed).
    if used.rows_affected() == 0 {
        return Err(link_gone(kind));
    }
    Ok(())
}

const INVITATION_COLUMNS: &str =
    "id, team_id, email, role, kind, created_at, expires_at, created_by_type, created_by_id, created_by_name";

/// A stored link without its token, which only the answer that made it held.
fn invitation_from_row(row: &AnyRow) -> Result<Invitation, sqlx::Error> {
    let created_by = match row.try_get::<Option<String>, _>("created_by_type")? {
        Some(kind) => Some(Actor {
            r#type: kind,
            id: row.try_get::<Option<String>, _>("created_by_id")?.unwrap_or_default(),
            name: row.try_get::<Option<String>, _>("created_by_name")?.unwrap_or_default(),
        }),
        None => None,
    };
    Ok(Invitation {
        id: row.try_get("id")?,
        team_id: row.try_get("team_id")?,
        email: row.try_get("email")?,
        role: row.try_get("role")?,
        token: String::new(),
        expires_at_ms: row.try_get("expires_at")?,
        kind: row.try_get("kind")?,
        created_at_ms: row.try_get("created_at")?,
        created_by,
        mailed: false,
    })
}

fn invitation_gone() -> ServiceError {
    ServiceError::not_found("Invitation not found: unknown, used already, revoked or expired")
}

impl IdentityStore {
    /// The e-mail of the live link of `kind` with this token, or 404: looked up before a new
    /// password is hashed, so that a guessed token costs a lookup, not a hash. (Using the link
    /// checks again.)
    pub async fn check_link(&self, kind: LinkKind, token: &str) -> ServiceResult<String> {
        let found: Option<String> = sqlx::query_scalar(
            "SELECT email FROM link_tokens WHERE token_hash = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3",
        )
        .bind(hash_key(token))
        .bind(kind.as_str())
        .bind(now_ms())
        .fetch_optional(self.db.pool())
        .await?;
        found.ok_or_else(|| link_gone(kind))
    }

    /// What the page of a live invitation shows: its team's name, the address invited, the role
    /// and the expiry; 404 as for using it.
    pub async fn invitation_preview(&self, token: &str) -> ServiceResult<InvitationPreview> {
        let row = sqlx::query(
            "SELECT l.email, l.role, l.expires_at, t.id, t.name FROM link_tokens l JOIN teams t ON t.id = l.team_id \
             WHERE l.token_hash = $1 AND l.kind = $2 AND l.used_at IS NULL AND l.expires_at > $3 \
             AND t.deleted_at IS NULL",
        )
        .bind(hash_key(token))
        .bind(LinkKind::Invite.as_str())
        .bind(now_ms())
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(|| link_gone(LinkKind::Invite))?;
        Ok(InvitationPreview {
            team_id: row.try_get("id")?,
            team_name: row.try_get("name")?,
            email: row.try_get("email")?,
            role: row.try_get("role")?,
            expires_at_ms: row.try_get("expires_at")?,
        })
    }

    /// The team's invitations that can still be accepted, newest first.
    pub async fn pending_invitations(&self, team_id: &str) -> ServiceResult<Vec<Invitation>> {
        check_id("teamId", team_id)?;
        let rows = sqlx::query(&format!(
            "SELECT {INVITATION_COLUMNS} FROM link_tokens WHERE team_id = $1 AND kind = $2 AND used_at IS NULL \
             AND expires_at > $3 ORDER BY created_at DESC, id"
        ))
        .bind(team_id)
        .bind(LinkKind::Invite.as_str())
        .bind(now_ms())
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.iter().map(invitation_from_row).collect::<Result<_, _>>()?)
    }

    /// Revokes a pending invitation of the team: its link stops working at once. Only an owner
    /// revokes an invitation as owner (as only an owner makes one).
    pub async fn revoke_invitation(
        &self,
        team_id: &str,
        invitation_id: &str,
        caller_role: &str,
    ) -> ServiceResult<Invitation> {
        check_id("teamId", team_id)?;
        if uuid::Uuid::parse_str(invitation_id).is_err() {
            return Err(invitation_gone());
        }
        let mut tx = self.db.begin_write().await?;
        let row = sqlx::query(&format!(
            "SELECT {INVITATION_COLUMNS} FROM link_tokens WHERE id = $1 AND team_id = $2 AND kind = $3 \
             AND used_at IS NULL AND expires_at > $4"
        ))
        .bind(invitation_id)
        .bind(team_id)
        .bind(LinkKind::Invite.as_str())
        .bind(now_ms())
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(invitation_gone)?;
        let invitation = invitation_from_row(&row)?;
        if is_owner(&invitation.role) && !is_owner(caller_role) {
            return Err(ServiceError::forbidden("Only an owner can revoke an invitation as owner"));
        }
        let deleted = sqlx::query("DELETE FROM link_tokens WHERE id = $1 AND used_at IS NULL")
            .bind(invitation_id)
            .execute(&mut *tx)
            .await?;
        // Accepted between our read and this write.
        if deleted.rows_affected() == 0 {
            return Err(invitation_gone());
        }
        tx.commit().await?;
        Ok(invitation)
    }

    /// An invitation of `email` into the team with `role`. Someone who is a member already
    /// cannot be invited (409). An address that signs in to another team is invited all the
    /// same, with the same answer: the inviter must not learn from it who has an account
    /// (accepting it then fails, for whoever holds the link; docs/security.md).
    pub async fn invite(
        &self,
        team_id: &str,
        email: &str,
        role: &str,
        created_by: Option<&Actor>,
        valid_ms: i64,
    ) -> ServiceResult<Invitation> {
        validate::all([validate::email("email", email.trim()), role_violation(role)])?;
        self.team(team_id).await?;
        let email_key = email.trim().to_lowercase();
        let mut tx = self.db.begin_write().await?;
        let member = sqlx::query("SELECT id FROM users WHERE email_key = $1 AND team_id = $2")
            .bind(&email_key)
            .bind(team_id)
            .fetch_optional(&mut *tx)
            .await?;
        if member.is_some() {
            return Err(ServiceError::conflict("This person is a member of the team already"));
        }
        let link =
            NewLink { kind: LinkKind::Invite, team_id, email: &email_key, role, user_id: None, created_by, valid_ms };
        let invitation = insert_link(&mut tx, &link).await?;
        tx.commit().await?;
        Ok(invitation)
    }

    /// Accepts an invitation: its user gets the password and names and is signed in.
    pub async fn accept_invitation(
        &self,
        token: &str,
        names: Names<'_>,
        password_hash: &str,
        client: &Client,
        times: SessionTimes,
    ) -> ServiceResult<SignedIn> {
        validate::all([
            limits::PERSON_NAME.check("firstName", names.first_name),
            limits::PERSON_NAME.check("lastName", names.last_name),
        ])?;
        let mut tx = self.db.begin_write().await?;
        let link = live_link(&mut tx, LinkKind::Invite, token).await?;
        let (link_id, team_id): (String, String) = (link.try_get("id")?, link.try_get("team_id")?);
        let live_team = sqlx::query("SELECT id FROM teams WHERE id = $1 AND deleted_at IS NULL")
            .bind(&team_id)
            .fetch_optional(&mut *tx)
            .await?;
        if live_team.is_none() {
            return Err(link_gone(LinkKind::Invite));
        }
        let user_id = match link.try_get::<Option<String>, _>("user_id")? {
            Some(user_id) => {
                sqlx::query("UPDATE users SET first_name = $1, last_name = $2 WHERE id = $3")
                    .bind(names.first_name.trim())
                    .bind(names.last_name.trim())
                    .bind(&user_id)
                    .execute(&mut *tx)
                    .await?;
                user_id
            }
            None => {
                let new = NewUser {
                    first_name: names.first_name.to_owned(),
                    last_name: names.last_name.to_owned(),
                    email: link.try_get("email")?,
                    role: link.try_get("role")?,
                };
                insert_user(&mut tx, &team_id, &new).await?.id
            }
        };
        set_password_in(&mut tx, &user_id, password_hash).await?;
        mark_used(&mut tx, LinkKind::Invite, &link_id).await?;
        let user = user_in(&mut tx, &user_id).await?.ok_or_else(|| link_gone(LinkKind::Invite))?;
        let signed_in = begin_session_in(&mut tx, &user, client, times).await?;
        tx.commit().await?;
        Ok(signed_in)
    }

    /// A password-reset link for the user with this e-mail (the one who signs in with it, or
    /// else the newest user with it, who then sets a first password).
    pub async fn reset_link(&self, email: &str, valid_ms: i64) -> ServiceResult<Invitation> {
        let row = sqlx::query(
            "SELECT id, team_id, email, role FROM users WHERE email_key = $1 \
             ORDER BY CASE WHEN password_hash IS NULL THEN 1 ELSE 0 END, created_at DESC LIMIT 1",
        )
        .bind(email.trim().to_lowercase())
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(|| ServiceError::not_found("No user has this e-mail address"))?;
        let (user_id, team_id, email, role): (String, String, String, String) =
            (row.try_get("id")?, row.try_get("team_id")?, row.try_get("email")?, row.try_get("role")?);
        let mut tx = self.db.begin_write().await?;
        // Only the newest link works: one mailed earlier, to wherever it went, stops working.
        end_reset_links(&mut tx, &user_id).await?;
        let link = NewLink {
            kind: LinkKind::Reset,
            team_id: &team_id,
            email: &email,
            role: &role,
            user_id: Some(&user_id),
            created_by: None,
            valid_ms,
        };
        let invitation = insert_link(&mut tx, &link).await?;
        tx.commit().await?;
        Ok(invitation)
    }

    /// Uses a reset link: the new password, every session and every other link of the user
    /// ended. Answers the user, who then signs in as a sign-in would (their second factor
    /// first, when they have one).
    pub async fn reset_password(&self, token: &str, password_hash: &str) -> ServiceResult<User> {
        let mut tx = self.db.begin_write().await?;
        let link = live_link(&mut tx, LinkKind::Reset, token).await?;
        let (link_id, user_id): (String, Option<String>) = (link.try_get("id")?, link.try_get("user_id")?);
        let user_id = user_id.ok_or_else(|| link_gone(LinkKind::Reset))?;
        check_id("userId", &user_id)?;
        mark_used(&mut tx, LinkKind::Reset, &link_id).await?;
        let user = set_password_in(&mut tx, &user_id, password_hash).await?;
        tx.commit().await?;
        Ok(user)
    }
}
