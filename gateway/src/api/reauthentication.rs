//! `POST /v1/auth/reauthenticate`: a signed-in person confirms it is them, so that for the next
//! few minutes they may change their second factors and sessions (identity service,
//! `AccountService.Reauthenticate`; the endpoints that need it are declared
//! `for_recent_sign_in`). The proof is a second factor when the person has one, else their
//! password, whose wrong guesses count under the sign-in throttle.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use switchboard_api::accounts::SessionView;
use switchboard_kit::apikey::hash_key;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{PasskeyCeremonyRequest, ReauthenticateRequest};

use super::auth::session_token;
use super::failures::NOT_SIGNED_IN;
use super::groups::AUTH;
use super::passkeys::{Assertion, PasskeyOptions, options_of};
use crate::call::Call;
use crate::endpoint::{Data, Endpoint, Input, Json, Nothing};
use crate::sessions;

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::post("/v1/auth/reauthenticate", reauthenticate)
            .in_session_flow()
            .doc("reauthenticate", AUTH, "Confirm it is you, before changing your second factors or sessions")
            .about(
                "Send one of: `code` (a current code of your authenticator app, or an unused recovery code), \
                 `passkey` (the answer to POST /v1/auth/reauthenticate/passkey-options), or, only when you have no \
                 second factor, `password`. For the next few minutes (5 by default; `reauthenticateAfter` in the \
                 answer) your session may set up, replace and remove second factors and end sessions; after them \
                 those answer 403 `REAUTHENTICATION_REQUIRED` again. A sign-in counts as such a proof. Wrong codes \
                 count with the sign-in's (10 a person in 15 minutes), wrong passwords with the sign-in throttle; \
                 each failure is in the audit log (`auth.reauthentication_failed`, `auth.second_factor_failed`). A \
                 person who signs in only through single sign-on and has no second factor signs in again instead.",
            )
            .for_own_account()
            .fails(400, "The code, passkey or password was not accepted, or the wrong kind was sent.")
            .fails(401, NOT_SIGNED_IN)
            .fails(429, "Too many wrong codes for this person, or wrong passwords from this client."),
        Endpoint::post("/v1/auth/reauthenticate/passkey-options", passkey_options)
            .in_session_flow()
            .doc("passkeyReauthenticationOptions", AUTH, "The passkey options for confirming it is you")
            .about(
                "Give `options.publicKey` to `navigator.credentials.get`, then send the credential as `passkey` to \
                 POST /v1/auth/reauthenticate; valid 5 minutes, once.",
            )
            .for_own_account()
            .fails(401, NOT_SIGNED_IN)
            .fails(409, "You have no passkey."),
    ]
}

/// One of `code`, `passkey` or `password`. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct Reauthenticate {
    /// A 6-digit code of the authenticator app, or a recovery code.
    #[schemars(length(min = 1, max = 64))]
    pub code: Option<String>,
    /// A passkey's answer to POST /v1/auth/reauthenticate/passkey-options.
    pub passkey: Option<Assertion>,
    /// The password: only for a person without a second factor.
    #[schemars(length(min = 1, max = 256))]
    pub password: Option<String>,
}

async fn reauthenticate(
    call: Call,
    input: Input<Nothing, Nothing, Json<Reauthenticate>>,
) -> ServiceResult<Data<SessionView>> {
    let Json(body) = input.body;
    let token = session_token(&call)?.to_owned();
    let mut request = ReauthenticateRequest {
        token_hash: hash_key(&token),
        origin: call.public_base.clone(),
        client: Some((&call.client).into()),
        ..ReauthenticateRequest::default()
    };
    match (body.code, body.passkey, body.password) {
        (Some(code), None, None) => request.code = code,
        (None, Some(assertion), None) => {
            request.passkey_ceremony = assertion.ceremony;
            request.passkey_credential = Value::Object(assertion.credential).to_string();
        }
        (None, None, Some(password)) => request.password = password,
        // Nothing: the identity service says which proof this person needs.
        (None, None, None) => {}
        _ => return Err(ServiceError::invalid_field("code", "send one of code, passkey or password")),
    }
    // A password tried here is a guess at it from a signed-in browser: the sign-in throttle's.
    let reservation = if request.password.is_empty() {
        None
    } else {
        let email = call.principal.session().and_then(|session| session.user.as_ref()).map_or("", |user| &user.email);
        Some(call.gate.throttle.reserve(email, &call.client.ip).await?)
    };
    let answered = call.services.accounts.clone().reauthenticate(request).await;
    if let Some(reservation) = reservation {
        let wrong_password = answered.as_ref().is_err_and(|status| {
            ServiceError::from_status(status).details.iter().any(|violation| violation.field == "password")
        });
        if !wrong_password {
            call.gate.throttle.succeeded(reservation).await;
        }
    }
    let session = answered?.into_inner();
    // This gateway looks the session up again at once: it is recent now.
    call.gate.sessions.forget(&token);
    Ok(Data::new(SessionView::new(&session, sessions::csrf_token(&token))))
}

async fn passkey_options(call: Call, _: Input) -> ServiceResult<Data<PasskeyOptions>> {
    let token = session_token(&call)?;
    let request = PasskeyCeremonyRequest {
        token_hash: hash_key(token),
        challenge: String::new(),
        origin: call.public_base.clone(),
    };
    options_of(call.services.accounts.clone().begin_passkey_reauthentication(request).await?.into_inner())
}
