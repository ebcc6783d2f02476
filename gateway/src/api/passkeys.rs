//! Passkeys (WebAuthn; identity service, `AccountService`): a signed-in person registers and
//! removes theirs under `/auth/second-factors/passkeys`; a sign-in uses one as its second
//! factor (`/auth/sign-in/passkey-options`, then `/auth/sign-in/verify`), or alone, without a
//! password (`/auth/passkey/options`, then `/auth/passkey`). Options and credentials are the
//! WebAuthn JSON encodings (`PublicKeyCredential.parseCreationOptionsFromJSON`,
//! `credential.toJSON()` in a browser). The relying party is the public URL.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchboard_api::accounts::{PasskeyView, SecondFactorsView, SessionView};
use switchboard_kit::apikey::hash_key;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::{FinishPasskeyRequest, PasskeyCeremony, PasskeyCeremonyRequest, RemovePasskeyRequest};

use super::failures::NOT_SIGNED_IN;
use super::groups::AUTH;
use super::signed_in::{begun, data};
use crate::call::Call;
use crate::endpoint::{Created, Data, Endpoint, Id, Input, Json, Nothing, WithCookie};

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::post("/v1/auth/second-factors/passkeys/options", registration_options)
            .in_session_flow()
            .doc("passkeyRegistrationOptions", AUTH, "Start registering a passkey: the options for the browser")
            .about("Give `options.publicKey` to `navigator.credentials.create`; valid 5 minutes, once.")
            .for_recent_sign_in()
            .fails(401, NOT_SIGNED_IN),
        Endpoint::post("/v1/auth/second-factors/passkeys", register)
            .in_session_flow()
            .doc("registerPasskey", AUTH, "Finish registering a passkey with the browser's credential")
            .about(
                "From then on, signing in asks for it (or another second factor), and it signs in alone too. User \
                 verification is required. Every other session of the person ends.",
            )
            .for_recent_sign_in()
            .creates("passkeyId")
            .fails(400, "The credential was not accepted, or the name is missing.")
            .fails(401, "Not signed in, or the options expired or were used.")
            .fails(409, "The passkey is registered already, or the person has 20."),
        Endpoint::delete("/v1/auth/second-factors/passkeys/{passkeyId}", remove)
            .in_session_flow()
            .doc("removePasskey", AUTH, "Remove one of the signed-in person's passkeys")
            .about("Every other session of the person ends.")
            .for_recent_sign_in()
            .fails(401, NOT_SIGNED_IN)
            .fails(404, "Passkey not found.")
            .fails(409, "The team requires a second factor and this is the last one."),
        Endpoint::post("/v1/auth/sign-in/passkey-options", second_factor_options)
            .in_session_flow()
            .doc("passkeySecondFactorOptions", AUTH, "The passkey options of a sign-in waiting for its second factor")
            .about(
                "For a sign-in's 202 answer whose `methods` name `passkey`: give `options.publicKey` to \
                 `navigator.credentials.get`, then send the credential to POST /v1/auth/sign-in/verify.",
            )
            .for_visitors()
            .fails(401, "The challenge expired, was used or took 5 tries.")
            .fails(409, "The person has no passkey."),
        Endpoint::post("/v1/auth/passkey/options", sign_in_options)
            .in_session_flow()
            .doc("passkeySignInOptions", AUTH, "Start a sign-in with a passkey alone: the options for the browser")
            .for_visitors(),
        Endpoint::post("/v1/auth/passkey", sign_in)
            .in_session_flow()
            .doc("signInWithPasskey", AUTH, "Sign in with a passkey alone; begins a session (cookie)")
            .about("The passkey names its person (a discoverable credential); user verification is required.")
            .for_visitors()
            .fails(401, "The passkey is unknown, its answer failed a check, or the options expired or were used."),
    ]
}

/// A passkey's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PasskeyPath {
    pub passkey_id: Id,
}

/// What the browser needs for a WebAuthn ceremony.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PasskeyOptions {
    /// Send it back with the credential.
    pub ceremony: String,
    /// The WebAuthn options, JSON-encoded: `{publicKey: {...}}`.
    pub options: Value,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct Register {
    /// The `ceremony` of the options.
    #[schemars(length(min = 1, max = 64))]
    pub ceremony: String,
    /// What the person calls it, e.g. "Laptop".
    #[schemars(length(min = 1, max = 60))]
    pub name: String,
    /// `navigator.credentials.create(...)`'s credential, `toJSON()`.
    pub credential: serde_json::Map<String, Value>,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct ChallengeBody {
    /// The `challenge` of the sign-in's 202 answer.
    #[schemars(length(min = 1, max = 128))]
    pub challenge: String,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct Assertion {
    /// The `ceremony` of the options.
    #[schemars(length(min = 1, max = 64))]
    pub ceremony: String,
    /// `navigator.credentials.get(...)`'s credential, `toJSON()`.
    pub credential: serde_json::Map<String, Value>,
}

fn session_token_hash(call: &Call) -> ServiceResult<String> {
    let token = call.principal.session().and(call.session_token.as_deref()).ok_or_else(|| {
        ServiceError::new(ErrorKind::Unauthorized, "Not signed in")
            .with_hint("Passkeys belong to a person: sign in with POST /v1/auth/sign-in, not an API key.")
    })?;
    Ok(hash_key(token))
}

pub(super) fn options_of(ceremony: PasskeyCeremony) -> ServiceResult<Data<PasskeyOptions>> {
    let options = serde_json::from_str(&ceremony.options).map_err(ServiceError::internal)?;
    Ok(Data::new(PasskeyOptions { ceremony: ceremony.id, options }))
}

async fn registration_options(call: Call, _: Input) -> ServiceResult<Data<PasskeyOptions>> {
    let request = PasskeyCeremonyRequest {
        token_hash: session_token_hash(&call)?,
        challenge: String::new(),
        origin: call.public_base.clone(),
    };
    options_of(call.services.accounts.clone().begin_passkey_registration(request).await?.into_inner())
}

async fn register(call: Call, input: Input<Nothing, Nothing, Json<Register>>) -> ServiceResult<Created<PasskeyView>> {
    let Json(body) = input.body;
    let request = FinishPasskeyRequest {
        token_hash: session_token_hash(&call)?,
        ceremony: body.ceremony,
        credential: Value::Object(body.credential).to_string(),
        name: body.name,
        origin: call.public_base.clone(),
        client: Some((&call.client).into()),
    };
    let info = call.services.accounts.clone().finish_passkey_registration(request).await?.into_inner();
    if let Some(token) = call.session_token.as_deref() {
        call.gate.sessions.forget(token);
    }
    Ok(Created::new(PasskeyView::from(&info), "Passkey registered"))
}

async fn remove(call: Call, input: Input<PasskeyPath>) -> ServiceResult<Data<SecondFactorsView>> {
    let request = RemovePasskeyRequest {
        token_hash: session_token_hash(&call)?,
        passkey_id: input.path.passkey_id.into_string(),
        client: Some((&call.client).into()),
    };
    let factors = call.services.accounts.clone().remove_passkey(request).await?.into_inner();
    Ok(Data::new(SecondFactorsView::from(&factors)))
}

async fn second_factor_options(
    call: Call,
    input: Input<Nothing, Nothing, Json<ChallengeBody>>,
) -> ServiceResult<Data<PasskeyOptions>> {
    let Json(body) = input.body;
    let request = PasskeyCeremonyRequest {
        token_hash: String::new(),
        challenge: body.challenge,
        origin: call.public_base.clone(),
    };
    options_of(call.services.accounts.clone().begin_passkey_second_factor(request).await?.into_inner())
}

async fn sign_in_options(call: Call, _: Input) -> ServiceResult<Data<PasskeyOptions>> {
    let request = PasskeyCeremonyRequest {
        token_hash: String::new(),
        challenge: String::new(),
        origin: call.public_base.clone(),
    };
    options_of(call.services.accounts.clone().begin_passkey_sign_in(request).await?.into_inner())
}

async fn sign_in(
    call: Call,
    input: Input<Nothing, Nothing, Json<Assertion>>,
) -> ServiceResult<WithCookie<Data<SessionView>>> {
    let Json(body) = input.body;
    let request = FinishPasskeyRequest {
        token_hash: String::new(),
        ceremony: body.ceremony,
        credential: Value::Object(body.credential).to_string(),
        name: String::new(),
        origin: call.public_base.clone(),
        client: Some((&call.client).into()),
    };
    let signed_in = call.services.accounts.clone().finish_passkey_sign_in(request).await?.into_inner();
    Ok(data(begun(&call, signed_in)))
}
