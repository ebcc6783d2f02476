//! Single sign-on with OpenID Connect (authorization code flow with PKCE), per team: an owner
//! names the team's provider (issuer, client id and secret) and the e-mail domains it claims,
//! and proves each domain (`crate::domain_proof`: a DNS TXT record or an HTTPS file holding the
//! team's token). Only proven domains count: a person starts with their e-mail; the team that
//! proved its domain sends them to its provider, with a state, a nonce and a PKCE challenge
//! kept here and bound to their browser. Back with a code, the code is exchanged for an ID
//! token whose signature (the provider's published keys), issuer, audience, expiry and nonce
//! are checked (`openidconnect`), and whose verified e-mail must be in a domain the team
//! proved. The person is found by the provider's subject, or created with the team's default
//! role (member or viewer), and a session begins.
//!
//! An account that exists already is never linked by its e-mail: the team's provider is its
//! owner's to configure, and would otherwise sign them in as anyone of the team. Its person
//! links it from a session of their own (`start_sso_link`), through the same callback, and the
//! provider must vouch for their own address. An owner signs in through single sign-on only by
//! a link they made that way.
//!
//! Every request to a provider goes through [`SsoHttp`] (`crate::sso_http`).

use openidconnect::core::{CoreAuthPrompt, CoreAuthenticationFlow, CoreClient};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl,
    RequestTokenError, Scope, TokenResponse,
};
use switchboard_api::role::Role;
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::{
    FinishSsoRequest, SetSsoConfigRequest, SignedIn, SsoConfig, SsoDomain, SsoLinkStatus, SsoStart,
    StartSsoLinkRequest, StartSsoRequest, User, VerifySsoDomainRequest,
};

use crate::grpc::accounts::{AccountsApi, user_actor};
pub use crate::sso_http::SsoHttp;
use crate::sso_http::{causes, provider_failed};
use crate::store::members::is_owner;
use crate::store::sso::{NewSso, PendingLink, StoredSso, Vouched};

const MAX_DOMAINS: usize = 20;

/// Mail services where anyone gets an address: no team proves one, and none may claim one.
const PUBLIC_MAIL_DOMAINS: &[&str] = &[
    "gmail.com",
    "googlemail.com",
    "outlook.com",
    "outlook.fr",
    "hotmail.com",
    "hotmail.co.uk",
    "hotmail.fr",
    "live.com",
    "live.co.uk",
    "msn.com",
    "yahoo.com",
    "yahoo.co.uk",
    "yahoo.fr",
    "yahoo.de",
    "ymail.com",
    "rocketmail.com",
    "icloud.com",
    "me.com",
    "mac.com",
    "aol.com",
    "aim.com",
    "proton.me",
    "protonmail.com",
    "pm.me",
    "gmx.com",
    "gmx.de",
    "gmx.net",
    "web.de",
    "t-online.de",
    "mail.com",
    "mail.ru",
    "yandex.ru",
    "yandex.com",
    "qq.com",
    "163.com",
    "126.com",
    "naver.com",
    "zoho.com",
    "fastmail.com",
    "hey.com",
    "tutanota.com",
    "tuta.io",
    "mailbox.org",
    "posteo.de",
    "orange.fr",
    "free.fr",
    "rediffmail.com",
];

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

/// What is wrong with `domain` (lower case) as a domain a team's single sign-on covers.
fn domain_problem(domain: &str) -> Option<String> {
    let labels_valid = domain.len() <= 253
        && domain.contains('.')
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
        // A name ends in a name: `10.0.0.1` is an address.
        && domain.rsplit('.').next().is_some_and(|tld| tld.bytes().any(|b| b.is_ascii_alphabetic()));
    if !labels_valid {
        return Some("must be a domain name".to_owned());
    }
    if PUBLIC_MAIL_DOMAINS.contains(&domain) {
        return Some(format!("{domain} is a public mail service: anyone can have an address there"));
    }
    None
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
        let domain = domain.trim().trim_end_matches('.').to_lowercase();
        if let Some(problem) = domain_problem(&domain) {
            violations.push(switchboard_kit::FieldViolation::new(format!("domains[{index}]"), problem));
        } else if !checked.contains(&domain) {
            checked.push(domain);
        }
    }
    switchboard_kit::validate(violations.into_iter().map(Some))?;
    Ok(checked)
}

/// The role of people new through single sign-on: member or viewer. A stored admin (allowed
/// by the release before) makes members.
fn new_person_role(stored: &str) -> &'static str {
    match Role::parse(stored) {
        Some(Role::Viewer) => "viewer",
        _ => "member",
    }
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
        // Admins and owners are made by people who are, one at a time, never at a first
        // sign-in through a provider an owner configures.
        if !matches!(Role::parse(&request.default_role), Some(Role::Member | Role::Viewer)) {
            violations.push(switchboard_kit::FieldViolation::new("defaultRole", "must be member or viewer"));
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

    /// Checks a claimed domain's proof now; records it when it holds.
    pub(crate) async fn verify_sso_domain(&self, request: VerifySsoDomainRequest) -> ServiceResult<SsoDomain> {
        if !is_owner(&request.caller_role) {
            return Err(ServiceError::forbidden("Only an owner changes the team's single sign-on"));
        }
        let domain = request.domain.trim().trim_end_matches('.').to_lowercase();
        if let Some(problem) = domain_problem(&domain) {
            return Err(ServiceError::invalid_field("domain", problem));
        }
        let stored = self.store.sso(&request.team_id).await?;
        let stored = stored.ok_or_else(|| ServiceError::not_found("This team has no single sign-on"))?;
        if !stored.config.domains.contains(&domain) {
            return Err(ServiceError::not_found(format!("The team's single sign-on does not claim {domain}"))
                .with_hint("Add it to the domains of PUT /v1/members/sso first."));
        }
        let token = self.store.proof_token(&request.team_id).await?;
        let method = match self.sso_http.proofs.check(&domain, &token).await {
            Ok(method) => method,
            Err(not_proven) => {
                let found = not_proven.reasons.join("; ");
                let error = if not_proven.dns_failed {
                    ServiceError::new(ErrorKind::Unavailable, format!("{domain} could not be checked now"))
                } else {
                    ServiceError::new(ErrorKind::Unprocessable, format!("{domain} is not proven yet"))
                };
                return Err(error.with_hint(format!(
                    "Publish the TXT record or the file shown for it, then check again. Found: {found}."
                )));
            }
        };
        self.store.prove_domain(&request.team_id, &domain, method).await
    }

    pub(crate) async fn start_sso(&self, request: StartSsoRequest) -> ServiceResult<SsoStart> {
        let domain = domain_of(&request.email).ok_or_else(not_covered)?;
        let team_id = self.store.sso_team_of_domain(&domain).await?.ok_or_else(not_covered)?;
        let stored = self.store.sso(&team_id).await?.ok_or_else(not_covered)?;
        self.authorize(&team_id, &stored, request.email.trim(), &request.redirect_uri, None).await
    }

    /// Whether the person of a session can link single sign-on, and has.
    pub(crate) async fn sso_link_status(&self, token_hash: &str) -> ServiceResult<SsoLinkStatus> {
        let user = self.user_of_session(token_hash).await?;
        let linked = self.store.sso_linked(&user).await?;
        let domain = domain_of(&user.email).unwrap_or_default();
        let covered = self.store.sso_team_of_domain(&domain).await?.is_some_and(|team| team == user.team_id);
        let issuer = match covered {
            true => self.store.sso(&user.team_id).await?.map(|stored| stored.config.issuer).unwrap_or_default(),
            false => String::new(),
        };
        Ok(SsoLinkStatus { available: covered, linked, domain, issuer })
    }

    /// A link of the session's person to their account at their team's provider, begun.
    pub(crate) async fn start_sso_link(&self, request: StartSsoLinkRequest) -> ServiceResult<SsoStart> {
        let user = self.user_of_session(&request.token_hash).await?;
        let uncovered = || {
            ServiceError::not_found("Your team's single sign-on does not cover your e-mail address").with_hint(
                "An owner of the team sets it up, and proves your address's domain, under Settings → Security.",
            )
        };
        let domain = domain_of(&user.email).ok_or_else(uncovered)?;
        let team_id = self.store.sso_team_of_domain(&domain).await?.filter(|team| *team == user.team_id);
        let team_id = team_id.ok_or_else(uncovered)?;
        let stored = self.store.sso(&team_id).await?.ok_or_else(uncovered)?;
        let link = PendingLink { session_hash: request.token_hash.clone(), user_id: user.id.clone() };
        self.authorize(&team_id, &stored, &user.email, &request.redirect_uri, Some(&link)).await
    }

    /// The provider's authorization URL for a sign-in or a link, kept to be finished once.
    async fn authorize(
        &self,
        team_id: &str,
        stored: &StoredSso,
        email: &str,
        redirect_uri: &str,
        link: Option<&PendingLink>,
    ) -> ServiceResult<SsoStart> {
        let metadata = self.sso_http.discover(&stored.config.issuer).await?;
        let redirect = RedirectUrl::new(redirect_uri.to_owned())
            .map_err(|_| ServiceError::invalid_field("redirectUri", "must be a URL"))?;
        let client = CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(stored.config.client_id.clone()),
            Some(ClientSecret::new(stored.client_secret.clone())),
        )
        .set_redirect_uri(redirect);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut authorize = client
            .authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random)
            .add_scope(Scope::new("email".to_owned()))
            .add_scope(Scope::new("profile".to_owned()))
            .set_pkce_challenge(challenge)
            .add_extra_param("login_hint", email);
        if link.is_some() {
            // A link asks the person to sign in at the provider now, not to reuse a session
            // someone else may have left there.
            authorize = authorize.add_prompt(CoreAuthPrompt::Login);
        }
        let (url, state, nonce) = authorize.url();
        let binding = crate::store::accounts::new_token();
        self.store
            .begin_sso_login(team_id, (state.secret(), &binding), nonce.secret(), verifier.secret(), redirect_uri, link)
            .await?;
        Ok(SsoStart { authorization_url: url.to_string(), binding })
    }

    pub(crate) async fn finish_sso(&self, request: FinishSsoRequest) -> ServiceResult<SignedIn> {
        let login = self.store.take_sso_login(&request.state, &request.binding).await?;
        // A link finishes only in the session that began it, still live, of the same person.
        let linking = match &login.link {
            Some(link) => {
                if request.session_token_hash.is_empty() || request.session_token_hash != link.session_hash {
                    return Err(refused("This link of single sign-on began in another session")
                        .with_hint("Sign in and start the link again from Settings → Security."));
                }
                let user = self.user_of_session(&link.session_hash).await?;
                if user.id != link.user_id {
                    return Err(refused("This link of single sign-on began for another person"));
                }
                Some(user)
            }
            None => None,
        };
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
            .request_async(&self.sso_http)
            .await;
        let tokens = tokens.map_err(|error| match error {
            // The request itself failed (an address refused, no answer): the provider's fault.
            RequestTokenError::Request(error) => provider_failed(&format!("its token endpoint failed: {error}")),
            other => refused(&format!("The identity provider refused the sign-in: {}", causes(&other))),
        })?;
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
        let email = claims.email().map(|email| email.as_str().trim().to_owned()).unwrap_or_default();
        if claims.email_verified() != Some(true) || email.is_empty() {
            return Err(refused("The identity provider did not vouch for an e-mail address"));
        }
        let domain = domain_of(&email).unwrap_or_default();
        let covered = self.store.sso_team_of_domain(&domain).await?.is_some_and(|team| team == login.team_id);
        if !covered {
            return Err(refused("This e-mail address is not in a domain the team's single sign-on covers"));
        }
        let subject = format!("{}|{}", stored.config.issuer, claims.subject().as_str());
        if let Some(user) = linking {
            return self.finish_link(&user, &email, &subject, &request.session_token_hash, &client_info).await;
        }
        let local = email.split('@').next().unwrap_or("").chars().take(50).collect::<String>();
        let given = claims.given_name().and_then(|names| names.get(None)).map(|name| name.as_str().to_owned());
        let family = claims.family_name().and_then(|names| names.get(None)).map(|name| name.as_str().to_owned());
        let first_name = given.filter(|name| !name.trim().is_empty()).unwrap_or(local);
        let last_name = family.filter(|name| !name.trim().is_empty()).unwrap_or_else(|| "-".to_owned());
        let vouched = Vouched { subject: &subject, email: &email, first_name: &first_name, last_name: &last_name };
        let role = new_person_role(&stored.config.default_role);
        let (signed_in, created) =
            self.store.sso_sign_in(&login.team_id, &vouched, role, &client_info, self.settings.sessions).await?;
        if let Some(user) = crate::store::sso::user_of(&signed_in)
            && created
        {
            let actor = user_actor(user);
            self.audit(&user.team_id, AuditAction::MemberJoined, actor, &user.email, Some(&client_info)).await;
        }
        self.audit_signed_in(AuditAction::AuthSignedInSso, &signed_in, Some(&client_info)).await;
        Ok(signed_in)
    }

    /// Links the person of the session that began the link, when the provider vouched for
    /// their own address; answers that session (no new one: `token` is empty).
    async fn finish_link(
        &self,
        user: &User,
        vouched_email: &str,
        subject: &str,
        session_hash: &str,
        client: &switchboard_proto::v1::Client,
    ) -> ServiceResult<SignedIn> {
        if !vouched_email.eq_ignore_ascii_case(user.email.trim()) {
            return Err(refused(&format!(
                "The identity provider vouched for {vouched_email}, not for your address {}",
                user.email
            ))
            .with_hint("Sign in to the provider with your own account, then link again."));
        }
        self.store.link_sso(user, subject).await?;
        self.audit(&user.team_id, AuditAction::AuthSsoLinked, user_actor(user), &user.email, Some(client)).await;
        let session = self.store.session(session_hash, self.settings.sessions).await?;
        Ok(SignedIn { token: String::new(), session: Some(session), ..SignedIn::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_checked_lowered_and_deduplicated() {
        let domains = checked_domains(&["Acme.example".into(), "acme.example.".into(), "eu.acme.example".into()]);
        assert_eq!(domains.unwrap(), ["acme.example", "eu.acme.example"]);
        assert!(checked_domains(&[]).is_err());
        assert!(checked_domains(&["not a domain".into()]).is_err());
        assert!(checked_domains(&["-acme.example".into()]).is_err());
        assert!(checked_domains(&["10.0.0.1".into()]).is_err());
        assert_eq!(domain_of("Ada@Acme.Example").as_deref(), Some("acme.example"));
        assert_eq!(domain_of("nobody"), None);
    }

    #[test]
    fn public_mail_domains_are_refused_with_a_field_error() {
        for public in ["gmail.com", "GMAIL.com", "outlook.com", "proton.me", "163.com", "web.de"] {
            let error = checked_domains(&["acme.example".into(), public.into()]).unwrap_err();
            assert_eq!(error.kind, ErrorKind::Validation, "{public}");
            assert_eq!(error.details[0].field, "domains[1]", "{public}");
            assert!(error.details[0].message.contains("public mail service"), "{public}: {error:?}");
        }
        assert!(checked_domains(&["mail.acme.example".into()]).is_ok());
    }

    #[test]
    fn people_new_through_sso_are_members_or_viewers_whatever_was_stored() {
        assert_eq!(new_person_role("viewer"), "viewer");
        assert_eq!(new_person_role("member"), "member");
        assert_eq!(new_person_role("admin"), "member");
        assert_eq!(new_person_role("owner"), "member");
        assert_eq!(new_person_role("anything"), "member");
    }
}
