//! `/me` as a person changes it: their names (`PATCH /v1/me`) and their e-mail address
//! (`POST /v1/me/email`, confirmed by a link mailed to the new address and used with
//! `POST /v1/auth/confirm-email`). They are a person's own, not the team's: any role may change
//! theirs, and an API key, which acts for a team, never may (identity service,
//! `AccountService`, which writes the audit log). None of these is an MCP tool.

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::accounts::{EmailChangeView, EmailConfirmedView};
use switchboard_api::identity::User;
use switchboard_kit::apikey::hash_key;
use switchboard_kit::{ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{ConfirmEmailChangeRequest, RequestEmailChangeRequest, UpdateProfileRequest};

use super::auth::session_token;
use super::groups::{AUTH, IDENTITY};
use crate::call::Call;
use crate::endpoint::{Accepted, Data, Endpoint, Input, Json, Nothing, Updated};

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::patch("/v1/me", update_me)
            .doc("updateMe", IDENTITY, "Change the signed-in person's first and last name")
            .about(
                "Members left out keep their value. Written to the audit log as `user.name_changed`. Other people \
                 see the new name at their next request.",
            )
            .for_own_account()
            .fails(401, "Not signed in, or called with an API key: names are a person's own."),
        Endpoint::post("/v1/me/email", change_email)
            .doc("changeMyEmail", IDENTITY, "Change the signed-in person's e-mail address, confirmed by a link")
            .about(
                "Mails a link (valid 1 day, once) to the new address with the platform's SMTP server, and answers \
                 202: the person signs in with the old address until the link is opened (`POST \
                 /v1/auth/confirm-email`); then the old address gets a notice. Sessions stay signed in. A person \
                 with a password sends it as `password`; one without (single sign-on only), and one with a second \
                 factor, also needs a recent sign-in (403 `REAUTHENTICATION_REQUIRED` otherwise, see POST \
                 /v1/auth/reauthenticate). A newer request \
                 ends the links of older ones. The answer is the same, at once, whether or not another account \
                 uses the address: such an address is mailed a notice instead of a link, so that the answer tells \
                 no one who has an account. A new address gets at most 3 mails a client in 15 minutes, and 5 in \
                 all whatever the client. Audit log: `user.email_change_requested`, then `user.email_changed`.",
            )
            .for_own_account()
            .fails(400, "The address is not valid or is yours already, or `password` is missing or wrong.")
            .fails(401, "Not signed in, or called with an API key: the address is a person's own.")
            .fails(403, "REAUTHENTICATION_REQUIRED: a person without a password, or with a second factor, has not signed in (or re-authenticated) lately.")
            .fails(429, "Too many requests for this address or from this client; `retryAfter` says when."),
        Endpoint::post("/v1/auth/confirm-email", confirm_email)
            .in_session_flow()
            .doc("confirmEmail", AUTH, "Use an e-mail confirmation link: the new address signs in from now on")
            .about(
                "The token is the last segment of the link mailed by `POST /v1/me/email`. Needs no session: the \
                 link is the proof that the new mailbox is the person's.",
            )
            .for_visitors()
            .fails(404, "E-mail confirmation link not found: unknown, used already, or expired.")
            .fails(409, "Another account took the address since the link was sent."),
    ]
}

/// Members left out keep their value. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateMe {
    #[schemars(length(min = limits::PERSON_NAME.min, max = limits::PERSON_NAME.max))]
    pub first_name: Option<String>,
    #[schemars(length(min = limits::PERSON_NAME.min, max = limits::PERSON_NAME.max))]
    pub last_name: Option<String>,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct ChangeEmail {
    /// The new address.
    #[schemars(length(min = limits::EMAIL.min, max = limits::EMAIL.max), extend("pattern" = limits::EMAIL_PATTERN))]
    pub email: String,
    /// The current password; needed when the person has one (not for single sign-on only).
    #[schemars(length(min = 1, max = 256))]
    pub password: Option<String>,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct ConfirmEmail {
    /// The last segment of the link mailed.
    #[schemars(length(min = 1, max = 128))]
    pub token: String,
}

async fn update_me(call: Call, input: Input<Nothing, Nothing, Json<UpdateMe>>) -> ServiceResult<Updated<User>> {
    let Json(body) = input.body;
    let token = session_token(&call)?.to_owned();
    let (first_name, last_name) = (body.first_name.unwrap_or_default(), body.last_name.unwrap_or_default());
    // Present but blank would silently keep the old value: refuse it as the limits say.
    let blank = |field: &str, value: &str| {
        (!value.is_empty() && value.trim().is_empty()).then(|| limits::PERSON_NAME.check(field, "")).flatten()
    };
    switchboard_kit::validate([blank("firstName", &first_name), blank("lastName", &last_name)])?;
    let request = UpdateProfileRequest {
        token_hash: hash_key(&token),
        first_name,
        last_name,
        client: Some((&call.client).into()),
    };
    let user = call.services.accounts.clone().update_profile(request).await?.into_inner();
    // This gateway shows the new name at once to this browser too.
    call.gate.sessions.forget(&token);
    Ok(Updated::new(User::from(&user), "Your name was changed"))
}

async fn change_email(
    call: Call,
    input: Input<Nothing, Nothing, Json<ChangeEmail>>,
) -> ServiceResult<Accepted<EmailChangeView>> {
    let Json(body) = input.body;
    let token = session_token(&call)?.to_owned();
    // Each request may send an e-mail to an address the caller chose: counted per address.
    let _counted = call.gate.email_changes.reserve(&body.email, &call.client.ip).await?;
    // A wrong password is a guess at it from a signed-in browser: the sign-in throttle's.
    let email = call.principal.session().and_then(|session| session.user.as_ref()).map_or("", |user| &user.email);
    let throttle = call.gate.throttle.clone();
    let reservation = throttle.reserve(email, &call.client.ip).await?;
    let request = RequestEmailChangeRequest {
        token_hash: hash_key(&token),
        email: body.email,
        password: body.password.unwrap_or_default(),
        link_base: call.public_base.clone(),
        client: Some((&call.client).into()),
    };
    let change = match call.services.accounts.clone().request_email_change(request).await {
        Ok(change) => change.into_inner(),
        Err(status) => {
            let error = ServiceError::from_status(&status);
            if !error.details.iter().any(|violation| violation.field == "password") {
                throttle.succeeded(reservation).await;
            }
            return Err(error);
        }
    };
    throttle.succeeded(reservation).await;
    let message = if change.mailed {
        "A confirmation link is on its way to the new address; your address changes when it is opened"
    } else {
        "This platform cannot send e-mail (no SMTP server): ask its operator; your address stays as it is"
    };
    Ok(Accepted::new(EmailChangeView::from(&change), message))
}

async fn confirm_email(
    call: Call,
    input: Input<Nothing, Nothing, Json<ConfirmEmail>>,
) -> ServiceResult<Data<EmailConfirmedView>> {
    let Json(body) = input.body;
    let request = ConfirmEmailChangeRequest { token: body.token, client: Some((&call.client).into()) };
    let user = call.services.accounts.clone().confirm_email_change(request).await?.into_inner();
    // The signed-in browser that opened it shows the new address at once.
    if let Some(token) = call.session_token.as_deref() {
        call.gate.sessions.forget(token);
    }
    Ok(Data::new(EmailConfirmedView { email: user.email }))
}
