//! Trust, second round (issue 53), as an attacker holding a stolen cookie, a mailbox, or only
//! an address would probe a person's account: their own security is theirs at every role; a
//! password reset does not skip their second factor; factors and sessions change only after a
//! recent sign-in; links end when a newer one is made and when the password or address
//! changes; answers tell no one who has an account; mail caps hold whatever the client; and
//! TOTP secrets are sealed at rest.

use std::time::Duration;

use serde_json::json;

use crate::accounts::{PASSWORD, answers_within, browser, owner, sign_in, token_of};
use crate::common::{Api, Redis, Response, Stack};
use crate::trust::{person, totp_code, unix_now};

const NEW_PASSWORD: &str = "another horse battery staple";

/// Sets up an authenticator app for the person of `api`: its secret, the step the confirming
/// code was made at (the next code must be of a later step), and the recovery codes.
async fn with_authenticator(api: &Api) -> (String, u64, Vec<String>) {
    let enrolment = api.post("/auth/second-factors/totp", json!({})).await;
    let secret = enrolment.expect(201)["data"]["secret"].as_str().expect("a secret").to_owned();
    let now = unix_now();
    let confirmed = api.post("/auth/second-factors/totp/confirm", json!({ "code": totp_code(&secret, now) })).await;
    let codes = serde_json::from_value(confirmed.expect(200)["data"]["codes"].clone()).expect("recovery codes");
    (secret, now, codes)
}

/// The token of a password-reset link for `email`, as an operator (or the mailbox) has it.
async fn reset_token(stack: &Stack, email: &str) -> String {
    token_of(&stack.admin(&["reset-link", "--email", email]).await["url"])
}

async fn reset(stack: &Stack, token: &str, password: &str) -> Response {
    stack.anonymous().post("/auth/reset", json!({ "token": token, "password": password })).await
}

/// Finding 0: a viewer (and every other role) sets up and removes their own factors, changes
/// their own password and ends their own sessions; keys never reach a person's account.
#[tokio::test]
async fn a_persons_own_security_is_theirs_at_every_role() {
    let stack = Stack::start().await;
    let team = stack.team("Own accounts", false, 0).await;
    let first = owner(&stack, &team.id, "ada@own.example").await;
    for role in ["owner", "admin", "member", "viewer"] {
        let email = format!("{role}@own.example");
        let me = person(&stack, &first, &email, role).await;
        let elsewhere = browser(&stack, &sign_in(&stack, &email, PASSWORD).await);
        for path in ["/auth/session", "/auth/second-factors", "/auth/sessions"] {
            me.get(path).await.expect(200);
        }
        let options = me.post("/auth/second-factors/passkeys/options", json!({})).await;
        assert_eq!(options.status, 200, "{role}: {}", options.text);
        let (_, _, codes) = with_authenticator(&me).await;
        assert_eq!(codes.len(), 10, "{role}");
        answers_within(401, "a session of the person from before their new factor", || elsewhere.get("/me")).await;
        me.post("/auth/second-factors/recovery-codes", json!({})).await.expect(200);
        me.delete("/auth/second-factors/totp").await.expect(200);
        me.post("/auth/reauthenticate", json!({ "password": PASSWORD })).await.expect(200);
        let no_passkey = me.post("/auth/reauthenticate/passkey-options", json!({})).await;
        assert_eq!(no_passkey.error_code(409), "CONFLICT", "{role}: not refused by role but for having no passkey");
        let laptop = browser(&stack, &sign_in(&stack, &email, PASSWORD).await);
        let sessions = me.get("/auth/sessions").await.expect(200)["data"].clone();
        let other = sessions.as_array().unwrap().iter().find(|s| s["current"] == false).expect("the laptop's session");
        me.delete(&format!("/auth/sessions/{}", other["id"].as_str().unwrap())).await.expect(200);
        answers_within(401, "the laptop's ended session", || laptop.get("/me")).await;
        me.post("/auth/sessions/end-others", json!({})).await.expect(200);
        me.patch("/me", json!({ "lastName": "Changed" })).await.expect(200);
        let moved =
            me.post("/me/email", json!({ "email": format!("{role}.new@own.example"), "password": PASSWORD })).await;
        assert_eq!(moved.status, 202, "{role}: {}", moved.text);
        let change = json!({ "currentPassword": PASSWORD, "newPassword": NEW_PASSWORD });
        let changed = me.post("/auth/password", change).await;
        assert_eq!(changed.status, 200, "{role}: {}", changed.text);
        assert_eq!(changed.body["data"]["passkeys"], json!([]), "{role}: the answer says no passkey signs in alone");
        let me = browser(&stack, &changed);
        me.post("/auth/sign-out", json!({})).await.expect(200);
    }
    let key = stack.client(&team.key);
    for path in ["/auth/second-factors/totp", "/auth/sessions/end-others", "/auth/reauthenticate"] {
        assert_eq!(key.post(path, json!({})).await.error_code(401), "UNAUTHORIZED", "{path}");
    }
}

/// Finding 1: whoever reads a person's mailbox resets the password, and still meets their
/// second factor before any session. And (the third review) whoever phished the old password
/// loses the sign-in it began once the password is reset or changed.
#[tokio::test]
async fn a_password_reset_asks_for_the_second_factor() {
    let stack = Stack::start().await;
    let team = stack.team("Reset guarded", false, 0).await;
    let ada = owner(&stack, &team.id, "ada@reset.example").await;
    let (secret, confirmed_at, recovery) = with_authenticator(&ada).await;
    // Whoever phished the old password holds a sign-in that waits for the factor.
    let phished = pending_sign_in(&stack, "ada@reset.example", PASSWORD).await;

    let token = reset_token(&stack, "ada@reset.example").await;
    let answered = reset(&stack, &token, NEW_PASSWORD).await;
    let challenge = answered.expect(202)["data"].clone();
    assert!(answered.header("set-cookie").is_none(), "no session before the second factor: {}", answered.text);
    assert_eq!(challenge["methods"], json!(["totp", "recovery_code"]));
    assert_eq!(reset(&stack, &token, NEW_PASSWORD).await.status, 404, "the link is used");
    answers_within(401, "the person's sessions, ended by the reset", || ada.get("/me")).await;

    let challenge = challenge["challenge"].as_str().expect("a challenge").to_owned();
    assert_eq!(finish_sign_in(&stack, &challenge, "123456").await.error_code(401), "UNAUTHORIZED");
    // The sign-in begun with the old password ended with it, whatever code comes.
    let stale = finish_sign_in(&stack, &phished, &totp_code(&secret, confirmed_at + 30)).await;
    assert_eq!(stale.error_code(401), "UNAUTHORIZED", "a sign-in of the old password outlived the reset");
    let signed_in = finish_sign_in(&stack, &challenge, &totp_code(&secret, confirmed_at + 30)).await;
    let session = browser(&stack, &signed_in);
    session.post("/api-keys", json!({ "name": "after the reset" })).await.expect(201);
    // The new password is the person's now, and it still asks for the factor.
    assert_eq!(sign_in(&stack, "ada@reset.example", NEW_PASSWORD).await.status, 202);

    // A password change ends the sign-ins still waiting, and so does signing out everywhere
    // else: neither becomes a session later, with the factor or not.
    let phished = pending_sign_in(&stack, "ada@reset.example", NEW_PASSWORD).await;
    let change = json!({ "currentPassword": NEW_PASSWORD, "newPassword": "a third horse battery" });
    let session = browser(&stack, &session.post("/auth/password", change).await);
    assert_eq!(finish_sign_in(&stack, &phished, &recovery[0]).await.error_code(401), "UNAUTHORIZED");
    let phished = pending_sign_in(&stack, "ada@reset.example", "a third horse battery").await;
    let proved = session.post("/auth/reauthenticate", json!({ "code": recovery[1] })).await;
    proved.expect(200);
    session.post("/auth/sessions/end-others", json!({})).await.expect(200);
    assert_eq!(finish_sign_in(&stack, &phished, &recovery[2]).await.error_code(401), "UNAUTHORIZED");
    // The recovery codes offered to the ended sign-ins were not spent by them.
    let pending = pending_sign_in(&stack, "ada@reset.example", "a third horse battery").await;
    finish_sign_in(&stack, &pending, &recovery[0]).await.expect(200);

    // Without a second factor, a reset signs in at once, as before.
    let plain = stack.team("Reset plain", false, 0).await;
    owner(&stack, &plain.id, "bo@reset.example").await;
    let token = reset_token(&stack, "bo@reset.example").await;
    let plain_reset = reset(&stack, &token, NEW_PASSWORD).await;
    browser(&stack, &plain_reset).get("/me").await.expect(200);
}

/// The token of a sign-in that waits for the person's second factor.
async fn pending_sign_in(stack: &Stack, email: &str, password: &str) -> String {
    let answered = sign_in(stack, email, password).await;
    answered.expect(202)["data"]["challenge"].as_str().expect("a challenge").to_owned()
}

async fn finish_sign_in(stack: &Stack, challenge: &str, code: &str) -> Response {
    stack.anonymous().post("/auth/sign-in/verify", json!({ "challenge": challenge, "code": code })).await
}

async fn sends(api: &Api, method: &str, path: &str) -> Response {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let request = api.request(method.clone(), path);
    api.send(if method == reqwest::Method::POST { request.json(&json!({})) } else { request }).await
}

/// Waits out the stack's re-authentication window (2 s here): past it, a session is no longer
/// recently authenticated.
async fn let_the_sign_in_age() {
    tokio::time::sleep(Duration::from_millis(2_500)).await;
}

/// Finding 2: a session that has not proved who its person is lately (a stolen cookie, one
/// opened long ago) changes neither their factors nor their sessions until it does, and then
/// with the person's strongest proof.
async fn factors_need_a_recent_sign_in(stack: &Stack) {
    let team = stack.team("Recent", false, 0).await;
    let ada = owner(stack, &team.id, "ada@recent.example").await;
    let stolen = browser(stack, &sign_in(stack, "ada@recent.example", PASSWORD).await);
    let session_id = ada.get("/auth/sessions").await.expect(200)["data"]
        .as_array()
        .and_then(|sessions| sessions.iter().find(|s| s["current"] == true))
        .map(|s| s["id"].as_str().expect("an id").to_owned())
        .expect("the first session");
    let fresh = stolen.get("/auth/session").await.expect(200)["data"]["reauthenticateAfter"].clone();
    assert!(fresh.is_string(), "{fresh}");
    let_the_sign_in_age().await;
    for (method, path) in [
        ("POST", "/auth/second-factors/totp"),
        ("POST", "/auth/second-factors/passkeys/options"),
        ("POST", "/auth/sessions/end-others"),
        ("DELETE", &format!("/auth/sessions/{session_id}")),
    ] {
        let refused = sends(&stolen, method, path).await;
        assert_eq!(refused.error_code(403), "REAUTHENTICATION_REQUIRED", "{method} {path}");
    }
    // Reads stay open, and the person's other session was not touched.
    stolen.get("/auth/second-factors").await.expect(200);
    ada.get("/me").await.expect(200);

    // Without a second factor, the password proves it; a wrong one is refused and audited.
    assert_eq!(stolen.post("/auth/reauthenticate", json!({})).await.fields(), ["password"]);
    assert_eq!(
        stolen.post("/auth/reauthenticate", json!({ "password": "not it at all" })).await.fields(),
        ["password"]
    );
    let proved = stolen.post("/auth/reauthenticate", json!({ "password": PASSWORD })).await;
    assert_eq!(proved.expect(200)["data"]["user"]["email"], "ada@recent.example", "{}", proved.text);
    assert_ne!(proved.body["data"]["reauthenticateAfter"], fresh);
    let (secret, confirmed_at, codes) = with_authenticator(&stolen).await;
    // The factor ends every other session of the person.
    answers_within(401, "the person's other session", || ada.get("/me")).await;

    // With a factor, the password alone is no longer proof enough, not even by changing it:
    // the session that a password change begins is no more recent than the one that asked.
    let_the_sign_in_age().await;
    assert_eq!(stolen.delete("/auth/second-factors/totp").await.error_code(403), "REAUTHENTICATION_REQUIRED");
    let change = json!({ "currentPassword": PASSWORD, "newPassword": NEW_PASSWORD });
    let stolen = browser(stack, &stolen.post("/auth/password", change).await);
    assert_eq!(stolen.delete("/auth/second-factors/totp").await.error_code(403), "REAUTHENTICATION_REQUIRED");
    assert_eq!(
        stolen.post("/auth/second-factors/passkeys/options", json!({})).await.error_code(403),
        "REAUTHENTICATION_REQUIRED"
    );
    // Nor does it move the account to another mailbox.
    let moved = stolen.post("/me/email", json!({ "email": "thief@elsewhere.example", "password": NEW_PASSWORD })).await;
    assert_eq!(moved.error_code(403), "REAUTHENTICATION_REQUIRED");
    assert_eq!(stolen.post("/auth/reauthenticate", json!({ "password": NEW_PASSWORD })).await.fields(), ["code"]);
    assert_eq!(stolen.post("/auth/reauthenticate", json!({ "code": "000000" })).await.fields(), ["code"]);
    let by_code = stolen.post("/auth/reauthenticate", json!({ "code": totp_code(&secret, confirmed_at + 30) })).await;
    by_code.expect(200);
    let renewed = stolen.post("/auth/second-factors/recovery-codes", json!({})).await;
    assert_eq!(renewed.expect(200)["data"]["codes"].as_array().map(Vec::len), Some(10));
    let_the_sign_in_age().await;
    // An old recovery code was replaced; a new one proves it (once).
    let new_codes: Vec<String> = serde_json::from_value(renewed.body["data"]["codes"].clone()).unwrap();
    assert_eq!(stolen.post("/auth/reauthenticate", json!({ "code": codes[0] })).await.fields(), ["code"]);
    stolen.post("/auth/reauthenticate", json!({ "code": new_codes[0] })).await.expect(200);
    stolen.delete("/auth/second-factors/totp").await.expect(200);

    let log = stolen.get("/audit-log?limit=100").await.expect(200)["data"].clone();
    let actions: Vec<&str> = log.as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    for action in ["auth.reauthenticated", "auth.reauthentication_failed", "auth.second_factor_failed"] {
        assert!(actions.contains(&action), "{action} missing from {actions:?}");
    }
}

#[tokio::test]
async fn changes_to_factors_and_sessions_need_a_recent_sign_in() {
    factors_need_a_recent_sign_in(&Stack::start_with(&[("SWITCHBOARD_REAUTH_AFTER", "2s")]).await).await;
}

#[tokio::test]
async fn changes_to_factors_need_a_recent_sign_in_on_postgres() {
    let env = [("SWITCHBOARD_REAUTH_AFTER", "2s")];
    let Some(stack) = Stack::serve_on_postgres(&["identity", "agents"], &env).await else {
        eprintln!("NOTE: changes_to_factors_need_a_recent_sign_in_on_postgres skipped: no TEST_DATABASE_URL");
        return;
    };
    factors_need_a_recent_sign_in(&stack).await;
}

/// Finding 4: a reset link lives until a newer one is made, the password changes (by reset or
/// by the person), or the address changes.
#[tokio::test]
async fn reset_links_end_with_a_newer_link_a_new_password_or_a_new_address() {
    let (stack, dir, mut sink) = crate::mail::stack_with_sink().await;
    let maildir = dir.path().join("mail");
    let team = stack.team("Links", false, 0).await;
    let ada = owner(&stack, &team.id, "ada@links.example").await;

    let older = reset_token(&stack, "ada@links.example").await;
    let newer = reset_token(&stack, "ada@links.example").await;
    assert_eq!(reset(&stack, &older, NEW_PASSWORD).await.status, 404, "ended by the newer link");

    let change = json!({ "currentPassword": PASSWORD, "newPassword": NEW_PASSWORD });
    let ada = browser(&stack, &ada.post("/auth/password", change).await);
    assert_eq!(reset(&stack, &newer, "a third horse battery").await.status, 404, "ended by the password change");

    let to_old_address = reset_token(&stack, "ada@links.example").await;
    let asked = ada.post("/me/email", json!({ "email": "ada@moved.example", "password": NEW_PASSWORD })).await;
    asked.expect(202);
    let mail = crate::mail::received(&maildir, "/confirm-email/").await;
    let body = mail.replace("=\r\n", "").replace("=\n", "");
    let link = body.split_whitespace().find(|word| word.contains("/confirm-email/")).expect("the link");
    let confirmed = stack.anonymous().post("/auth/confirm-email", json!({ "token": link.rsplit('/').next() })).await;
    confirmed.expect(200);
    assert_eq!(reset(&stack, &to_old_address, "a third horse battery").await.status, 404, "ended by the move");

    let current = reset_token(&stack, "ada@moved.example").await;
    reset(&stack, &current, "a third horse battery").await.expect(200);
    assert_eq!(reset(&stack, &current, "a fourth horse battery").await.status, 404, "used once");
    let _ = sink.kill().await;
}

/// Finding 7: neither an e-mail change nor an invitation tells the caller that another
/// account uses an address; a reset request is answered before the address is looked up.
#[tokio::test]
async fn answers_tell_no_one_who_has_an_account() {
    let (stack, dir, mut sink) = crate::mail::stack_with_sink().await;
    let maildir = dir.path().join("mail");
    let ours = stack.team("Curious", false, 0).await;
    let theirs = stack.team("Private", false, 0).await;
    let ada = owner(&stack, &ours.id, "ada@curious.example").await;
    owner(&stack, &theirs.id, "bea@private.example").await;

    let to = |email: &str| json!({ "email": email, "password": PASSWORD });
    let taken = ada.post("/me/email", to("Bea@private.example")).await;
    let free = ada.post("/me/email", to("nobody@private.example")).await;
    let shape = |response: &Response| {
        let data = response.expect(202)["data"].clone();
        (
            response.body["message"].clone(),
            data["mailed"].clone(),
            data.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
        )
    };
    assert_eq!(shape(&taken), shape(&free), "{} / {}", taken.text, free.text);
    assert_eq!(taken.body["data"]["email"], "bea@private.example");
    // The address's owner is told, and gets no link that would move anything.
    let notice = crate::mail::received(&maildir, "uses this address already").await;
    assert!(notice.contains("To: bea@private.example"), "{notice}");
    assert!(!notice.contains("/confirm-email/"), "{notice}");

    let invite = |email: &str| ada.post("/members/invitations", json!({ "email": email, "role": "member" }));
    let invited_taken = invite("bea@private.example").await;
    let invited_free = invite("cy@private.example").await;
    assert_eq!(invited_taken.status, 201, "{}", invited_taken.text);
    let keys = |response: &Response| response.body["data"].as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
    assert_eq!(keys(&invited_taken), keys(&invited_free));
    // Only accepting it tells, whoever holds the link: one address signs in to one team.
    let accept = json!({
        "token": token_of(&invited_taken.body["data"]["url"]), "password": PASSWORD, "firstName": "B", "lastName": "B",
    });
    assert_eq!(stack.anonymous().post("/auth/accept-invite", accept).await.status, 409);

    let visitor = stack.anonymous();
    let known = visitor.post("/auth/forgot", json!({ "email": "bea@private.example" })).await;
    let unknown = visitor.post("/auth/forgot", json!({ "email": "zed@private.example" })).await;
    let said = |response: &Response| (response.status, response.body["message"].clone(), keys(response));
    assert_eq!(said(&known), said(&unknown), "{} / {}", known.text, unknown.text);
    let _ = sink.kill().await;
}

/// Finding 8: a mailbox gets at most 5 reset mails, and 5 e-mail confirmation mails, in 15
/// minutes, however many client addresses ask (counted in Redis, as every gateway does).
#[tokio::test]
async fn mail_caps_hold_whatever_client_asks() {
    let redis = Redis::start().await;
    let url = redis.url();
    let env = [
        ("REDIS_URL", url.as_str()),
        ("SWITCHBOARD_TRUSTED_PROXIES", "127.0.0.0/8"),
        ("SWITCHBOARD_RATE_LIMIT_AUTH", "1000"),
    ];
    let stack = Stack::start_with(&env).await;
    let team = stack.team("Caps", false, 0).await;
    let ada = owner(&stack, &team.id, "ada@caps.example").await;
    let visitor = stack.anonymous();
    let mut answered: Vec<u16> = Vec::new();
    let mut moves: Vec<u16> = Vec::new();
    for client in 0..8 {
        let from = format!("203.0.113.{}", client + 1);
        for _ in 0..3 {
            let forgot = visitor.request(reqwest::Method::POST, "/auth/forgot").header("X-Forwarded-For", &from);
            answered.push(visitor.send(forgot.json(&json!({ "email": "ada@caps.example" }))).await.status);
            let body = json!({ "email": "target@caps.example", "password": PASSWORD });
            let moved = ada.request(reqwest::Method::POST, "/me/email").header("X-Forwarded-For", &from);
            moves.push(ada.send(moved.json(&body)).await.status);
        }
    }
    for (what, statuses) in [("reset requests", &answered), ("e-mail changes", &moves)] {
        assert!(statuses.iter().all(|s| matches!(s, 202 | 429)), "{what}: {statuses:?}");
        assert_eq!(statuses.iter().filter(|s| **s == 202).count(), 5, "{what}: {statuses:?}");
    }
}

/// Finding 10: a TOTP secret is sealed in the identity database, which only its owner reads;
/// its keys rotate without locking anyone out; recovery codes carry 120 bits.
#[tokio::test]
async fn totp_secrets_are_sealed_at_rest_and_their_keys_rotate() {
    let first = crate::common::ENCRYPTION_KEYS;
    let stack = Stack::start_with(&[("SWITCHBOARD_ENCRYPTION_KEYS", first)]).await;
    let team = stack.team("Sealed", false, 0).await;
    let ada = owner(&stack, &team.id, "ada@sealed.example").await;
    let (secret, confirmed_at, codes) = with_authenticator(&ada).await;
    assert!(codes.iter().all(|code| code.len() == 27 && code.split('-').count() == 4), "{codes:?}");

    let database = stack.data_dir.path().join("identity.db");
    let stored = stored_secrets(&database).await;
    assert_eq!(stored.len(), 1);
    assert!(stored[0].starts_with("sealed:test:"), "{stored:?}");
    assert!(!stored[0].contains(&secret), "{stored:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&database).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the identity database is its owner's alone");

    // A new key first, the old one after it: the secret is sealed again at start.
    let Stack { process, data_dir, .. } = stack;
    assert_eq!(process.terminate().await, Some(0));
    let rotated = format!("next:{},{first}", base64_key(b"another-key-of-exactly-32-bytes!"));
    let stack = Stack::start_in(data_dir, &[("SWITCHBOARD_ENCRYPTION_KEYS", &rotated)]).await;
    assert!(stored_secrets(&database).await[0].starts_with("sealed:next:"));
    let Stack { process, data_dir, .. } = stack;
    assert_eq!(process.terminate().await, Some(0));
    // The old key can go: the person still signs in with their app.
    let only_new = format!("next:{}", base64_key(b"another-key-of-exactly-32-bytes!"));
    let stack = Stack::start_in(data_dir, &[("SWITCHBOARD_ENCRYPTION_KEYS", &only_new)]).await;
    let challenge = sign_in(&stack, "ada@sealed.example", PASSWORD).await.expect(202)["data"]["challenge"].clone();
    let body = json!({ "challenge": challenge, "code": totp_code(&secret, confirmed_at + 30) });
    stack.anonymous().post("/auth/sign-in/verify", body).await.expect(200);
}

fn base64_key(bytes: &[u8; 32]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The `secret` column of every TOTP factor, as the identity database holds it.
async fn stored_secrets(database: &std::path::Path) -> Vec<String> {
    use sqlx::ConnectOptions;
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(database).read_only(true);
    let mut connection = options.connect().await.expect("the identity database opens");
    let rows: Vec<(String,)> =
        sqlx::query_as("SELECT secret FROM totp_factors").fetch_all(&mut connection).await.expect("read");
    rows.into_iter().map(|(secret,)| secret).collect()
}
