//! Single sign-on with OpenID Connect (identity service, `AccountService`): a team's owner
//! sets its provider at `/members/sso` and proves each e-mail domain it claims
//! (`/members/sso/domains/{domain}/verify`: a DNS TXT record or an HTTPS file); a person signs
//! in with `/auth/sso/start` (their e-mail picks the team that proved its domain) and, back
//! from the provider at the portal's `/sso/callback`, `/auth/sso/finish`. A person whose
//! account exists links it from their own session (`/auth/sso/link`), finishing through the
//! same callback. The sign-in is bound to the browser that started it by a cookie of its own
//! (`switchboard_sso`), so a callback link carried to another browser signs no one in; a link
//! is bound to the session that started it too.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use switchboard_api::accounts::SessionView;
use switchboard_api::time::Timestamp;
use switchboard_kit::apikey::hash_key;
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{
    FinishSsoRequest, SessionTokenRequest, SetSsoConfigRequest, SsoConfig, SsoConfigRequest, SsoDomain,
    StartSsoLinkRequest, StartSsoRequest, VerifySsoDomainRequest,
};

use super::groups::{AUTH, MEMBERS};
use super::signed_in::{begun, data};
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::{Data, Endpoint, Input, Json, Nothing, Updated, WithCookie};
use crate::sessions;

const NO_SSO: &str = "This team has no single sign-on.";
const NOT_SIGNED_IN: &str = "Not signed in (a session, not an API key), or the session has ended.";
const OWNERS: &str = "Only an owner changes the team's single sign-on.";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/members/sso", get)
            .doc("getSso", MEMBERS, "The team's single sign-on (OpenID Connect); never its client secret")
            .for_admins()
            .class(RateClass::Write)
            .gives("domain", "/data/domains/0")
            .fails(404, NO_SSO),
        Endpoint::put("/v1/members/sso", set)
            .doc("setSso", MEMBERS, "Set the team's OpenID Connect provider and the e-mail domains it claims")
            .about(
                "Owners only. The provider is discovered at once (`{issuer}/.well-known/openid-configuration`): \
                 one that cannot be is refused (503). Its client must allow the redirect URI \
                 `{public URL}/sso/callback`, the authorization code flow with PKCE, and the scopes openid, email \
                 and profile. A domain counts only once the team proves it (POST \
                 /v1/members/sso/domains/{domain}/verify, with the TXT record or file of `domainStatus`); then a \
                 person whose verified e-mail is in it signs in through the provider, and one the team does not \
                 have yet is created with `defaultRole` (member when left out; member or viewer). Public mail \
                 domains (gmail.com, outlook.com, ...) are refused (400). A domain another team proved is 409; \
                 a claim no team proved blocks no one. `clientSecret` left out keeps the stored one.",
            )
            .for_admins()
            .audited(AuditAction::TeamSsoChanged)
            .gives("domain", "/data/domains/0")
            .fails(
                400,
                "A domain is not a domain name or is a public mail service, or defaultRole is not member or viewer.",
            )
            .fails(403, OWNERS)
            .fails(409, "A domain is proven by another team's single sign-on."),
        Endpoint::post("/v1/members/sso/domains/{domain}/verify", verify)
            .doc("verifySsoDomain", MEMBERS, "Check now that the team controls a domain its single sign-on claims")
            .about(
                "Owners only. Proven by a TXT record `_switchboard-verification.{domain}` whose value is the \
                 domain's `txtRecord.value`, or by `https://{domain}/.well-known/switchboard-verification.txt` \
                 holding `httpsFile.content` (answered 200, no redirect). From then on the domain routes sign-ins \
                 to this team's provider, and no other team can claim it.",
            )
            .for_admins()
            .audited(AuditAction::TeamSsoDomainVerified)
            .fails(400, "Not a domain name, or a public mail service.")
            .fails(403, OWNERS)
            .fails(404, "The team has no single sign-on, or it does not claim this domain.")
            .fails(409, "Another team proved this domain first.")
            .fails(422, "Neither the TXT record nor the file holds the team's value (the hint says what was found).")
            .fails(503, "The DNS server could not be asked, and the file did not prove the domain."),
        Endpoint::delete("/v1/members/sso", delete)
            .doc("deleteSso", MEMBERS, "Remove the team's single sign-on")
            .about(
                "People who only ever signed in through it can no longer sign in (an owner can reset their password).",
            )
            .for_admins()
            .audited(AuditAction::TeamSsoRemoved)
            .fails(403, OWNERS)
            .fails(404, NO_SSO),
        Endpoint::post("/v1/auth/sso/start", start)
            .in_session_flow()
            .doc("startSso", AUTH, "Start a single sign-on: the URL of the identity provider of the e-mail's team")
            .about(
                "Send the browser to `url`; the provider sends it back to the portal's `/sso/callback`, which \
                 calls POST /v1/auth/sso/finish. Sets the cookie `switchboard_sso` that binds the sign-in to this \
                 browser (10 minutes).",
            )
            .for_visitors()
            .fails(404, "No single sign-on covers this e-mail address.")
            .fails(503, "The team's identity provider could not be reached or discovered."),
        Endpoint::post("/v1/auth/sso/finish", finish)
            .in_session_flow()
            .doc("finishSso", AUTH, "Finish a single sign-on with the provider's code; begins a session (cookie)")
            .about(
                "The ID token must be signed by the provider's published keys and name it as issuer, this client \
                 as audience and the sign-in's nonce, and vouch for a verified e-mail in a domain the team proved. \
                 A person the team does not have yet is created (`member.joined`). An account that exists but \
                 never linked single sign-on is not signed in (409): its person links it from their session \
                 (POST /v1/auth/sso/link). For a link, the answer is the current session, and the provider must \
                 vouch for the person's own address.",
            )
            .for_visitors()
            .fails(
                401,
                "The sign-in expired, was used, began in another browser (or, for a link, another session), or the \
                 provider's answer failed a check.",
            )
            .fails(
                409,
                "The e-mail address signs in to another team, or its account has not been linked to single sign-on.",
            )
            .fails(503, "The team's identity provider could not be reached, or one of its addresses is private."),
        Endpoint::get("/v1/auth/sso/link", link_status)
            .in_session_flow()
            .doc("getSsoLink", AUTH, "Whether the signed-in person can link single sign-on, and has")
            .about("`available` when their team's single sign-on is on and covers their address's (proven) domain.")
            .for_own_account()
            .fails(401, NOT_SIGNED_IN),
        Endpoint::post("/v1/auth/sso/link", link)
            .in_session_flow()
            .doc("linkSso", AUTH, "Start linking the signed-in person to their account at the team's provider")
            .about(
                "Answers the provider's URL like POST /v1/auth/sso/start, and sets the same browser cookie; the \
                 link is bound to this session too. Back at the portal's `/sso/callback`, POST /v1/auth/sso/finish \
                 links the person when the provider vouches for their own e-mail address; from then on they can \
                 sign in through it. An owner signs in through single sign-on only after linking it this way. A \
                 new way to sign in is a change to how the person proves who they are: it needs a recent sign-in.",
            )
            .for_recent_sign_in()
            .fails(401, NOT_SIGNED_IN)
            .fails(404, "The team's single sign-on does not cover the person's e-mail address.")
            .fails(503, "The team's identity provider could not be reached or discovered."),
    ]
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetSso {
    /// The provider's issuer URL, e.g. `https://login.acme.example`.
    #[schemars(length(min = 1, max = limits::URL.max))]
    pub issuer: String,
    #[schemars(length(min = 1, max = 256))]
    pub client_id: String,
    /// Write only: answers never show it. Left out, the stored one is kept.
    #[schemars(length(min = 1, max = 512))]
    pub client_secret: Option<String>,
    /// The e-mail domains it covers, e.g. `acme.example` (1 to 20).
    #[schemars(length(min = 1, max = 20))]
    pub domains: Vec<String>,
    /// `member` (when left out) or `viewer`: the role of people created at sign-in.
    pub default_role: Option<String>,
    /// Off keeps the settings but signs no one in (on when left out).
    pub enabled: Option<bool>,
}

/// A team's single sign-on.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SsoView {
    pub issuer: String,
    pub client_id: String,
    /// A secret is stored (it is never shown).
    pub has_client_secret: bool,
    /// Every domain claimed, proven or not (see `domainStatus`).
    pub domains: Vec<String>,
    /// Each claimed domain, whether it is proven, and how to prove it.
    pub domain_status: Vec<SsoDomainView>,
    pub default_role: String,
    pub enabled: bool,
    /// The redirect URI to register at the provider.
    pub redirect_uri: String,
    pub updated_at: Timestamp,
}

impl SsoView {
    fn new(config: &SsoConfig, public_base: &str) -> Self {
        Self {
            issuer: config.issuer.clone(),
            client_id: config.client_id.clone(),
            has_client_secret: config.has_client_secret,
            domains: config.domains.clone(),
            domain_status: config.domain_status.iter().map(SsoDomainView::new).collect(),
            default_role: config.default_role.clone(),
            enabled: config.enabled,
            redirect_uri: redirect_uri(public_base),
            updated_at: Timestamp::from_ms(config.updated_at_ms),
        }
    }
}

/// A domain a team's single sign-on claims: it counts once proven.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SsoDomainView {
    pub domain: String,
    pub verified: bool,
    pub verified_at: Option<Timestamp>,
    /// `dns` or `https` once proven.
    pub method: Option<String>,
    /// The DNS TXT record that proves it.
    pub txt_record: TxtRecordView,
    /// Or the file that proves it.
    pub https_file: HttpsFileView,
}

/// A TXT record to publish.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TxtRecordView {
    pub name: String,
    pub value: String,
}

/// A file to publish (served with 200, no redirect).
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct HttpsFileView {
    pub url: String,
    pub content: String,
}

impl SsoDomainView {
    fn new(domain: &SsoDomain) -> Self {
        let verified = domain.verified_at_ms > 0;
        Self {
            domain: domain.domain.clone(),
            verified,
            verified_at: verified.then(|| Timestamp::from_ms(domain.verified_at_ms)),
            method: Some(domain.method.clone()).filter(|method| !method.is_empty()),
            txt_record: TxtRecordView { name: domain.txt_name.clone(), value: domain.txt_value.clone() },
            https_file: HttpsFileView { url: domain.https_url.clone(), content: domain.https_content.clone() },
        }
    }
}

/// A domain in the path.
#[derive(Deserialize, JsonSchema)]
pub struct DomainPath {
    /// e.g. `acme.example`.
    #[schemars(length(min = 1, max = 253))]
    pub domain: String,
}

/// Whether the signed-in person can link single sign-on.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SsoLinkView {
    /// Their team's single sign-on is on and covers their address's domain.
    pub available: bool,
    /// They are linked: they can sign in through single sign-on.
    pub linked: bool,
    /// Their address's domain.
    pub domain: String,
    /// The provider's issuer, when available.
    pub issuer: Option<String>,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct StartSso {
    #[schemars(length(min = limits::EMAIL.min, max = limits::EMAIL.max), extend("pattern" = limits::EMAIL_PATTERN))]
    pub email: String,
}

/// Where to send the browser.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SsoStartView {
    pub url: String,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct FinishSso {
    /// The `code` the provider put in the callback's query.
    #[schemars(length(min = 1, max = 2048))]
    pub code: String,
    /// The `state` of the callback's query.
    #[schemars(length(min = 1, max = 512))]
    pub state: String,
}

/// Where the provider sends the browser back: a page of the portal.
fn redirect_uri(public_base: &str) -> String {
    format!("{public_base}/sso/callback")
}

fn config_request(call: &Call) -> SsoConfigRequest {
    SsoConfigRequest {
        team_id: call.team_id().to_owned(),
        caller_role: call.principal.standing().caller_role().to_owned(),
    }
}

async fn get(call: Call, _: Input) -> ServiceResult<Data<SsoView>> {
    let config = call.services.accounts.clone().get_sso_config(config_request(&call)).await?.into_inner();
    Ok(Data::new(SsoView::new(&config, &call.public_base)))
}

async fn set(call: Call, input: Input<Nothing, Nothing, Json<SetSso>>) -> ServiceResult<Updated<SsoView>> {
    let Json(body) = input.body;
    let request = SetSsoConfigRequest {
        team_id: call.team_id().to_owned(),
        issuer: body.issuer,
        client_id: body.client_id,
        client_secret: body.client_secret,
        domains: body.domains,
        default_role: body.default_role.unwrap_or_else(|| "member".to_owned()),
        enabled: body.enabled.unwrap_or(true),
        caller_role: call.principal.standing().caller_role().to_owned(),
    };
    let config = call.services.accounts.clone().set_sso_config(request).await?.into_inner();
    Ok(Updated::new(SsoView::new(&config, &call.public_base), "Single sign-on saved"))
}

async fn delete(call: Call, _: Input) -> ServiceResult<Updated<SsoView>> {
    let config = call.services.accounts.clone().delete_sso_config(config_request(&call)).await?.into_inner();
    Ok(Updated::new(SsoView::new(&config, &call.public_base), "Single sign-on removed"))
}

async fn verify(call: Call, input: Input<DomainPath>) -> ServiceResult<Data<SsoDomainView>> {
    let request = VerifySsoDomainRequest {
        team_id: call.team_id().to_owned(),
        domain: input.path.domain,
        caller_role: call.principal.standing().caller_role().to_owned(),
    };
    let domain = call.services.accounts.clone().verify_sso_domain(request).await?.into_inner();
    Ok(Data::new(SsoDomainView::new(&domain)))
}

/// The session's token hash: links are a person's, made from their session.
fn session_hash(call: &Call) -> ServiceResult<String> {
    let token = call.principal.session().and(call.session_token.as_deref()).ok_or_else(|| {
        ServiceError::new(ErrorKind::Unauthorized, "Not signed in")
            .with_hint("Single sign-on links a person: sign in with POST /v1/auth/sign-in, not an API key.")
    })?;
    Ok(hash_key(token))
}

async fn link_status(call: Call, _: Input) -> ServiceResult<Data<SsoLinkView>> {
    let request = SessionTokenRequest { token_hash: session_hash(&call)?, client: Some((&call.client).into()) };
    let status = call.services.accounts.clone().get_sso_link(request).await?.into_inner();
    Ok(Data::new(SsoLinkView {
        available: status.available,
        linked: status.linked,
        domain: status.domain,
        issuer: Some(status.issuer).filter(|issuer| !issuer.is_empty()),
    }))
}

async fn link(call: Call, _: Input) -> ServiceResult<WithCookie<Data<SsoStartView>>> {
    let request = StartSsoLinkRequest {
        token_hash: session_hash(&call)?,
        redirect_uri: redirect_uri(&call.public_base),
        client: Some((&call.client).into()),
    };
    let started = call.services.accounts.clone().start_sso_link(request).await?.into_inner();
    let cookie = sessions::set_sso_cookie(&started.binding, call.client.https);
    Ok(WithCookie { answer: Data::new(SsoStartView { url: started.authorization_url }), cookie })
}

async fn start(
    call: Call,
    input: Input<Nothing, Nothing, Json<StartSso>>,
) -> ServiceResult<WithCookie<Data<SsoStartView>>> {
    let Json(body) = input.body;
    let request = StartSsoRequest {
        email: body.email,
        redirect_uri: redirect_uri(&call.public_base),
        client: Some((&call.client).into()),
    };
    let started = call.services.accounts.clone().start_sso(request).await?.into_inner();
    let cookie = sessions::set_sso_cookie(&started.binding, call.client.https);
    Ok(WithCookie { answer: Data::new(SsoStartView { url: started.authorization_url }), cookie })
}

async fn finish(
    call: Call,
    input: Input<Nothing, Nothing, Json<FinishSso>>,
) -> ServiceResult<WithCookie<Data<SessionView>>> {
    let Json(body) = input.body;
    let binding = call.sso_binding.clone().ok_or_else(|| {
        ServiceError::new(ErrorKind::Unauthorized, "This single sign-on did not begin in this browser")
            .with_hint("Start again from the sign-in page.")
    })?;
    let request = FinishSsoRequest {
        code: body.code,
        state: body.state,
        binding,
        client: Some((&call.client).into()),
        session_token_hash: call.session_token.as_deref().map(hash_key).unwrap_or_default(),
    };
    let mut signed_in = call.services.accounts.clone().finish_sso(request).await?.into_inner();
    if signed_in.token.is_empty() {
        // A link answers the session that began it, which this request's cookie carries.
        signed_in.token = call
            .session_token
            .clone()
            .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("a link finished without its session")))?;
    }
    Ok(data(begun(&call, signed_in)))
}
