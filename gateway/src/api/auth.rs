//! `/auth`: signing in and out, sign-up, invitations accepted and passwords reset (identity
//! service, `AccountService`). The visitor operations need no credential and are limited per
//! client address (rate class `auth`); failed sign-ins are throttled per e-mail address and per
//! client address ([`crate::throttle`]). A session is an `HttpOnly` cookie; its writes carry
//! `X-CSRF-Token` ([`crate::sessions`]). None of these is an MCP tool.

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::accounts::{
    AuthOptions, InvitationPreviewView, ResetRequestedView, SecondFactorChallengeView, SessionItem, SessionView,
    SessionsEnded, SignedOut,
};
use switchboard_kit::apikey::hash_key;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{
    AcceptInvitationRequest, ChangePasswordRequest, EndSessionRequest, EndUserSessionsRequest,
    GetAccountOptionsRequest, InvitationTokenRequest, ListSessionsRequest, RequestPasswordResetRequest,
    ResetPasswordRequest, SignInRequest, SignUpRequest, VerifySecondFactorRequest,
};

use super::failures::NOT_SIGNED_IN;
use super::groups::AUTH;
use super::signed_in::{begun, data};
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::{Accepted, Answer, Created, Data, Endpoint, Id, Input, Json, List, Nothing, WithCookie};
use crate::reply::Reply;
use crate::sessions;

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/auth/options", options)
            .in_session_flow()
            .doc("getAuthOptions", AUTH, "What a visitor may do: whether sign-up is open")
            .for_visitors()
            .class(RateClass::Standard),
        Endpoint::post("/v1/auth/sign-in", sign_in)
            .in_session_flow()
            .doc("signIn", AUTH, "Sign in with e-mail and password; begins a session (cookie)")
            .about(
                "Answers the session and sets the `switchboard_session` cookie (HttpOnly, SameSite=Lax; over https \
                 `__Host-switchboard_session`, Secure). A wrong e-mail and a wrong password get the same 401. In 15 \
                 minutes, after 10 failures for one e-mail address from one client, 100 for one address from all \
                 clients (then only clients that failed for it wait), or 50 from one client, sign-in answers 429 \
                 with Retry-After. A correct password from a client with no failures is not held up.",
            )
            .for_visitors()
            .also_answers::<Accepted<SecondFactorChallengeView>>(
                "The password was right and the person has a second factor: no session yet. Send the \
                 challenge with a code to POST /v1/auth/sign-in/verify.",
            )
            .fails(401, "Invalid email or password.")
            .fails(429, "Too many sign-ins, or too many failed ones, from this client or for this e-mail."),
        Endpoint::post("/v1/auth/sign-in/verify", verify)
            .in_session_flow()
            .doc("verifySecondFactor", AUTH, "Finish a sign-in with a second factor; begins a session (cookie)")
            .about(
                "`code` is the current 6-digit code of the person's authenticator app, or one of their recovery \
                 codes (each works once). A challenge takes at most 5 codes and lasts 5 minutes; after 10 wrong \
                 codes for one person in 15 minutes, tries answer 429 with Retry-After.",
            )
            .for_visitors()
            .fails(401, "Invalid code, or the challenge expired, was used or took 5 codes already.")
            .fails(429, "Too many wrong codes for this person, or too many requests from this client."),
        Endpoint::post("/v1/auth/sign-up", sign_up)
            .in_session_flow()
            .doc("signUp", AUTH, "Create a team and its owner, and sign in (when sign-up is open)")
            .about(
                "Only when the platform runs with SWITCHBOARD_SIGNUP=open (see GET /v1/auth/options). The team starts \
                 with SWITCHBOARD_SIGNUP_CREDITS credits (0 by default).",
            )
            .for_visitors()
            .fails(403, "Sign-up is closed on this platform.")
            .fails(409, "An account with this e-mail address exists already."),
        Endpoint::post("/v1/auth/accept-invite", accept_invite)
            .in_session_flow()
            .doc("acceptInvitation", AUTH, "Accept an invitation: set a name and password, and sign in")
            .for_visitors()
            .fails(404, "Invitation not found: unknown, used already, or expired.")
            .fails(409, "An account with this e-mail address exists already."),
        Endpoint::post("/v1/auth/reset", reset)
            .in_session_flow()
            .doc("resetPassword", AUTH, "Set a new password with a reset link's token, and sign in")
            .about(
                "Every session of the person ends, and every other reset link and e-mail change still out. Then \
                 it goes on as a sign-in: a person without a second factor is signed in (200, the session and its \
                 cookie); one with a second factor gets the challenge of a sign-in (202), and is signed in by POST \
                 /v1/auth/sign-in/verify, whose session then lists in `passkeys` the passkeys that still sign in \
                 without a password. Whoever reads the mailbox does not get past the second factor.",
            )
            .for_visitors()
            .also_answers::<Accepted<SecondFactorChallengeView>>(
                "The password is set and the person has a second factor: no session yet. Send the challenge \
                 with a code (or a passkey) to POST /v1/auth/sign-in/verify.",
            )
            .fails(404, "Password reset link not found: unknown, used already, or expired."),
        Endpoint::post("/v1/auth/forgot", forgot)
            .in_session_flow()
            .doc("requestPasswordReset", AUTH, "E-mail a link to reset the password of the account using an address")
            .about(
                "Answers 202 whether or not an account uses the address, so that it tells no one who has one; when \
                 one does, a reset link (valid 1 day, once) is e-mailed to it with the platform's SMTP server; the \
                 answer comes before the address is looked up, so its time tells nothing either. A new link ends \
                 the older ones. An address gets at most 3 e-mails a client in 15 minutes, and 5 in all whatever \
                 the client; a client asks at most 20 times.",
            )
            .for_visitors()
            .fails(429, "Too many reset requests for this address or from this client; `retryAfter` says when."),
        Endpoint::get("/v1/auth/invitations/{token}", invitation)
            .in_session_flow()
            .doc("getInvitation", AUTH, "What an invitation link is for: the team, the address invited and the role")
            .about("The token is the last segment of the invitation link. Nothing is used up by reading it.")
            .for_visitors()
            .fails(404, "Invitation not found: unknown, used already, or expired."),
        Endpoint::get("/v1/auth/session", session)
            .in_session_flow()
            .doc("getSession", AUTH, "The signed-in session: user, team, role and the CSRF token")
            .about(
                "Needs the session cookie. `csrfToken` must be sent as `X-CSRF-Token` with every POST, PUT, PATCH \
                 and DELETE authenticated by the cookie (403 without it).",
            )
            .for_own_account()
            .fails(401, NOT_SIGNED_IN),
        Endpoint::post("/v1/auth/sign-out", sign_out)
            .in_session_flow()
            .doc("signOut", AUTH, "End the session and clear its cookie")
            .about("The session is refused from then on, by every gateway once its cache of it expires (2 s).")
            .for_own_account(),
        Endpoint::get("/v1/auth/sessions", sessions)
            .in_session_flow()
            .doc("listSessions", AUTH, "The signed-in person's own sessions: device, address, when used")
            .about("Live sessions, newest first; `current` is this request's. Needs the session cookie.")
            .for_own_account()
            .lists("sessionId")
            .fails(401, NOT_SIGNED_IN),
        Endpoint::delete("/v1/auth/sessions/{sessionId}", end_session)
            .in_session_flow()
            .doc("endSession", AUTH, "End one of the signed-in person's own sessions")
            .about("That browser is signed out at its next request. Ending the current one signs this one out.")
            .for_recent_sign_in()
            .fails(401, NOT_SIGNED_IN)
            .fails(404, "Session not found: not one of yours, or ended already."),
        Endpoint::post("/v1/auth/sessions/end-others", end_other_sessions)
            .in_session_flow()
            .doc("endOtherSessions", AUTH, "Sign out everywhere else: end every session of this person but this one")
            .for_recent_sign_in()
            .fails(401, NOT_SIGNED_IN),
        Endpoint::post("/v1/auth/password", change_password)
            .in_session_flow()
            .doc("changePassword", AUTH, "Change the signed-in user's password")
            .about(
                "Every session of the user ends, and a new one begins for this browser (a new cookie). A wrong \
                 currentPassword counts as a failed sign-in (the same throttle) and is written to the audit log \
                 (`auth.password_change_failed`). `currentPassword` is the proof of who the person is: no recent \
                 sign-in is needed. For a person with a second factor the password proves only the password: the \
                 new session is no more recent than the one that asked (`reauthenticateAfter`). The answer's `passkeys` lists the passkeys that still sign in without a \
                 password; reset links and e-mail changes still out stop working.",
            )
            .for_own_account()
            .fails(400, "currentPassword is wrong, or newPassword breaks the rules.")
            .fails(429, "Too many wrong passwords for this user from this client (the sign-in throttle)."),
    ]
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct SignIn {
    #[schemars(length(min = 1, max = limits::EMAIL.max))]
    pub email: String,
    #[schemars(length(min = 1, max = 256))]
    pub password: String,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct Verify {
    /// The `challenge` of the sign-in's 202 answer.
    #[schemars(length(min = 1, max = 128))]
    pub challenge: String,
    /// A 6-digit code of the authenticator app, or a recovery code (`xxxxx-xxxxx`).
    #[schemars(length(min = 1, max = 32))]
    pub code: Option<String>,
    /// Instead of a code: a passkey's answer to POST /v1/auth/sign-in/passkey-options.
    pub passkey: Option<super::passkeys::Assertion>,
}

/// A sign-in's answer: a session, or (the person has a second factor) a challenge for it.
/// Described as the session; the challenge's 202 is declared beside it (`also_answers`).
pub enum SignInAnswer {
    Session(Box<WithCookie<Data<SessionView>>>),
    Challenge(Accepted<SecondFactorChallengeView>),
}

impl JsonSchema for SignInAnswer {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        <Data<SessionView>>::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        <Data<SessionView>>::schema_id()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Data<SessionView>>::json_schema(generator)
    }
}

impl Answer for SignInAnswer {
    const STATUS: u16 = 200;

    fn into_reply(self) -> Reply {
        match self {
            SignInAnswer::Session(session) => (*session).into_reply(),
            SignInAnswer::Challenge(challenge) => challenge.into_reply(),
        }
    }
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignUp {
    /// Signs in to this team only: one account per address on the platform.
    #[schemars(length(min = limits::EMAIL.min, max = limits::EMAIL.max), extend("pattern" = limits::EMAIL_PATTERN))]
    pub email: String,
    /// 10 to 256 characters, hard to guess: a zxcvbn score of 3 or more (else 400, with advice in
    /// `details[].hint`).
    #[schemars(length(min = 10, max = 256))]
    pub password: String,
    #[schemars(length(min = limits::PERSON_NAME.min, max = limits::PERSON_NAME.max))]
    pub first_name: String,
    #[schemars(length(min = limits::PERSON_NAME.min, max = limits::PERSON_NAME.max))]
    pub last_name: String,
    #[schemars(length(min = limits::TEAM_NAME.min, max = limits::TEAM_NAME.max))]
    pub team_name: String,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcceptInvite {
    /// The last segment of the invitation's URL.
    #[schemars(length(min = 1, max = 128))]
    pub token: String,
    /// 10 to 256 characters, hard to guess: a zxcvbn score of 3 or more (else 400, with advice in
    /// `details[].hint`).
    #[schemars(length(min = 10, max = 256))]
    pub password: String,
    #[schemars(length(min = limits::PERSON_NAME.min, max = limits::PERSON_NAME.max))]
    pub first_name: String,
    #[schemars(length(min = limits::PERSON_NAME.min, max = limits::PERSON_NAME.max))]
    pub last_name: String,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct Forgot {
    #[schemars(length(min = limits::EMAIL.min, max = limits::EMAIL.max), extend("pattern" = limits::EMAIL_PATTERN))]
    pub email: String,
}

/// An invitation link's token in the path.
#[derive(Deserialize, JsonSchema)]
pub struct InvitationToken {
    /// The last segment of the invitation link.
    #[schemars(length(min = 1, max = 128))]
    pub token: String,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct Reset {
    /// The last segment of the reset link.
    #[schemars(length(min = 1, max = 128))]
    pub token: String,
    /// 10 to 256 characters, hard to guess: a zxcvbn score of 3 or more (else 400, with advice in
    /// `details[].hint`).
    #[schemars(length(min = 10, max = 256))]
    pub password: String,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangePassword {
    #[schemars(length(min = 1, max = 256))]
    pub current_password: String,
    /// 10 to 256 characters, hard to guess: a zxcvbn score of 3 or more (else 400, with advice in
    /// `details[].hint`).
    #[schemars(length(min = 10, max = 256))]
    pub new_password: String,
}

fn created<T>(begun: WithCookie<T>, message: &'static str) -> WithCookie<Created<T>> {
    WithCookie { answer: Created::new(begun.answer, message), cookie: begun.cookie }
}

async fn options(call: Call, _: Input) -> ServiceResult<Data<AuthOptions>> {
    let options = call.services.accounts.clone().get_account_options(GetAccountOptionsRequest {}).await?.into_inner();
    Ok(Data::new(AuthOptions { sign_up: if options.signup_open { "open" } else { "closed" } }))
}

impl SignInAnswer {
    /// The session begun, or the challenge of a person with a second factor.
    fn of(call: &Call, signed_in: switchboard_proto::v1::SignedIn) -> SignInAnswer {
        if let Some(challenge) = &signed_in.challenge {
            let view = SecondFactorChallengeView::from(challenge);
            return SignInAnswer::Challenge(Accepted::new(view, "Enter a code of your second factor"));
        }
        SignInAnswer::Session(Box::new(data(begun(call, signed_in))))
    }
}

async fn sign_in(call: Call, input: Input<Nothing, Nothing, Json<SignIn>>) -> ServiceResult<SignInAnswer> {
    let Json(body) = input.body;
    let throttle = call.gate.throttle.clone();
    let reservation = throttle.reserve(&body.email, &call.client.ip).await?;
    let request =
        SignInRequest { email: body.email.clone(), password: body.password, client: Some((&call.client).into()) };
    match call.services.accounts.clone().sign_in(request).await {
        Ok(signed_in) => {
            throttle.succeeded(reservation).await;
            Ok(SignInAnswer::of(&call, signed_in.into_inner()))
        }
        Err(status) => {
            let error = ServiceError::from_status(&status);
            // A wrong password keeps its reserved failure; anything else gives it back.
            if error.kind != ErrorKind::Unauthorized {
                throttle.succeeded(reservation).await;
            }
            Err(error)
        }
    }
}

async fn verify(
    call: Call,
    input: Input<Nothing, Nothing, Json<Verify>>,
) -> ServiceResult<WithCookie<Data<SessionView>>> {
    let Json(body) = input.body;
    let (passkey_ceremony, passkey_credential) = match (&body.code, body.passkey) {
        (None, Some(assertion)) => (assertion.ceremony, serde_json::Value::Object(assertion.credential).to_string()),
        (Some(_), None) => (String::new(), String::new()),
        _ => return Err(ServiceError::invalid_field("code", "send a code or a passkey, one of them")),
    };
    let request = VerifySecondFactorRequest {
        challenge: body.challenge,
        code: body.code.unwrap_or_default(),
        client: Some((&call.client).into()),
        passkey_ceremony,
        passkey_credential,
        origin: call.public_base.clone(),
    };
    let signed_in = call.services.accounts.clone().verify_second_factor(request).await?.into_inner();
    Ok(data(begun(&call, signed_in)))
}

async fn sign_up(
    call: Call,
    input: Input<Nothing, Nothing, Json<SignUp>>,
) -> ServiceResult<WithCookie<Created<SessionView>>> {
    let Json(body) = input.body;
    let request = SignUpRequest {
        email: body.email,
        password: body.password,
        first_name: body.first_name,
        last_name: body.last_name,
        team_name: body.team_name,
        initial_credits: 0,
        client: Some((&call.client).into()),
    };
    let signed_in = call.services.accounts.clone().sign_up(request).await?.into_inner();
    Ok(created(begun(&call, signed_in), "Team created; signed in"))
}

async fn accept_invite(
    call: Call,
    input: Input<Nothing, Nothing, Json<AcceptInvite>>,
) -> ServiceResult<WithCookie<Created<SessionView>>> {
    let Json(body) = input.body;
    let request = AcceptInvitationRequest {
        token: body.token,
        password: body.password,
        first_name: body.first_name,
        last_name: body.last_name,
        client: Some((&call.client).into()),
    };
    let signed_in = call.services.accounts.clone().accept_invitation(request).await?.into_inner();
    Ok(created(begun(&call, signed_in), "Invitation accepted; signed in"))
}

async fn reset(call: Call, input: Input<Nothing, Nothing, Json<Reset>>) -> ServiceResult<SignInAnswer> {
    let Json(body) = input.body;
    let request =
        ResetPasswordRequest { token: body.token, password: body.password, client: Some((&call.client).into()) };
    let signed_in = call.services.accounts.clone().reset_password(request).await?.into_inner();
    Ok(SignInAnswer::of(&call, signed_in))
}

async fn forgot(
    call: Call,
    input: Input<Nothing, Nothing, Json<Forgot>>,
) -> ServiceResult<Accepted<ResetRequestedView>> {
    let Json(body) = input.body;
    // Counted whether or not the address has an account, and never given back: each request may
    // send an e-mail.
    let _counted = call.gate.resets.reserve(&body.email, &call.client.ip).await?;
    let request = RequestPasswordResetRequest {
        email: body.email.clone(),
        link_base: call.public_base.clone(),
        client: Some((&call.client).into()),
    };
    call.services.accounts.clone().request_password_reset(request).await?;
    let view = ResetRequestedView { email: body.email };
    Ok(Accepted::new(view, "If an account uses this address, a link to reset its password is on its way"))
}

async fn invitation(call: Call, input: Input<InvitationToken>) -> ServiceResult<Data<InvitationPreviewView>> {
    let request = InvitationTokenRequest { token: input.path.token };
    let preview = call.services.accounts.clone().describe_invitation(request).await?.into_inner();
    Ok(Data::new(InvitationPreviewView::from(&preview)))
}

pub(super) fn session_token(call: &Call) -> ServiceResult<&str> {
    call.principal.session().and(call.session_token.as_deref()).ok_or_else(|| {
        ServiceError::new(ErrorKind::Unauthorized, "Not signed in")
            .with_hint("This operation needs the session cookie of POST /v1/auth/sign-in, not an API key.")
    })
}

async fn session(call: Call, _: Input) -> ServiceResult<Data<SessionView>> {
    let token = session_token(&call)?;
    let session = call.principal.session().cloned().unwrap_or_default();
    Ok(Data::new(SessionView::new(&session, sessions::csrf_token(token))))
}

async fn sign_out(call: Call, _: Input) -> ServiceResult<WithCookie<Data<SignedOut>>> {
    let token = session_token(&call)?.to_owned();
    let request = EndSessionRequest { token_hash: hash_key(&token), client: Some((&call.client).into()) };
    let ended = call.services.accounts.clone().end_session(request).await?.into_inner().ended;
    call.gate.sessions.forget(&token);
    Ok(WithCookie {
        answer: Data::new(SignedOut { signed_out: ended }),
        cookie: sessions::clear_cookie(call.client.https),
    })
}

/// A session's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionPath {
    pub session_id: Id,
}

async fn sessions(call: Call, _: Input) -> ServiceResult<List<SessionItem>> {
    let request = ListSessionsRequest { token_hash: hash_key(session_token(&call)?) };
    let sessions = call.services.accounts.clone().list_sessions(request).await?.into_inner().sessions;
    Ok(List::new(sessions.iter().map(SessionItem::from).collect()))
}

/// Ends `session_id` of the caller's user, or every session but the caller's.
async fn end_sessions(call: &Call, session_id: String) -> ServiceResult<Data<SessionsEnded>> {
    let token = session_token(call)?;
    let request =
        EndUserSessionsRequest { token_hash: hash_key(token), session_id, client: Some((&call.client).into()) };
    let ended = call.services.accounts.clone().end_user_sessions(request).await?.into_inner().ended;
    // This gateway looks the caller's session up again at once, in case it was the one ended.
    call.gate.sessions.forget(token);
    Ok(Data::new(SessionsEnded { ended }))
}

async fn end_session(call: Call, input: Input<SessionPath>) -> ServiceResult<Data<SessionsEnded>> {
    end_sessions(&call, input.path.session_id.into_string()).await
}

async fn end_other_sessions(call: Call, _: Input) -> ServiceResult<Data<SessionsEnded>> {
    end_sessions(&call, String::new()).await
}

async fn change_password(
    call: Call,
    input: Input<Nothing, Nothing, Json<ChangePassword>>,
) -> ServiceResult<WithCookie<Data<SessionView>>> {
    let Json(body) = input.body;
    let token = session_token(&call)?.to_owned();
    // Guessing the current password from a stolen session is held to the sign-in throttle.
    let email = call.principal.session().and_then(|session| session.user.as_ref()).map_or("", |user| &user.email);
    let throttle = call.gate.throttle.clone();
    let reservation = throttle.reserve(email, &call.client.ip).await?;
    let request = ChangePasswordRequest {
        token_hash: hash_key(&token),
        current_password: body.current_password,
        new_password: body.new_password,
        client: Some((&call.client).into()),
    };
    let signed_in = match call.services.accounts.clone().change_password(request).await {
        Ok(signed_in) => signed_in.into_inner(),
        Err(status) => {
            let error = ServiceError::from_status(&status);
            if !error.details.iter().any(|violation| violation.field == "currentPassword") {
                throttle.succeeded(reservation).await;
            }
            return Err(error);
        }
    };
    throttle.succeeded(reservation).await;
    call.gate.sessions.forget(&token);
    // Listed even when there is none: the answer says that no passkey signs in without it.
    let passkeys = signed_in.passkeys.clone();
    let mut begun = begun(&call, signed_in);
    begun.answer = begun.answer.with_passkeys(&passkeys);
    Ok(data(begun))
}
