//! People who sign in, over HTTP as a browser would: invitations, sessions in a cookie, CSRF,
//! roles, throttled sign-ins, password changes and resets, and the audit log.

use std::time::Duration;

use serde_json::{Value, json};

use crate::auth::subteam_body;
use crate::common::{Api, Response, Stack};

pub(crate) const PASSWORD: &str = "correct horse battery";

/// The session token a response sets, after checking the cookie's attributes.
pub(crate) fn cookie_token(response: &Response) -> String {
    let cookie = response.header("set-cookie").unwrap_or_else(|| panic!("no Set-Cookie: {}", response.text));
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(attribute), "{attribute} missing from {cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain http is not Secure: {cookie}");
    let token = cookie.split(';').next().and_then(|pair| pair.split_once('=')).map(|(_, value)| value.to_owned());
    let token = token.expect("a name=value cookie");
    assert!(token.len() >= 43, "256 bits at least: {token}");
    token
}

/// A browser signed in by `response` (a sign-in, an accepted invitation, a reset).
pub(crate) fn browser(stack: &Stack, response: &Response) -> Api {
    let token = cookie_token(response);
    let csrf = response.body["data"]["csrfToken"].as_str().expect("csrfToken").to_owned();
    Api::signed_in(&stack.base, &token, Some(&csrf))
}

pub(crate) fn token_of(url: &Value) -> String {
    url.as_str().and_then(|url| url.rsplit('/').next()).expect("a link").to_owned()
}

/// The first owner of a team, let in by `switchboard admin invite`.
pub(crate) async fn owner(stack: &Stack, team_id: &str, email: &str) -> Api {
    let invitation = stack.admin(&["invite", "--team", team_id, "--email", email]).await;
    assert_eq!(invitation["role"], "owner");
    let accept =
        json!({ "token": token_of(&invitation["url"]), "password": PASSWORD, "firstName": "Ada", "lastName": "Owner" });
    let accepted = stack.anonymous().post("/auth/accept-invite", accept).await;
    accepted.expect(201);
    browser(stack, &accepted)
}

pub(crate) async fn sign_in(stack: &Stack, email: &str, password: &str) -> Response {
    stack.anonymous().post("/auth/sign-in", json!({ "email": email, "password": password })).await
}

/// Polls `request` until it answers `status`, for at most 10 s (the gateway caches sessions 2 s).
pub(crate) async fn answers_within<F, Fut>(status: u16, what: &str, request: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let wait = async {
        loop {
            if request().await.status == status {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("{what} did not answer {status} within 10 s"));
}

#[tokio::test]
async fn an_invited_owner_signs_in_makes_a_key_and_signs_out() {
    invited_owner(&Stack::start().await).await;
}

/// The same, and the roles, with identity on PostgreSQL behind a `serve gateway`.
#[tokio::test]
async fn people_and_sessions_on_postgres() {
    let Some(stack) = Stack::serve_on_postgres(&["identity", "agents"], &[]).await else {
        eprintln!("NOTE: people_and_sessions_on_postgres skipped: no TEST_DATABASE_URL");
        return;
    };
    invited_owner(&stack).await;
    roles(&stack).await;
    other_teams(&stack).await;
}

async fn invited_owner(stack: &Stack) {
    let team = stack.team("Acme", false, 10).await;
    let invitation = stack.admin(&["invite", "--team", &team.id, "--email", "Ada@Acme.example"]).await;
    assert!(invitation["url"].as_str().is_some_and(|url| url.contains("/invite/")), "{invitation}");
    let token = token_of(&invitation["url"]);
    let visitor = stack.anonymous();

    // The password rules, with the field named: long enough, and not easy to guess (a common
    // password, or the person's own address), with advice in the detail's hint.
    for weak in ["short", "Password123", "ada@acme.example", "AdaLovelace"] {
        let refused = visitor
            .post(
                "/auth/accept-invite",
                json!({ "token": token, "password": weak, "firstName": "Ada", "lastName": "Lovelace" }),
            )
            .await;
        assert_eq!(refused.error_code(400), "VALIDATION_ERROR");
        assert_eq!(refused.fields(), vec!["password"], "{}", refused.text);
        if weak != "short" {
            assert_eq!(refused.body["details"][0]["message"], "is too easy to guess", "{weak}");
            assert!(
                refused.body["details"][0]["hint"].as_str().is_some_and(|hint| !hint.is_empty()),
                "{}",
                refused.text
            );
        }
    }
    let accept = json!({ "token": token, "password": PASSWORD, "firstName": "Ada", "lastName": "Lovelace" });
    let accepted = visitor.post("/auth/accept-invite", accept.clone()).await;
    let session = accepted.expect(201)["data"].clone();
    assert_eq!((session["role"].as_str(), session["team"]["id"].as_str()), (Some("owner"), Some(team.id.as_str())));
    assert_eq!(session["user"]["email"], "ada@acme.example");
    assert_eq!(visitor.post("/auth/accept-invite", accept).await.status, 404, "an invitation is used once");
    let ada = browser(stack, &accepted);

    // The session reads like a key, and says who is signed in.
    let me = ada.get("/me").await.expect(200)["data"].clone();
    assert_eq!(me["team"]["id"], team.id.as_str());
    assert_eq!(me["user"]["firstName"], "Ada");
    assert!(me.get("apiKey").is_none(), "{me}");
    assert_eq!(ada.get("/auth/session").await.expect(200)["data"]["csrfToken"], session["csrfToken"]);

    // Writes with the cookie need the CSRF token.
    let no_csrf = Api::signed_in(&stack.base, &cookie_token(&accepted), None);
    assert_eq!(no_csrf.post("/api-keys", json!({ "name": "ci" })).await.error_code(403), "FORBIDDEN");
    assert_eq!(no_csrf.get("/api-keys").await.status, 200, "reads need none");
    let made = ada.post("/api-keys", json!({ "name": "ci" })).await;
    let made = made.expect(201)["data"].clone();
    assert_eq!(made["createdBy"]["type"], "user");
    assert_eq!(made["createdBy"]["id"], session["user"]["id"]);
    let key = made["key"].as_str().expect("the key, once");
    assert_eq!(stack.client(key).get("/me").await.expect(200)["data"]["team"]["id"], team.id.as_str());

    // Signed out: the cookie is cleared and the session is refused at once by this gateway.
    let out = ada.post("/auth/sign-out", json!({})).await;
    assert_eq!(out.expect(200)["data"]["signedOut"], true);
    assert!(out.header("set-cookie").is_some_and(|c| c.contains("Max-Age=0")), "{:?}", out.headers);
    assert_eq!(ada.get("/auth/session").await.error_code(401), "UNAUTHORIZED");
    assert_eq!(ada.get("/me").await.status, 401);

    // Wrong e-mail and wrong password: one answer.
    let unknown = sign_in(stack, "nobody@acme.example", PASSWORD).await;
    let wrong = sign_in(stack, "ada@acme.example", "not the password").await;
    assert_eq!((unknown.status, wrong.status), (401, 401));
    assert_eq!(unknown.body, wrong.body);
    assert_eq!(wrong.body["error"], "Invalid email or password");
    // A fresh token at every sign-in, the e-mail compared ignoring case.
    let again = sign_in(stack, "ADA@acme.example", PASSWORD).await;
    again.expect(200);
    assert_ne!(cookie_token(&again), cookie_token(&accepted));
    browser(stack, &again).get("/me").await.expect(200);
}

#[tokio::test]
async fn roles_decide_what_a_member_may_do() {
    roles(&Stack::start().await).await;
}

async fn roles(stack: &Stack) {
    let team = stack.team("Roles", false, 10).await;
    let owner = owner(stack, &team.id, "owner@roles.example").await;

    let invited = owner.post("/members/invitations", json!({ "email": "mia@roles.example", "role": "member" })).await;
    let invitation = invited.expect(201)["data"].clone();
    assert_eq!(invitation["role"], "member");
    let accept =
        json!({ "token": token_of(&invitation["url"]), "password": PASSWORD, "firstName": "Mia", "lastName": "M" });
    let mia = browser(stack, &stack.anonymous().post("/auth/accept-invite", accept).await);

    // A member works with the data, not with keys, members, webhooks or the audit log.
    mia.get("/agents").await.expect(200);
    mia.post("/agents", json!({ "name": "Front desk", "type": "phone" })).await.expect(201);
    for path in ["/api-keys", "/members", "/webhooks", "/audit-log"] {
        assert_eq!(mia.get(path).await.error_code(403), "FORBIDDEN", "{path}");
    }
    assert_eq!(mia.post("/api-keys", json!({ "name": "x" })).await.status, 403);

    let members = owner.get("/members").await.expect(200)["data"].clone();
    let mia_id = members.as_array().unwrap().iter().find(|m| m["firstName"] == "Mia").expect("Mia")["id"].clone();
    let mia_path = format!("/members/{}", mia_id.as_str().unwrap());
    assert!(members.as_array().unwrap().iter().all(|m| m["canSignIn"] == true), "{members}");

    // A viewer only reads.
    owner.put(&mia_path, json!({ "role": "viewer" })).await.expect(200);
    answers_within(403, "a viewer's write", || mia.post("/agents", json!({ "name": "Nope", "type": "phone" }))).await;
    mia.get("/agents").await.expect(200);

    // An admin manages keys and members, but not owners.
    owner.put(&mia_path, json!({ "role": "admin" })).await.expect(200);
    answers_within(200, "an admin's key list", || mia.get("/api-keys")).await;
    assert_eq!(mia.put(&mia_path, json!({ "role": "owner" })).await.error_code(403), "FORBIDDEN");
    assert_eq!(
        mia.post("/members/invitations", json!({ "email": "o2@roles.example", "role": "owner" })).await.status,
        403
    );
    let owner_id = members.as_array().unwrap().iter().find(|m| m["role"] == "owner").expect("owner")["id"].clone();
    let owner_path = format!("/members/{}", owner_id.as_str().unwrap());
    assert_eq!(mia.delete(&owner_path).await.status, 403);

    // A team keeps one owner; a removed member's sessions end.
    assert_eq!(owner.put(&owner_path, json!({ "role": "admin" })).await.error_code(409), "CONFLICT");
    assert_eq!(owner.put(&mia_path, json!({ "role": "chief" })).await.fields(), vec!["role"]);
    owner.delete(&mia_path).await.expect(200);
    answers_within(401, "a removed member's session", || mia.get("/me")).await;
    assert_eq!(owner.delete(&mia_path).await.status, 404);
    assert_eq!(sign_in(stack, "mia@roles.example", PASSWORD).await.status, 401);

    // Invitations of people already in, or of addresses that sign in elsewhere.
    let again = owner.post("/members/invitations", json!({ "email": "OWNER@roles.example" })).await;
    assert_eq!(again.error_code(409), "CONFLICT");
    assert_eq!(owner.post("/members/invitations", json!({ "email": "not-an-email" })).await.fields(), vec!["email"]);
}

#[tokio::test]
async fn another_teams_people_and_keys_are_not_found() {
    other_teams(&Stack::start().await).await;
}

async fn other_teams(stack: &Stack) {
    let (one, two) = (stack.team("One", false, 10).await, stack.team("Two", false, 10).await);
    let one_owner = owner(stack, &one.id, "owner@one.example").await;
    let two_owner = owner(stack, &two.id, "owner@two.example").await;
    let two_members = two_owner.get("/members").await.expect(200)["data"].clone();
    let two_user = two_members[0]["id"].as_str().unwrap().to_owned();
    let two_key =
        stack.client(&two.key).get("/me").await.expect(200)["data"]["apiKey"]["id"].as_str().unwrap().to_owned();

    assert_eq!(one_owner.put(&format!("/members/{two_user}"), json!({ "role": "viewer" })).await.status, 404);
    assert_eq!(one_owner.delete(&format!("/members/{two_user}")).await.status, 404);
    assert_eq!(one_owner.delete(&format!("/api-keys/{two_key}")).await.status, 404);
    let listed = one_owner.get("/members").await.expect(200)["data"].clone();
    assert!(listed.as_array().unwrap().iter().all(|m| m["id"] != two_user.as_str()), "{listed}");
    // A session of a team that owns no agency cannot reach another team with teamId.
    assert_eq!(one_owner.get(&format!("/agents?teamId={}", two.id)).await.status, 403);
    assert_eq!(
        two_owner.get("/audit-log").await.expect(200)["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["target"] == "owner@one.example")
            .count(),
        0
    );
}

#[tokio::test]
async fn failed_sign_ins_are_throttled_per_email() {
    let stack = Stack::start().await;
    let team = stack.team("Throttle", false, 10).await;
    owner(&stack, &team.id, "t@throttle.example").await;
    for attempt in 0..10 {
        assert_eq!(sign_in(&stack, "t@throttle.example", "wrong password").await.status, 401, "attempt {attempt}");
    }
    let throttled = sign_in(&stack, "t@throttle.example", PASSWORD).await;
    assert_eq!(throttled.error_code(429), "RATE_LIMITED");
    let wait: u64 = throttled.header("retry-after").and_then(|v| v.parse().ok()).expect("Retry-After");
    assert!(wait > 0 && wait <= 15 * 60, "{wait}");
    // Another address's account is not held up.
    let other = stack.team("Other", false, 10).await;
    owner(&stack, &other.id, "o@throttle.example").await;
    sign_in(&stack, "o@throttle.example", PASSWORD).await.expect(200);

    // The audit log has the failures, filtered by action.
    let owner_session = browser(&stack, &sign_in(&stack, "o@throttle.example", PASSWORD).await);
    let own = owner_session.get("/audit-log?action=auth.signed_in").await.expect(200).clone();
    assert!(own["data"].as_array().unwrap().iter().all(|e| e["action"] == "auth.signed_in"), "{own}");
    assert!(own["pagination"]["totalCount"].as_u64().unwrap() >= 2, "{own}");
}

#[tokio::test]
async fn sessions_end_when_idle_and_when_the_password_changes() {
    sessions_end(&Stack::start_with(&[("SWITCHBOARD_SESSION_IDLE", "3s")]).await).await;
}

#[tokio::test]
async fn sessions_end_on_postgres() {
    let env = [("SWITCHBOARD_SESSION_IDLE", "3s")];
    let Some(stack) = Stack::serve_on_postgres(&["identity", "agents"], &env).await else {
        eprintln!("NOTE: sessions_end_on_postgres skipped: no TEST_DATABASE_URL");
        return;
    };
    sessions_end(&stack).await;
}

async fn sessions_end(stack: &Stack) {
    let team = stack.team("Idle", false, 10).await;
    let first = owner(stack, &team.id, "idle@idle.example").await;
    let second = browser(stack, &sign_in(stack, "idle@idle.example", PASSWORD).await);

    // A password change ends every session and begins one for the browser that changed it.
    let wrong =
        second.post("/auth/password", json!({ "currentPassword": "nope", "newPassword": "another fine phrase" })).await;
    assert_eq!(wrong.fields(), vec!["currentPassword"]);
    let changed = second
        .post("/auth/password", json!({ "currentPassword": PASSWORD, "newPassword": "another fine phrase" }))
        .await;
    changed.expect(200);
    let renewed = browser(stack, &changed);
    answers_within(401, "a session of the old password", || first.get("/me")).await;
    assert_eq!(second.get("/me").await.status, 401, "this gateway forgot the changing session at once");
    renewed.get("/me").await.expect(200);
    assert_eq!(sign_in(stack, "idle@idle.example", PASSWORD).await.status, 401);

    // Idle for longer than 3 s (the gateway's cache is 2 s): ended.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(renewed.get("/me").await.status, 401);

    // A reset link from the operator sets a new password and signs in.
    let link = stack.admin(&["reset-link", "--email", "idle@idle.example"]).await;
    let reset =
        stack.anonymous().post("/auth/reset", json!({ "token": token_of(&link["url"]), "password": PASSWORD })).await;
    browser(stack, &reset).get("/me").await.expect(200);
}

#[tokio::test]
async fn sign_up_is_closed_unless_opened() {
    let closed = Stack::start().await;
    let body = json!({ "email": "new@team.example", "password": PASSWORD, "firstName": "N", "lastName": "T", "teamName": "New" });
    assert_eq!(closed.anonymous().get("/auth/options").await.expect(200)["data"]["signUp"], "closed");
    assert_eq!(closed.anonymous().post("/auth/sign-up", body.clone()).await.error_code(403), "FORBIDDEN");

    let open = Stack::start_with(&[("SWITCHBOARD_SIGNUP", "open")]).await;
    assert_eq!(open.anonymous().get("/auth/options").await.expect(200)["data"]["signUp"], "open");
    let signed_up = open.anonymous().post("/auth/sign-up", body.clone()).await;
    assert_eq!(signed_up.expect(201)["data"]["role"], "owner");
    let me = browser(&open, &signed_up).get("/me").await.expect(200)["data"].clone();
    assert_eq!((me["team"]["name"].as_str(), me["credits"]["balance"].as_i64()), (Some("New"), Some(0)));
    assert_eq!(open.anonymous().post("/auth/sign-up", body).await.error_code(409), "CONFLICT");
}

#[tokio::test]
async fn an_agency_hands_a_new_client_the_portal_and_its_first_key() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let created = api.post("/agency/subteams", subteam_body("Client")).await.expect(201)["data"].clone();
    let subteam_id = created["id"].as_str().unwrap().to_owned();
    assert!(created["inviteUrl"].as_str().is_some_and(|url| url.contains("/invite/")), "{created}");
    let listed = api.get("/agency/subteams").await.expect(200)["data"].clone();
    assert!(listed[0].get("inviteUrl").is_none(), "shown once: {listed}");

    // The agency gives the client its first key with teamId.
    let key = api.post(&format!("/api-keys?teamId={subteam_id}"), json!({ "name": "client's first" })).await;
    let key = key.expect(201)["data"]["key"].as_str().unwrap().to_owned();
    assert_eq!(stack.client(&key).get("/me").await.expect(200)["data"]["team"]["id"], subteam_id.as_str());

    // The client's first user accepts, lands in the subteam as its owner.
    let accept = json!({ "token": token_of(&created["inviteUrl"]), "password": PASSWORD, "firstName": "Grace", "lastName": "H" });
    let accepted = stack.anonymous().post("/auth/accept-invite", accept).await;
    assert_eq!(accepted.expect(201)["data"]["team"]["id"], subteam_id.as_str());
    let client = browser(&stack, &accepted);
    assert_eq!(client.get("/api-keys").await.expect(200)["data"].as_array().unwrap().len(), 1, "the agency's");

    // An agency's owner acts on the subteam with teamId, as its keys do.
    let agency_owner = owner(&stack, &agency.id, "owner@agency.example").await;
    let members = agency_owner.get(&format!("/members?teamId={subteam_id}")).await.expect(200)["data"].clone();
    assert_eq!(members[0]["firstName"], "Grace");
    let audit = agency_owner.get("/audit-log").await.expect(200)["data"].clone();
    assert!(
        audit
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "subteam.created" && e["target"] == subteam_id.as_str()),
        "{audit}"
    );
}

/// Two gateways on one Redis: a session signed out (or a member removed) through one is
/// refused by the other at its very next request, although that one had it cached.
#[tokio::test]
async fn an_ended_session_is_refused_at_once_by_every_gateway() {
    let redis = crate::common::Redis::start().await;
    let url = redis.url();
    let stack = Stack::start_with(&[("REDIS_URL", &url)]).await;
    let team = stack.team("Replicas", false, 10).await;
    let first = owner(&stack, &team.id, "owner@replicas.example").await;
    let gateway = crate::common::Process::start(
        &["serve", "gateway"],
        &[
            ("SWITCHBOARD_LISTEN", "127.0.0.1:0"),
            ("SWITCHBOARD_IDENTITY_URL", &stack.identity_url),
            ("SWITCHBOARD_SERVICE_TOKEN", &stack.service_token),
            ("REDIS_URL", &url),
        ],
        "gateway listening on",
    )
    .await;
    let other_base = gateway.line_after("gateway listening on").expect("the second gateway's address");

    let signed_in = sign_in(&stack, "owner@replicas.example", PASSWORD).await;
    let token = cookie_token(&signed_in);
    let csrf = signed_in.body["data"]["csrfToken"].as_str().unwrap().to_owned();
    let here = Api::signed_in(&stack.base, &token, Some(&csrf));
    let there = Api::signed_in(&other_base, &token, Some(&csrf));
    there.get("/me").await.expect(200);
    there.get("/me").await.expect(200);
    here.post("/auth/sign-out", json!({})).await.expect(200);
    assert_eq!(there.get("/me").await.status, 401, "the other gateway refused it at once");
    first.get("/me").await.expect(200);
}
