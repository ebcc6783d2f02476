//! Single sign-on with OpenID Connect (identity service, `AccountService`): a team's owner
//! sets its provider at `/members/sso`; a person signs in with `/auth/sso/start` (their e-mail
//! picks the team) and, back from the provider at the portal's `/sso/callback`,
//! `/auth/sso/finish`. The sign-in is bound to the browser that started it by a cookie of its
//! own (`switchboard_sso`), so a callback link carried to another browser signs no one in.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use switchboard_api::accounts::SessionView;
use switchboard_api::time::Timestamp;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{FinishSsoRequest, SetSsoConfigRequest, SsoConfig, SsoConfigRequest, StartSsoRequest};

use super::groups::{AUTH, MEMBERS};
use super::signed_in::{begun, data};
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::{Data, Endpoint, Input, Json, Nothing, Updated, WithCookie};
use crate::sessions;

const NO_SSO: &str = "This team has no single sign-on.";
const OWNERS: &str = "Only an owner changes the team's single sign-on.";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/members/sso", get)
            .doc("getSso", MEMBERS, "The team's single sign-on (OpenID Connect); never its client secret")
            .for_admins()
            .class(RateClass::Write)
            .fails(404, NO_SSO),
        Endpoint::put("/v1/members/sso", set)
            .doc("setSso", MEMBERS, "Set the team's OpenID Connect provider and the e-mail domains it covers")
            .about(
                "Owners only. The provider is discovered at once (`{issuer}/.well-known/openid-configuration`): \
                 one that cannot be is refused (503). Its client must allow the redirect URI \
                 `{public URL}/sso/callback`, the authorization code flow with PKCE, and the scopes openid, email \
                 and profile. A person whose verified e-mail is in `domains` signs in through it; one the team \
                 does not have yet is created with `defaultRole` (member when left out). Each domain belongs to \
                 one team (409). `clientSecret` left out keeps the stored one.",
            )
            .for_admins()
            .audited("team.sso_changed")
            .fails(403, OWNERS)
            .fails(409, "A domain is covered by another team's single sign-on."),
        Endpoint::delete("/v1/members/sso", delete)
            .doc("deleteSso", MEMBERS, "Remove the team's single sign-on")
            .about(
                "People who only ever signed in through it can no longer sign in (an owner can reset their password).",
            )
            .for_admins()
            .audited("team.sso_removed")
            .fails(403, OWNERS)
            .fails(404, NO_SSO),
        Endpoint::post("/v1/auth/sso/start", start)
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
            .doc("finishSso", AUTH, "Finish a single sign-on with the provider's code; begins a session (cookie)")
            .about(
                "The ID token must be signed by the provider's published keys and name it as issuer, this client \
                 as audience and the sign-in's nonce, and vouch for a verified e-mail in one of the team's domains. \
                 A person the team does not have yet is created (`member.joined`).",
            )
            .for_visitors()
            .fails(
                401,
                "The sign-in expired, was used, began in another browser, or the provider's answer failed a check.",
            )
            .fails(409, "The e-mail address signs in to another team."),
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
    /// `admin`, `member` (when left out) or `viewer`: the role of people created at sign-in.
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
    pub domains: Vec<String>,
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
            default_role: config.default_role.clone(),
            enabled: config.enabled,
            redirect_uri: redirect_uri(public_base),
            updated_at: Timestamp::from_ms(config.updated_at_ms),
        }
    }
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
    let request = FinishSsoRequest { code: body.code, state: body.state, binding, client: Some((&call.client).into()) };
    let signed_in = call.services.accounts.clone().finish_sso(request).await?.into_inner();
    Ok(data(begun(&call, signed_in)))
}
