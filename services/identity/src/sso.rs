//! Single sign-on with OpenID Connect (authorization code flow with PKCE), per team: an owner
//! names the team's provider (issuer, client id and secret) and the e-mail domains it covers.
//! A person starts with their e-mail; the team whose provider covers its domain sends them
//! there, with a state, a nonce and a PKCE challenge kept here and bound to their browser.
//! Back with a code, the code is exchanged for an ID token whose signature (the provider's
//! published keys), issuer, audience, expiry and nonce are checked (`openidconnect`), and whose
//! verified e-mail must be in a covered domain. The person is found, or created with the team's
//! default role, and a session begins.
//!
//! The provider is reached over HTTP from this service: its address must be public unless
//! `SWITCHBOARD_SSO_ALLOW_PRIVATE=true` (tests, and providers inside the cluster), and
//! redirects are not followed, so that an owner cannot aim it at the internal network.

use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, Scope, TokenResponse,
};
use switchboard_api::role::Role;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::{FinishSsoRequest, SetSsoConfigRequest, SignedIn, SsoConfig, SsoStart, StartSsoRequest};

use crate::grpc::accounts::{AccountsApi, user_actor};
use crate::store::members::is_owner;
use crate::store::sso::{NewSso, Vouched};

const MAX_DOMAINS: usize = 20;

/// How the service reaches providers.
#[derive(Clone)]
pub struct SsoHttp {
    client: openidconnect::reqwest::Client,
    allow_private: bool,
}

impl SsoHttp {
    pub fn from_env() -> anyhow::Result<Self> {
        let allow_private =
            std::env::var("SWITCHBOARD_SSO_ALLOW_PRIVATE").is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
        let client = openidconnect::reqwest::ClientBuilder::new()
            // Following redirects would let a provider send this service anywhere (SSRF).
            .redirect(openidconnect::reqwest::redirect::Policy::none())
            .timeout(std::time::Duration::from_secs(10))
            .build()?;
        Ok(Self { client, allow_private })
    }

    /// The provider's metadata, after checking where the issuer points.
    async fn discover(&self, issuer: &str) -> ServiceResult<CoreProviderMetadata> {
        self.check_reachable(issuer).await?;
        let issuer = IssuerUrl::new(issuer.to_owned()).map_err(|_| provider_failed("its issuer is not a URL"))?;
        CoreProviderMetadata::discover_async(issuer, &self.client)
            .await
            .map_err(|error| provider_failed(&format!("discovery failed: {error}")))
    }

    async fn check_reachable(&self, url: &str) -> ServiceResult<()> {
        if self.allow_private {
            return Ok(());
        }
        let parsed = url::Url::parse(url).map_err(|_| provider_failed("its issuer is not a URL"))?;
        let host = parsed.host_str().ok_or_else(|| provider_failed("its issuer has no host"))?;
        let private = || provider_failed("its issuer is a private, loopback or link-local address");
        switchboard_kit::egress::check_host(host).map_err(|_| private())?;
        let port = parsed.port_or_known_default().unwrap_or(443);
        if let Ok(found) = tokio::net::lookup_host((host, port)).await {
            let found: Vec<_> = found.collect();
            if !found.is_empty() && found.iter().all(|address| !switchboard_kit::egress::is_public(address.ip())) {
                return Err(private());
            }
        }
        Ok(())
    }
}

fn provider_failed(reason: &str) -> ServiceError {
    ServiceError::new(ErrorKind::Unavailable, "The team's identity provider could not be used")
        .with_hint(format!("Its owner can check the single sign-on settings: {reason}."))
}

fn refused(message: &str) -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, message.to_owned())
}

fn not_covered() -> ServiceError {
    ServiceError::not_found("No single sign-on covers this e-mail address")
        .with_hint("Sign in with your password, or ask your team's owner which address to use.")
}

/// The lower-case domain of an e-mail address.
fn domain_of(email: &str) -> Option<String> {
    let (local, domain) = email.trim().rsplit_once('@')?;
    (!local.is_empty() && domain.contains('.')).then(|| domain.to_lowercase())
}

/// Checked, lower-case, distinct domains.
fn checked_domains(domains: &[String]) -> ServiceResult<Vec<String>> {
    let mut checked: Vec<String> = Vec::new();
    let mut violations = Vec::new();
    if domains.is_empty() || domains.len() > MAX_DOMAINS {
        violations
            .push(switchboard_kit::FieldViolation::new("domains", format!("must name 1 to {MAX_DOMAINS} domains")));
    }
    for (index, domain) in domains.iter().enumerate() {
        let domain = domain.trim().to_lowercase();
        let valid = domain.len() <= 253
            && domain.contains('.')
            && domain.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        if !valid {
            violations.push(switchboard_kit::FieldViolation::new(format!("domains[{index}]"), "must be a domain name"));
        } else if !checked.contains(&domain) {
            checked.push(domain);
        }
    }
    switchboard_kit::validate(violations.into_iter().map(Some))?;
    Ok(checked)
}

impl AccountsApi {
    pub(crate) async fn set_sso(&self, request: SetSsoConfigRequest) -> ServiceResult<SsoConfig> {
        if !is_owner(&request.caller_role) {
            return Err(ServiceError::forbidden("Only an owner changes the team's single sign-on"));
        }
        let domains = checked_domains(&request.domains);
        let mut violations = Vec::new();
        let issuer = url::Url::parse(request.issuer.trim());
        if !issuer.as_ref().is_ok_and(|url| matches!(url.scheme(), "https" | "http") && url.host_str().is_some()) {
            violations.push(switchboard_kit::FieldViolation::new("issuer", "must be an http(s) URL"));
        }
        // Owners are made by owners, one at a time, never at a first sign-in.
        if Role::parse(&request.default_role).is_none_or(|role| role == Role::Owner) {
            violations.push(switchboard_kit::FieldViolation::new("defaultRole", "must be admin, member or viewer"));
        }
        if let Err(error) = &domains {
            violations.extend(error.details.iter().cloned());
        }
        switchboard_kit::validate(violations.into_iter().map(Some))?;
        let domains = domains?;
        let issuer = request.issuer.trim().trim_end_matches('/').to_owned();
        // A provider that cannot be discovered now is refused now, not at someone's sign-in.
        self.sso_http.discover(&issuer).await?;
        let new = NewSso {
            issuer: &issuer,
            client_id: request.client_id.trim(),
            client_secret: request.client_secret.as_deref(),
            domains: &domains,
            default_role: &request.default_role,
            enabled: request.enabled,
        };
        self.store.set_sso(&request.team_id, &new).await?;
        let stored = self.store.sso(&request.team_id).await?;
        stored.map(|stored| stored.config).ok_or_else(|| ServiceError::not_found("This team has no single sign-on"))
    }

    pub(crate) async fn start_sso(&self, request: StartSsoRequest) -> ServiceResult<SsoStart> {
        let domain = domain_of(&request.email).ok_or_else(not_covered)?;
        let team_id = self.store.sso_team_of_domain(&domain).await?.ok_or_else(not_covered)?;
        let stored = self.store.sso(&team_id).await?.ok_or_else(not_covered)?;
        let metadata = self.sso_http.discover(&stored.config.issuer).await?;
        let redirect = RedirectUrl::new(request.redirect_uri.clone())
            .map_err(|_| ServiceError::invalid_field("redirectUri", "must be a URL"))?;
        let client = CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(stored.config.client_id.clone()),
            Some(ClientSecret::new(stored.client_secret.clone())),
        )
        .set_redirect_uri(redirect);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = client
            .authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random)
            .add_scope(Scope::new("email".to_owned()))
            .add_scope(Scope::new("profile".to_owned()))
            .set_pkce_challenge(challenge)
            .add_extra_param("login_hint", request.email.trim())
            .url();
        let binding = crate::store::accounts::new_token();
        self.store
            .begin_sso_login(
                &team_id,
                (state.secret(), &binding),
                nonce.secret(),
                verifier.secret(),
                &request.redirect_uri,
            )
            .await?;
        Ok(SsoStart { authorization_url: url.to_string(), binding })
    }

    pub(crate) async fn finish_sso(&self, request: FinishSsoRequest) -> ServiceResult<SignedIn> {
        let login = self.store.take_sso_login(&request.state, &request.binding).await?;
        let stored = self.store.sso(&login.team_id).await?.filter(|stored| stored.config.enabled);
        let stored = stored.ok_or_else(|| refused("This team's single sign-on is switched off"))?;
        let metadata = self.sso_http.discover(&stored.config.issuer).await?;
        let redirect = RedirectUrl::new(login.redirect_uri.clone()).map_err(|_| refused("Invalid redirect"))?;
        let client = CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(stored.config.client_id.clone()),
            Some(ClientSecret::new(stored.client_secret.clone())),
        )
        .set_redirect_uri(redirect);
        let exchange = client
            .exchange_code(AuthorizationCode::new(request.code.clone()))
            .map_err(|error| provider_failed(&format!("it has no token endpoint: {error}")))?;
        let tokens = exchange
            .set_pkce_verifier(PkceCodeVerifier::new(login.pkce_verifier.clone()))
            .request_async(&self.sso_http.client)
            .await
            .map_err(|error| refused(&format!("The identity provider refused the sign-in: {error}")))?;
        let id_token = tokens.id_token().ok_or_else(|| refused("The identity provider sent no ID token"))?;
        let client_info = request.client.clone().unwrap_or_default();
        let claims = match id_token.claims(&client.id_token_verifier(), &Nonce::new(login.nonce.clone())) {
            Ok(claims) => claims,
            Err(error) => {
                tracing::warn!(team = %login.team_id, %error, "an ID token was refused");
                return Err(refused("The identity provider's answer could not be verified")
                    .with_hint("Its signature, issuer, audience, expiry or nonce is wrong; sign in again."));
            }
        };
        let email = claims.email().map(|email| email.as_str().to_owned()).unwrap_or_default();
        if claims.email_verified() != Some(true) || email.is_empty() {
            return Err(refused("The identity provider did not vouch for an e-mail address"));
        }
        let covered = domain_of(&email).is_some_and(|domain| stored.config.domains.contains(&domain));
        if !covered {
            return Err(refused("This e-mail address is not in a domain the team's single sign-on covers"));
        }
        let local = email.split('@').next().unwrap_or("").chars().take(50).collect::<String>();
        let given = claims.given_name().and_then(|names| names.get(None)).map(|name| name.as_str().to_owned());
        let family = claims.family_name().and_then(|names| names.get(None)).map(|name| name.as_str().to_owned());
        let subject = format!("{}|{}", stored.config.issuer, claims.subject().as_str());
        let first_name = given.filter(|name| !name.trim().is_empty()).unwrap_or(local);
        let last_name = family.filter(|name| !name.trim().is_empty()).unwrap_or_else(|| "-".to_owned());
        let vouched = Vouched { subject: &subject, email: &email, first_name: &first_name, last_name: &last_name };
        let (signed_in, created) = self
            .store
            .sso_sign_in(&login.team_id, &vouched, &stored.config.default_role, &client_info, self.settings.sessions)
            .await?;
        if let Some(user) = crate::store::sso::user_of(&signed_in)
            && created
        {
            let actor = user_actor(user);
            self.audit(&user.team_id, "member.joined", actor, &user.email, Some(&client_info)).await;
        }
        self.audit_signed_in("auth.signed_in_sso", &signed_in, Some(&client_info)).await;
        Ok(signed_in)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_checked_lowered_and_deduplicated() {
        let domains = checked_domains(&["Acme.example".into(), "acme.example".into(), "eu.acme.example".into()]);
        assert_eq!(domains.unwrap(), ["acme.example", "eu.acme.example"]);
        assert!(checked_domains(&[]).is_err());
        assert!(checked_domains(&["not a domain".into()]).is_err());
        assert!(checked_domains(&["-acme.example".into()]).is_err());
        assert_eq!(domain_of("Ada@Acme.Example").as_deref(), Some("acme.example"));
        assert_eq!(domain_of("nobody"), None);
    }
}
