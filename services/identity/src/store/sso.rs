//! Single sign-on as stored: each team's OpenID Connect provider and the e-mail domains it
//! covers, the sign-ins under way (state, nonce and PKCE verifier, bound to a browser), and
//! the people the provider vouches for, found by their subject or e-mail, or created at their
//! first sign-in. The protocol itself is `crate::sso`.

use sqlx::Row;
use switchboard_kit::apikey::hash_key;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{Client, NewUser, SignedIn, SsoConfig, User};

use super::IdentityStore;
use super::accounts::{SessionTimes, begin_session_with};
use super::users::{USER_COLUMNS, insert_user, user_from_row};

/// How long a sign-in may stay at the provider.
pub const LOGIN_FOR_MS: i64 = 10 * 60 * 1000;

/// A team's provider, with its secret (never answered to a client).
pub struct StoredSso {
    pub config: SsoConfig,
    pub client_secret: String,
}

/// A sign-in under way, as `start` left it.
pub struct PendingLogin {
    pub team_id: String,
    pub nonce: String,
    pub pkce_verifier: String,
    pub redirect_uri: String,
}

/// What a new configuration says; `client_secret` `None` keeps the stored one.
pub struct NewSso<'a> {
    pub issuer: &'a str,
    pub client_id: &'a str,
    pub client_secret: Option<&'a str>,
    pub domains: &'a [String],
    pub default_role: &'a str,
    pub enabled: bool,
}

/// Who the provider says signed in.
pub struct Vouched<'a> {
    pub subject: &'a str,
    pub email: &'a str,
    pub first_name: &'a str,
    pub last_name: &'a str,
}

fn login_gone() -> ServiceError {
    ServiceError::new(switchboard_kit::ErrorKind::Unauthorized, "This single sign-on has expired or was used")
        .with_hint("Start again from the sign-in page.")
}

impl IdentityStore {
    /// The team's provider, if it has one.
    pub async fn sso(&self, team_id: &str) -> ServiceResult<Option<StoredSso>> {
        let row = sqlx::query(
            "SELECT issuer, client_id, client_secret, default_role, enabled, updated_at FROM sso_configs WHERE team_id = $1",
        )
        .bind(team_id)
        .fetch_optional(self.db.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let domains: Vec<String> =
            sqlx::query_scalar("SELECT domain FROM sso_domains WHERE team_id = $1 ORDER BY domain")
                .bind(team_id)
                .fetch_all(self.db.pool())
                .await?;
        let config = SsoConfig {
            team_id: team_id.to_owned(),
            issuer: row.try_get("issuer")?,
            client_id: row.try_get("client_id")?,
            has_client_secret: true,
            domains,
            default_role: row.try_get("default_role")?,
            enabled: row.try_get::<i64, _>("enabled")? != 0,
            updated_at_ms: row.try_get("updated_at")?,
        };
        Ok(Some(StoredSso { config, client_secret: row.try_get("client_secret")? }))
    }

    /// The team whose provider covers `domain`, when it is switched on.
    pub async fn sso_team_of_domain(&self, domain: &str) -> ServiceResult<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT d.team_id FROM sso_domains d JOIN sso_configs c ON c.team_id = d.team_id \
             JOIN teams t ON t.id = d.team_id WHERE d.domain = $1 AND c.enabled <> 0 AND t.deleted_at IS NULL",
        )
        .bind(domain)
        .fetch_optional(self.db.pool())
        .await?)
    }

    /// Sets the team's provider and domains. 409 when a domain is another team's.
    pub async fn set_sso(&self, team_id: &str, new: &NewSso<'_>) -> ServiceResult<()> {
        let mut tx = self.db.begin_write().await?;
        self.db.lock_scope(&mut tx, "sso_domains").await?;
        let existing: Option<String> = sqlx::query_scalar("SELECT client_secret FROM sso_configs WHERE team_id = $1")
            .bind(team_id)
            .fetch_optional(&mut *tx)
            .await?;
        let secret = match (new.client_secret, existing) {
            (Some(secret), _) => secret.to_owned(),
            (None, Some(kept)) => kept,
            (None, None) => return Err(ServiceError::invalid_field("clientSecret", "is required")),
        };
        for domain in new.domains {
            let owner: Option<String> = sqlx::query_scalar("SELECT team_id FROM sso_domains WHERE domain = $1")
                .bind(domain)
                .fetch_optional(&mut *tx)
                .await?;
            if owner.is_some_and(|owner| owner != team_id) {
                return Err(ServiceError::conflict(format!("{domain} is covered by another team's single sign-on")));
            }
        }
        let now = now_ms();
        sqlx::query("DELETE FROM sso_configs WHERE team_id = $1").bind(team_id).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT INTO sso_configs (team_id, issuer, client_id, client_secret, default_role, enabled, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
        )
        .bind(team_id)
        .bind(new.issuer)
        .bind(new.client_id)
        .bind(&secret)
        .bind(new.default_role)
        .bind(i64::from(new.enabled))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM sso_domains WHERE team_id = $1").bind(team_id).execute(&mut *tx).await?;
        for domain in new.domains {
            sqlx::query("INSERT INTO sso_domains (domain, team_id) VALUES ($1, $2)")
                .bind(domain)
                .bind(team_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Removes the team's provider; its people who signed in only through it can no longer.
    pub async fn delete_sso(&self, team_id: &str) -> ServiceResult<()> {
        let mut tx = self.db.begin_write().await?;
        sqlx::query("DELETE FROM sso_domains WHERE team_id = $1").bind(team_id).execute(&mut *tx).await?;
        let deleted = sqlx::query("DELETE FROM sso_configs WHERE team_id = $1").bind(team_id).execute(&mut *tx).await?;
        if deleted.rows_affected() == 0 {
            return Err(ServiceError::not_found("This team has no single sign-on"));
        }
        tx.commit().await?;
        Ok(())
    }

    /// Keeps a sign-in going to the provider; `state` and `binding` are kept as SHA-256.
    pub async fn begin_sso_login(
        &self,
        team_id: &str,
        (state, binding): (&str, &str),
        nonce: &str,
        pkce_verifier: &str,
        redirect_uri: &str,
    ) -> ServiceResult<()> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO sso_logins (id, state_hash, binding_hash, team_id, nonce, pkce_verifier, redirect_uri, \
             created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(uuid::Uuid::new_v4().to_string())
        .bind(hash_key(state))
        .bind(hash_key(binding))
        .bind(team_id)
        .bind(nonce)
        .bind(pkce_verifier)
        .bind(redirect_uri)
        .bind(now)
        .bind(now + LOGIN_FOR_MS)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// Takes the sign-in under way with this state, once, and only for the browser that began
    /// it (whose binding cookie came back): a state carried to another browser is refused.
    pub async fn take_sso_login(&self, state: &str, binding: &str) -> ServiceResult<PendingLogin> {
        let now = now_ms();
        let taken = sqlx::query(
            "UPDATE sso_logins SET used_at = $1 WHERE state_hash = $2 AND binding_hash = $3 AND used_at IS NULL \
             AND expires_at > $1",
        )
        .bind(now)
        .bind(hash_key(state))
        .bind(hash_key(binding))
        .execute(self.db.pool())
        .await?;
        if taken.rows_affected() == 0 {
            return Err(login_gone());
        }
        let row =
            sqlx::query("SELECT team_id, nonce, pkce_verifier, redirect_uri FROM sso_logins WHERE state_hash = $1")
                .bind(hash_key(state))
                .fetch_one(self.db.pool())
                .await?;
        Ok(PendingLogin {
            team_id: row.try_get("team_id")?,
            nonce: row.try_get("nonce")?,
            pkce_verifier: row.try_get("pkce_verifier")?,
            redirect_uri: row.try_get("redirect_uri")?,
        })
    }

    /// The team's person the provider vouched for: by subject, else by e-mail (linked to the
    /// subject then), else made now with the team's default role. 409 when the address signs in
    /// to another team. Begins their session.
    pub async fn sso_sign_in(
        &self,
        team_id: &str,
        vouched: &Vouched<'_>,
        default_role: &str,
        client: &Client,
        times: SessionTimes,
    ) -> ServiceResult<(SignedIn, bool)> {
        let email_key = vouched.email.trim().to_lowercase();
        let mut tx = self.db.begin_write().await?;
        self.db.lock_scope(&mut tx, &format!("members:{team_id}")).await?;
        let by_subject = sqlx::query(&format!("SELECT {USER_COLUMNS} FROM users WHERE sso_subject = $1"))
            .bind(vouched.subject)
            .fetch_optional(&mut *tx)
            .await?;
        let (user, created) = match by_subject {
            Some(row) => {
                let user = user_from_row(&row)?;
                if user.team_id != team_id {
                    return Err(ServiceError::conflict("This person signs in to another team"));
                }
                (user, false)
            }
            None => {
                let elsewhere: Option<String> = sqlx::query_scalar(
                    "SELECT team_id FROM users WHERE email_key = $1 AND team_id <> $2 \
                     AND (password_hash IS NOT NULL OR sso_subject IS NOT NULL)",
                )
                .bind(&email_key)
                .bind(team_id)
                .fetch_optional(&mut *tx)
                .await?;
                if elsewhere.is_some() {
                    return Err(ServiceError::conflict("An account with this e-mail address signs in to another team"));
                }
                let here =
                    sqlx::query(&format!("SELECT {USER_COLUMNS} FROM users WHERE email_key = $1 AND team_id = $2"))
                        .bind(&email_key)
                        .bind(team_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                let (user, created) = match here {
                    Some(row) => (user_from_row(&row)?, false),
                    None => {
                        let new = NewUser {
                            first_name: vouched.first_name.to_owned(),
                            last_name: vouched.last_name.to_owned(),
                            email: email_key.clone(),
                            role: default_role.to_owned(),
                        };
                        (insert_user(&mut tx, team_id, &new).await?, true)
                    }
                };
                sqlx::query("UPDATE users SET sso_subject = $1 WHERE id = $2")
                    .bind(vouched.subject)
                    .bind(&user.id)
                    .execute(&mut *tx)
                    .await?;
                (user, created)
            }
        };
        let signed_in = begin_session_with(&mut tx, &user, client, times, "sso").await?;
        tx.commit().await?;
        Ok((signed_in, created))
    }
}

/// The user found by the provider's vouching, for the audit log (`User` of `signed_in`).
pub fn user_of(signed_in: &SignedIn) -> Option<&User> {
    signed_in.session.as_ref().and_then(|session| session.user.as_ref())
}
