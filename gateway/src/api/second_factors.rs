//! `/auth/second-factors`: a signed-in person sets up, replaces and removes their second factor
//! (an authenticator app, TOTP) and their recovery codes (identity service, `AccountService`).
//! Each needs the session cookie: a key has no person to protect. The sign-in step that uses
//! them is `POST /v1/auth/sign-in/verify` (`auth.rs`).

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::accounts::{RecoveryCodesView, SecondFactorsView, TotpEnrolmentView};
use switchboard_kit::apikey::hash_key;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::{ConfirmTotpRequest, SessionTokenRequest};

use super::failures::NOT_SIGNED_IN;
use super::groups::AUTH;
use crate::call::Call;
use crate::endpoint::{Created, Data, Endpoint, Input, Json, Nothing};

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/auth/second-factors", list)
            .in_session_flow()
            .doc("getSecondFactors", AUTH, "The signed-in person's second factors and recovery codes left")
            .for_own_account()
            .fails(401, NOT_SIGNED_IN),
        Endpoint::post("/v1/auth/second-factors/totp", begin_totp)
            .in_session_flow()
            .doc("beginTotp", AUTH, "Start setting up an authenticator app: its secret and QR code")
            .about(
                "The secret is not used until POST /v1/auth/second-factors/totp/confirm gets a code made from it \
                 (a new start replaces an unconfirmed one). Authenticator apps read `qrCode` (or `uri`), or take \
                 `secret` typed in: RFC 6238, SHA-1, 6 digits, 30 seconds.",
            )
            .for_recent_sign_in()
            .fails(401, NOT_SIGNED_IN)
            .fails(409, "An authenticator app is set up already: remove it first."),
        Endpoint::post("/v1/auth/second-factors/totp/confirm", confirm_totp)
            .in_session_flow()
            .doc("confirmTotp", AUTH, "Finish setting up the authenticator app with its current code")
            .about(
                "From now on, signing in asks for a code. The answer's 10 recovery codes are shown this once: each \
                 signs in once instead of a code, when the app is lost. Every other session of the person ends.",
            )
            .for_recent_sign_in()
            .fails(400, "code is not the app's current code.")
            .fails(401, NOT_SIGNED_IN)
            .fails(409, "No authenticator app is being set up."),
        Endpoint::delete("/v1/auth/second-factors/totp", remove_totp)
            .in_session_flow()
            .doc("removeTotp", AUTH, "Remove the authenticator app and the recovery codes")
            .about("Every other session of the person ends.")
            .for_recent_sign_in()
            .fails(401, NOT_SIGNED_IN)
            .fails(409, "The team requires a second factor."),
        Endpoint::post("/v1/auth/second-factors/recovery-codes", renew_recovery_codes)
            .in_session_flow()
            .doc("renewRecoveryCodes", AUTH, "New recovery codes, replacing the old ones (shown this once)")
            .for_recent_sign_in()
            .fails(401, NOT_SIGNED_IN)
            .fails(409, "No second factor is set up."),
    ]
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct ConfirmTotp {
    /// The app's current 6-digit code.
    #[schemars(length(min = 1, max = 16))]
    pub code: String,
}

/// The session token of a call that needs one, hashed as the identity service looks it up.
fn token_request(call: &Call) -> ServiceResult<SessionTokenRequest> {
    let token = call.principal.session().and(call.session_token.as_deref()).ok_or_else(|| {
        ServiceError::new(ErrorKind::Unauthorized, "Not signed in")
            .with_hint("Second factors belong to a person: sign in with POST /v1/auth/sign-in, not an API key.")
    })?;
    Ok(SessionTokenRequest { token_hash: hash_key(token), client: Some((&call.client).into()) })
}

async fn list(call: Call, _: Input) -> ServiceResult<Data<SecondFactorsView>> {
    let factors = call.services.accounts.clone().get_second_factors(token_request(&call)?).await?.into_inner();
    Ok(Data::new(SecondFactorsView::from(&factors)))
}

async fn begin_totp(call: Call, _: Input) -> ServiceResult<Created<TotpEnrolmentView>> {
    let enrolment = call.services.accounts.clone().begin_totp(token_request(&call)?).await?.into_inner();
    let qr_code = qr_data_url(&enrolment.uri)?;
    let view = TotpEnrolmentView { secret: enrolment.secret, uri: enrolment.uri, qr_code };
    Ok(Created::new(view, "Scan the QR code, then confirm with the app's code"))
}

async fn confirm_totp(
    call: Call,
    input: Input<Nothing, Nothing, Json<ConfirmTotp>>,
) -> ServiceResult<Data<RecoveryCodesView>> {
    let Json(body) = input.body;
    let token = token_request(&call)?;
    let request = ConfirmTotpRequest { token_hash: token.token_hash, code: body.code, client: token.client };
    let codes = call.services.accounts.clone().confirm_totp(request).await?.into_inner();
    // This gateway looks the session up again: one limited to setting up a factor is whole now.
    if let Some(token) = call.session_token.as_deref() {
        call.gate.sessions.forget(token);
    }
    Ok(Data::new(RecoveryCodesView { codes: codes.codes }))
}

async fn remove_totp(call: Call, _: Input) -> ServiceResult<Data<SecondFactorsView>> {
    let factors = call.services.accounts.clone().remove_totp(token_request(&call)?).await?.into_inner();
    Ok(Data::new(SecondFactorsView::from(&factors)))
}

async fn renew_recovery_codes(call: Call, _: Input) -> ServiceResult<Data<RecoveryCodesView>> {
    let codes = call.services.accounts.clone().new_recovery_codes(token_request(&call)?).await?.into_inner();
    Ok(Data::new(RecoveryCodesView { codes: codes.codes }))
}

/// `text` as a QR code (medium error correction), an SVG image in a `data:` URL: the portal
/// shows it as an `<img>`, which its Content-Security-Policy allows, never as markup.
fn qr_data_url(text: &str) -> ServiceResult<String> {
    use base64::Engine;
    let code = qrcodegen::QrCode::encode_text(text, qrcodegen::QrCodeEcc::Medium)
        .map_err(|error| ServiceError::internal(anyhow::anyhow!("drawing a QR code: {error:?}")))?;
    let border = 4;
    let size = code.size() + border * 2;
    let mut path = String::new();
    for y in 0..code.size() {
        for x in 0..code.size() {
            if code.get_module(x, y) {
                path.push_str(&format!("M{},{}h1v1h-1z", x + border, y + border));
            }
        }
    }
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {size} {size}\" shape-rendering=\"crispEdges\">\
         <rect width=\"100%\" height=\"100%\" fill=\"#fff\"/><path d=\"{path}\" fill=\"#000\"/></svg>"
    );
    Ok(format!("data:image/svg+xml;base64,{}", base64::engine::general_purpose::STANDARD.encode(svg)))
}

#[cfg(test)]
mod tests {
    use super::qr_data_url;

    #[test]
    fn a_qr_code_is_an_svg_data_url() {
        let url = qr_data_url("otpauth://totp/Switchboard:ada?secret=ABC").unwrap();
        assert!(url.starts_with("data:image/svg+xml;base64,"), "{url}");
        assert!(url.len() > 200);
    }
}
