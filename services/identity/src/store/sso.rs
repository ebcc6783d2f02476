//! Single sign-on as stored: each team's OpenID Connect provider, the e-mail domains it claims
//! and those it proved (a domain proven by one team is that team's alone), the token it
//! publishes to prove them, the sign-ins and links under way (state, nonce and PKCE verifier,
//! bound to a browser, and for a link to a session), and the people the provider vouches for:
//! found by their subject, or created at their first sign-in; never an existing account found
//! by e-mail, which links itself from its own session. The protocol itself is `crate::sso`.

use sqlx::Row;
use switchboard_kit::apikey::hash_key;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{Client, NewUser, SignedIn, SsoConfig, SsoDomain, User};

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
    /// Set when it links a signed-in person instead of signing someone in.
    pub link: Option<PendingLink>,
}

/// Who began a link: the session (its token's SHA-256) and its person.
pub struct PendingLink {
    pub session_hash: String,
    pub user_id: String,
}

/// How a domain was proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofMethod {
    Dns,
    Https,
}

impl ProofMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dns => "dns",
            Self::Https => "https",
        }
    }
}

/// The name of the TXT record that proves `domain`.
pub fn txt_name(domain: &str) -> String {
    format!("_switchboard-verification.{domain}")
}

/// The value that proves a domain, in the TXT record or the file: the team's token.
pub fn proof_value(token: &str) -> String {
    format!("switchboard-verification={token}")
}

/// Where the file that proves `domain` is.
pub fn https_url(domain: &str) -> String {
    format!("https://{domain}/.well-known/switchboard-verification.txt")
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

/// How the link of a person to a provider's subject was made (`users.sso_link`).
const LINK_CREATED: &str = "created";
const LINK_LINKED: &str = "linked";

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
    /// The team's provider, if it has one, with its claimed domains and their proofs.
    pub async fn sso(&self, team_id: &str) -> ServiceResult<Option<StoredSso>> {
        let row = sqlx::query(
            "SELECT issuer, client_id, client_secret, default_role, enabled, updated_at FROM sso_configs WHERE team_id = $1",
        )
        .bind(team_id)
        .fetch_optional(self.db.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let claims = sqlx::query(
            "SELECT c.domain, d.verified_at, d.method FROM sso_domain_claims c LEFT JOIN sso_domains d \
             ON d.domain = c.domain AND d.team_id = c.team_id AND d.verified_at IS NOT NULL \
             WHERE c.team_id = $1 ORDER BY c.domain",
        )
        .bind(team_id)
        .fetch_all(self.db.pool())
        .await?;
        let token = self.proof_token(team_id).await?;
        let mut domain_status = Vec::with_capacity(claims.len());
        for claim in &claims {
            let domain: String = claim.try_get("domain")?;
            let value = proof_value(&token);
            domain_status.push(SsoDomain {
                txt_name: txt_name(&domain),
                txt_value: value.clone(),
                https_url: https_url(&domain),
                https_content: value,
                verified_at_ms: claim.try_get::<Option<i64>, _>("verified_at")?.unwrap_or(0),
                method: claim.try_get::<Option<String>, _>("method")?.unwrap_or_default(),
                domain,
            });
        }
        let config = SsoConfig {
            team_id: team_id.to_owned(),
            issuer: row.try_get("issuer")?,
            client_id: row.try_get("client_id")?,
            has_client_secret: true,
            domains: domain_status.iter().map(|status| status.domain.clone()).collect(),
            default_role: row.try_get("default_role")?,
            enabled: row.try_get::<i64, _>("enabled")? != 0,
            updated_at_ms: row.try_get("updated_at")?,
            domain_status,
        };
        Ok(Some(StoredSso { config, client_secret: row.try_get("client_secret")? }))
    }

    /// The team's proof token, made at its first use.
    pub async fn proof_token(&self, team_id: &str) -> ServiceResult<String> {
        let read = || async {
            sqlx::query_scalar::<_, String>("SELECT token FROM sso_proof_tokens WHERE team_id = $1")
                .bind(team_id)
                .fetch_optional(self.db.pool())
                .await
        };
        if let Some(token) = read().await? {
            return Ok(token);
        }
        // Two first uses at once: the primary key keeps one, both read it back.
        let inserted = sqlx::query("INSERT INTO sso_proof_tokens (team_id, token, created_at) VALUES ($1, $2, $3)")
            .bind(team_id)
            .bind(super::accounts::new_token())
            .bind(now_ms())
            .execute(self.db.pool())
            .await;
        if let Err(error) = inserted
            && !switchboard_kit::db::is_unique_violation(&error)
        {
            return Err(error.into());
        }
        read().await?.ok_or_else(|| ServiceError::internal(anyhow::anyhow!("the proof token was not kept")))
    }

    /// The team whose provider covers `domain`: it proved the domain and its single sign-on is
    /// switched on.
    pub async fn sso_team_of_domain(&self, domain: &str) -> ServiceResult<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT d.team_id FROM sso_domains d JOIN sso_configs c ON c.team_id = d.team_id \
             JOIN teams t ON t.id = d.team_id WHERE d.domain = $1 AND d.verified_at IS NOT NULL AND c.enabled <> 0 \
             AND t.deleted_at IS NULL",
        )
        .bind(domain)
        .fetch_optional(self.db.pool())
        .await?)
    }

    /// The team that proved `domain`, if one did (whether or not its single sign-on is on).
    async fn prover_of(&self, conn: &mut sqlx::AnyConnection, domain: &str) -> ServiceResult<Option<String>> {
        Ok(sqlx::query_scalar("SELECT team_id FROM sso_domains WHERE domain = $1 AND verified_at IS NOT NULL")
            .bind(domain)
            .fetch_optional(conn)
            .await?)
    }

    /// Sets the team's provider and the domains it claims. 409 when a domain was proven by
    /// another team; a claim of a domain no team proved blocks no one. Domains no longer
    /// claimed lose their proof.
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
            if self.prover_of(&mut tx, domain).await?.is_some_and(|prover| prover != team_id) {
                return Err(ServiceError::conflict(format!("{domain} is proven by another team's single sign-on"))
                    .with_hint("A domain routes to the one team that proved it; that team must remove it first."));
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
        let claimed: Vec<String> = sqlx::query_scalar("SELECT domain FROM sso_domain_claims WHERE team_id = $1")
            .bind(team_id)
            .fetch_all(&mut *tx)
            .await?;
        for dropped in claimed.iter().filter(|domain| !new.domains.contains(domain)) {
            sqlx::query("DELETE FROM sso_domain_claims WHERE team_id = $1 AND domain = $2")
                .bind(team_id)
                .bind(dropped)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM sso_domains WHERE team_id = $1 AND domain = $2")
                .bind(team_id)
                .bind(dropped)
                .execute(&mut *tx)
                .await?;
        }
        for domain in new.domains.iter().filter(|domain| !claimed.contains(domain)) {
            sqlx::query("INSERT INTO sso_domain_claims (team_id, domain, created_at) VALUES ($1, $2, $3)")
                .bind(team_id)
                .bind(domain)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Records that the team proved `domain` (a claim of its own). 404 when it does not claim
    /// it, 409 when another team proved it first.
    pub async fn prove_domain(&self, team_id: &str, domain: &str, method: ProofMethod) -> ServiceResult<SsoDomain> {
        let mut tx = self.db.begin_write().await?;
        self.db.lock_scope(&mut tx, "sso_domains").await?;
        let claimed: Option<String> =
            sqlx::query_scalar("SELECT domain FROM sso_domain_claims WHERE team_id = $1 AND domain = $2")
                .bind(team_id)
                .bind(domain)
                .fetch_optional(&mut *tx)
                .await?;
        if claimed.is_none() {
            return Err(not_claimed(domain));
        }
        if self.prover_of(&mut tx, domain).await?.is_some_and(|prover| prover != team_id) {
            return Err(ServiceError::conflict(format!("{domain} is proven by another team's single sign-on"))
                .with_hint("A domain routes to the one team that proved it; that team must remove it first."));
        }
        // A row without proof (written by the release before, during an upgrade) gives way.
        sqlx::query("DELETE FROM sso_domains WHERE domain = $1").bind(domain).execute(&mut *tx).await?;
        let now = now_ms();
        sqlx::query("INSERT INTO sso_domains (domain, team_id, verified_at, method) VALUES ($1, $2, $3, $4)")
            .bind(domain)
            .bind(team_id)
            .bind(now)
            .bind(method.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        let token = self.proof_token(team_id).await?;
        Ok(SsoDomain {
            domain: domain.to_owned(),
            verified_at_ms: now,
            method: method.as_str().to_owned(),
            txt_name: txt_name(domain),
            txt_value: proof_value(&token),
            https_url: https_url(domain),
            https_content: proof_value(&token),
        })
    }

    /// Removes the team's provider; its people who signed in only through it can no longer.
    pub async fn delete_sso(&self, team_id: &str) -> ServiceResult<()> {
        let mut tx = self.db.begin_write().await?;
        self.db.lock_scope(&mut tx, "sso_domains").await?;
        sqlx::query("DELETE FROM sso_domains WHERE team_id = $1").bind(team_id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM sso_domain_claims WHERE team_id = $1").bind(team_id).execute(&mut *tx).await?;
        let deleted = sqlx::query("DELETE FROM sso_configs WHERE team_id = $1").bind(team_id).execute(&mut *tx).await?;
        if deleted.rows_affected() == 0 {
            return Err(ServiceError::not_found("This team has no single sign-on"));
        }
        tx.commit().await?;
        Ok(())
    }

    /// Keeps a sign-in (or a link, `link`) going to the provider; `state` and `binding` are
    /// kept as SHA-256.
    pub async fn begin_sso_login(
        &self,
        team_id: &str,
        (state, binding): (&str, &str),
        nonce: &str,
        pkce_verifier: &str,
        redirect_uri: &str,
        link: Option<&PendingLink>,
    ) -> ServiceResult<()> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO sso_logins (id, state_hash, binding_hash, team_id, nonce, pkce_verifier, redirect_uri, \
             created_at, expires_at, link_session_hash, link_user_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
             $10, $11)",
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
        .bind(link.map(|link| link.session_hash.as_str()))
        .bind(link.map(|link| link.user_id.as_str()))
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
        let row = sqlx::query(
            "SELECT team_id, nonce, pkce_verifier, redirect_uri, link_session_hash, link_user_id FROM sso_logins \
             WHERE state_hash = $1",
        )
        .bind(hash_key(state))
        .fetch_one(self.db.pool())
        .await?;
        let link = match (row.try_get("link_session_hash")?, row.try_get("link_user_id")?) {
            (Some(session_hash), Some(user_id)) => Some(PendingLink { session_hash, user_id }),
            _ => None,
        };
        Ok(PendingLogin {
            team_id: row.try_get("team_id")?,
            nonce: row.try_get("nonce")?,
            pkce_verifier: row.try_get("pkce_verifier")?,
            redirect_uri: row.try_get("redirect_uri")?,
            link,
        })
    }

    /// The team's person the provider vouched for: by subject, else made now with the team's
    /// default role. An account that exists already (found by e-mail) is never linked here:
    /// its person signs in as they do and links single sign-on from their session. 409 when the
    /// address signs in to another team. Begins their session.
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
        let by_subject =
            sqlx::query(&format!("SELECT {USER_COLUMNS}, sso_link, password_hash FROM users WHERE sso_subject = $1"))
                .bind(vouched.subject)
                .fetch_optional(&mut *tx)
                .await?;
        let (user, created) = match by_subject {
            Some(row) => {
                let user = user_from_row(&row)?;
                if user.team_id != team_id {
                    return Err(ServiceError::conflict("This person signs in to another team"));
                }
                let link: Option<String> = row.try_get("sso_link")?;
                let has_password = row.try_get::<Option<String>, _>("password_hash")?.is_some();
                check_link(&user, link.as_deref(), has_password)?;
                (user, false)
            }
            None => {
                let existing: Option<String> = sqlx::query_scalar(
                    "SELECT team_id FROM users WHERE email_key = $1 \
                     AND (team_id = $2 OR password_hash IS NOT NULL OR sso_subject IS NOT NULL) \
                     ORDER BY CASE WHEN team_id = $2 THEN 0 ELSE 1 END LIMIT 1",
                )
                .bind(&email_key)
                .bind(team_id)
                .fetch_optional(&mut *tx)
                .await?;
                match existing {
                    Some(other) if other != team_id => {
                        return Err(ServiceError::conflict(
                            "An account with this e-mail address signs in to another team",
                        ));
                    }
                    Some(_) => return Err(not_linked()),
                    None => {}
                }
                let new = NewUser {
                    first_name: vouched.first_name.to_owned(),
                    last_name: vouched.last_name.to_owned(),
                    email: email_key.clone(),
                    role: default_role.to_owned(),
                };
                let user = insert_user(&mut tx, team_id, &new).await?;
                sqlx::query("UPDATE users SET sso_subject = $1, sso_link = $2 WHERE id = $3")
                    .bind(vouched.subject)
                    .bind(LINK_CREATED)
                    .bind(&user.id)
                    .execute(&mut *tx)
                    .await?;
                (user, true)
            }
        };
        let signed_in = begin_session_with(&mut tx, &user, client, times, "sso").await?;
        tx.commit().await?;
        Ok((signed_in, created))
    }

    /// Links `user` (whose session began the link) to the provider's subject. 409 when the
    /// subject is another person's.
    pub async fn link_sso(&self, user: &User, subject: &str) -> ServiceResult<()> {
        let mut tx = self.db.begin_write().await?;
        self.db.lock_scope(&mut tx, &format!("members:{}", user.team_id)).await?;
        let holder: Option<String> = sqlx::query_scalar("SELECT id FROM users WHERE sso_subject = $1")
            .bind(subject)
            .fetch_optional(&mut *tx)
            .await?;
        if holder.is_some_and(|holder| holder != user.id) {
            return Err(ServiceError::conflict("This account of the identity provider is linked to another person")
                .with_hint("Sign in to the provider as yourself, or ask an owner to remove the other person."));
        }
        sqlx::query("UPDATE users SET sso_subject = $1, sso_link = $2 WHERE id = $3")
            .bind(subject)
            .bind(LINK_LINKED)
            .bind(&user.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether the user is linked to a provider's subject in a way that signs them in.
    pub async fn sso_linked(&self, user: &User) -> ServiceResult<bool> {
        let row = sqlx::query("SELECT sso_link, password_hash FROM users WHERE id = $1 AND sso_subject IS NOT NULL")
            .bind(&user.id)
            .fetch_optional(self.db.pool())
            .await?;
        let Some(row) = row else { return Ok(false) };
        let link: Option<String> = row.try_get("sso_link")?;
        let has_password = row.try_get::<Option<String>, _>("password_hash")?.is_some();
        Ok(check_link(user, link.as_deref(), has_password).is_ok())
    }
}

/// Whether a link found by subject signs its person in: one they made themselves always; one
/// their first sign-in made, unless they are an owner now (owners sign in through single
/// sign-on only by a link of their own); one the release before made (no `sso_link`), which
/// may have been an existing account found by e-mail, only for people without a password who
/// are not owners (people the release before created at their first sign-in).
fn check_link(user: &User, link: Option<&str>, has_password: bool) -> ServiceResult<()> {
    let owner = user.role == "owner";
    let signs_in = match link {
        Some(LINK_LINKED) => true,
        Some(LINK_CREATED) => !owner,
        _ => !owner && !has_password,
    };
    if signs_in { Ok(()) } else { Err(not_linked()) }
}

fn not_linked() -> ServiceError {
    ServiceError::conflict("This account has not been linked to single sign-on by its person").with_hint(
        "Sign in as you usually do (password, passkey), then choose \"Link single sign-on\" under Settings → \
             Security (POST /v1/auth/sso/link).",
    )
}

fn not_claimed(domain: &str) -> ServiceError {
    ServiceError::not_found(format!("The team's single sign-on does not claim {domain}"))
        .with_hint("Add it to the domains of PUT /v1/members/sso first.")
}

/// The user found by the provider's vouching, for the audit log (`User` of `signed_in`).
pub fn user_of(signed_in: &SignedIn) -> Option<&User> {
    signed_in.session.as_ref().and_then(|session| session.user.as_ref())
}
