//! Trust boundaries, as an attacker holding a weaker credential would probe them: a replayed
//! `Idempotency-Key` never hands one caller another's answer or a secret shown once.

use serde_json::{Value, json};

use crate::accounts::{PASSWORD, browser, owner, token_of};
use crate::common::{Api, Redis, Response, Stack};

async fn post_with_key(api: &Api, path: &str, key: &str, body: Value) -> Response {
    api.send(api.request(reqwest::Method::POST, path).header("Idempotency-Key", key).json(&body)).await
}

/// A person let into the team by `inviter` with `role`, signed in.
pub(crate) async fn person(stack: &Stack, inviter: &Api, email: &str, role: &str) -> Api {
    let invited = inviter.post("/members/invitations", json!({ "email": email, "role": role })).await;
    let url = invited.expect(201)["data"]["url"].clone();
    let accept = json!({ "token": token_of(&url), "password": PASSWORD, "firstName": "P", "lastName": role });
    let accepted = stack.anonymous().post("/auth/accept-invite", accept).await;
    accepted.expect(201);
    browser(stack, &accepted)
}

/// A repeat by another caller is that caller's own request: checked for access, never answered
/// with what the first caller got.
#[track_caller]
fn not_a_replay(response: &Response, secret: &str, what: &str) {
    assert_eq!(response.header("idempotent-replayed"), None, "{what}: replayed another caller's answer");
    assert!(!response.text.contains(secret), "{what}: saw the first caller's secret: {}", response.text);
}

async fn replays_stay_with_their_caller(stack: &Stack) {
    let agency = stack.team("Replays", true, 100).await;
    let full = stack.client(&agency.key);
    let read_only = stack.client(&stack.key(&agency.id, true).await);
    let other_full = stack.client(&stack.key(&agency.id, false).await);
    let first_owner = owner(stack, &agency.id, "owner@replays.example").await;
    let second_owner = person(stack, &first_owner, "second@replays.example", "owner").await;
    let admin = person(stack, &first_owner, "admin@replays.example", "admin").await;
    let member = person(stack, &first_owner, "member@replays.example", "member").await;
    let viewer = person(stack, &first_owner, "viewer@replays.example", "viewer").await;

    // A new key: its secret is shown once, to its maker, and never to a read-only key or a
    // person of a weaker role who repeats the request.
    let body = json!({ "name": "deploy" });
    let created = post_with_key(&full, "/api-keys", "make-key", body.clone()).await;
    let secret = created.expect(201)["data"]["key"].as_str().expect("the key").to_owned();
    for (caller, what) in [(&read_only, "a read-only key"), (&member, "a member"), (&viewer, "a viewer")] {
        let again = post_with_key(caller, "/api-keys", "make-key", body.clone()).await;
        assert_eq!(again.error_code(403), "FORBIDDEN", "{what}");
        not_a_replay(&again, &secret, what);
    }
    let own_repeat = post_with_key(&full, "/api-keys", "make-key", body.clone()).await;
    assert_eq!(own_repeat.error_code(409), "IDEMPOTENCY_SECRET_SHOWN");
    assert_eq!(own_repeat.header("idempotent-replayed"), Some("true"));
    assert!(!own_repeat.text.contains(&secret), "{}", own_repeat.text);
    // Another full-access key with the same Idempotency-Key makes a key of its own.
    let theirs = post_with_key(&other_full, "/api-keys", "make-key", body.clone()).await;
    theirs.expect(201);
    not_a_replay(&theirs, &secret, "another full-access key");

    // An invitation as admin: a viewer or member who repeats it gets no link to become one.
    let invite = json!({ "email": "new-admin@replays.example", "role": "admin" });
    let invited = post_with_key(&first_owner, "/members/invitations", "invite-admin", invite.clone()).await;
    let link = invited.expect(201)["data"]["url"].as_str().expect("url").to_owned();
    let token = link.rsplit('/').next().expect("token").to_owned();
    for (caller, what) in [(&viewer, "a viewer"), (&member, "a member"), (&read_only, "a read-only key")] {
        let again = post_with_key(caller, "/members/invitations", "invite-admin", invite.clone()).await;
        assert_eq!(again.error_code(403), "FORBIDDEN", "{what}");
        not_a_replay(&again, &token, what);
    }
    // Owners and admins may invite; their repeat is their own request (here: the address is
    // invited already), never the first owner's link.
    for (caller, what) in [(&second_owner, "a second owner"), (&admin, "an admin")] {
        let again = post_with_key(caller, "/members/invitations", "invite-admin", invite.clone()).await;
        not_a_replay(&again, &token, what);
    }
    let own_repeat = post_with_key(&first_owner, "/members/invitations", "invite-admin", invite.clone()).await;
    assert_eq!(own_repeat.error_code(409), "IDEMPOTENCY_SECRET_SHOWN");
    assert!(!own_repeat.text.contains(&token), "{}", own_repeat.text);

    // A webhook's signing secret.
    let hook = json!({ "url": "https://hooks.example/in", "events": ["contact.created"] });
    let made = post_with_key(&full, "/webhooks", "make-hook", hook.clone()).await;
    let hook_secret = made.expect(201)["data"]["secret"].as_str().expect("secret").to_owned();
    for (caller, what) in [(&read_only, "a read-only key"), (&member, "a member"), (&viewer, "a viewer")] {
        let again = post_with_key(caller, "/webhooks", "make-hook", hook.clone()).await;
        assert_eq!(again.error_code(403), "FORBIDDEN", "{what}");
        not_a_replay(&again, &hook_secret, what);
    }
    assert_eq!(post_with_key(&full, "/webhooks", "make-hook", hook).await.error_code(409), "IDEMPOTENCY_SECRET_SHOWN");

    // A subteam's link for its first owner.
    let subteam = json!({
        "firstName": "Grace", "lastName": "Hopper", "teamName": "Client", "email": "grace@client.example",
        "totalMonthlyCredits": 10,
    });
    let made = post_with_key(&full, "/agency/subteams", "make-subteam", subteam.clone()).await;
    let invite_url = made.expect(201)["data"]["inviteUrl"].as_str().expect("inviteUrl").to_owned();
    for (caller, what) in [(&read_only, "a read-only key"), (&member, "a member"), (&viewer, "a viewer")] {
        let again = post_with_key(caller, "/agency/subteams", "make-subteam", subteam.clone()).await;
        assert_eq!(again.error_code(403), "FORBIDDEN", "{what}");
        not_a_replay(&again, &invite_url, what);
    }
    let own_repeat = post_with_key(&full, "/agency/subteams", "make-subteam", subteam).await;
    assert_eq!(own_repeat.error_code(409), "IDEMPOTENCY_SECRET_SHOWN");

    // Answers without secrets are still replayed, to their own caller only.
    let contact = json!({ "number": "+14155552671" });
    let made = post_with_key(&full, "/contacts", "make-contact", contact.clone()).await.expect(201).clone();
    let again = post_with_key(&full, "/contacts", "make-contact", contact.clone()).await;
    assert_eq!((again.expect(201), again.header("idempotent-replayed")), (&made, Some("true")));
    let viewers = post_with_key(&viewer, "/contacts", "make-contact", contact).await;
    assert_eq!(viewers.error_code(403), "FORBIDDEN");
}

#[tokio::test]
async fn a_replayed_idempotency_key_answers_only_its_own_caller() {
    replays_stay_with_their_caller(&Stack::start().await).await;
}

#[tokio::test]
async fn a_replayed_idempotency_key_answers_only_its_own_caller_with_redis() {
    let redis = Redis::start().await;
    let stack = Stack::start_with(&[("REDIS_URL", &redis.url())]).await;
    replays_stay_with_their_caller(&stack).await;
    // Nothing shown once is stored: the kept entries hold no secret at all.
    let stored = redis.cli(&["--scan", "--pattern", "switchboard:idempotency:*"]);
    assert!(stored.lines().count() >= 5, "{stored}");
    for slot in stored.lines() {
        let record = redis.cli(&["GET", slot]);
        for secret_marker in ["ew_", "whsec_", "/invite/"] {
            assert!(!record.contains(secret_marker), "{slot} holds a secret: {record}");
        }
    }
}

/// A subteam whose `accessConfig` switches a setting off: what the setting governs (operations
/// and the webhook events that carry the same data) is refused to its own keys and people, and
/// to no one else.
#[tokio::test]
async fn a_subteams_access_settings_hold_for_members_and_webhooks() {
    let stack = Stack::start().await;
    let agency = stack.team("Access agency", true, 100).await;
    let agency_api = stack.client(&agency.key);
    let mut body = crate::auth::subteam_body("Client");
    body["accessConfig"] = json!({ "users": false, "instructions": false, "crm": false, "conversations": false });
    let made = agency_api.post("/agency/subteams", body).await;
    let subteam = made.expect(201)["data"].clone();
    let subteam_id = subteam["id"].as_str().unwrap().to_owned();
    let accepted = stack
        .anonymous()
        .post(
            "/auth/accept-invite",
            json!({ "token": token_of(&subteam["inviteUrl"]), "password": PASSWORD, "firstName": "G", "lastName": "H" }),
        )
        .await;
    accepted.expect(201);
    let subteam_owner = browser(&stack, &accepted);
    let subteam_key = stack.client(&stack.key(&subteam_id, false).await);

    // `users: false`: the people of the team, their invitations and their audit log.
    for caller in [&subteam_owner, &subteam_key] {
        for path in ["/users", "/members", "/audit-log"] {
            assert_eq!(caller.get(path).await.error_code(403), "FORBIDDEN", "{path}");
        }
        let invite = caller.post("/members/invitations", json!({ "email": "x@client.example", "role": "admin" })).await;
        assert_eq!(invite.error_code(403), "FORBIDDEN");
    }
    // The agency acting on the subteam is not held to the subteam's settings.
    agency_api.get(&format!("/members?teamId={subteam_id}")).await.expect(200);

    // Webhooks cannot take the events whose data a switched-off setting hides.
    for (event, setting) in [
        ("agent.instructions.updated", "instructions"),
        ("contact.created", "crm"),
        ("contact.deleted", "crm"),
        ("call.ended", "conversations"),
        ("chat.ended", "conversations"),
    ] {
        let hook = json!({ "url": "https://hooks.example/in", "events": ["credits.low", event] });
        let refused = subteam_key.post("/webhooks", hook).await;
        assert_eq!(refused.error_code(403), "FORBIDDEN", "{event}");
        assert!(refused.body["error"].as_str().unwrap().contains(setting), "{}", refused.text);
    }
    let allowed = json!({ "url": "https://hooks.example/in", "events": ["credits.low", "webpage.ready"] });
    let webhook = subteam_key.post("/webhooks", allowed).await.expect(201)["data"].clone();
    let path = format!("/webhooks/{}", webhook["id"].as_str().unwrap());
    let widened = subteam_key.put(&path, json!({ "events": ["agent.instructions.updated"] })).await;
    assert_eq!(widened.error_code(403), "FORBIDDEN");
    assert_eq!(subteam_key.get(&path).await.expect(200)["data"]["events"], json!(["credits.low", "webpage.ready"]));
    // The agency cannot subscribe the subteam's webhooks to them either: they would never arrive.
    let hook = json!({ "url": "https://hooks.example/in", "events": ["contact.created"] });
    let by_agency = agency_api.post(&format!("/webhooks?teamId={subteam_id}"), hook.clone()).await;
    assert_eq!(by_agency.error_code(403), "FORBIDDEN");
    // A team that is no subteam subscribes to anything.
    agency_api.post("/webhooks", hook).await.expect(201);
}

fn accept_body(url: &Value, name: &str) -> Value {
    json!({ "token": token_of(url), "password": PASSWORD, "firstName": name, "lastName": "X" })
}

/// Invitations are listed and revoked, and none outlives its maker's standing: a removed
/// member's pending invitations stop working, and the keys they made are listed (and revoked
/// when asked).
#[tokio::test]
async fn invitations_are_listed_revoked_and_end_with_their_maker() {
    let stack = Stack::start().await;
    let team = stack.team("Invites", false, 0).await;
    let owner = owner(&stack, &team.id, "owner@invites.example").await;
    let admin = person(&stack, &owner, "admin@invites.example", "admin").await;

    // The admin invites someone as admin, and makes a key for an integration.
    let pending = admin.post("/members/invitations", json!({ "email": "x@invites.example", "role": "admin" })).await;
    let pending = pending.expect(201)["data"].clone();
    let made = admin.post("/api-keys", json!({ "name": "crm sync" })).await.expect(201)["data"].clone();
    let admin_key = stack.client(made["key"].as_str().unwrap());
    admin_key.get("/me").await.expect(200);

    let listed = owner.get("/members/invitations").await.expect(200)["data"].clone();
    let listed = listed.as_array().unwrap();
    let entry = listed.iter().find(|i| i["id"] == pending["id"]).unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!((entry["email"].as_str(), entry["role"].as_str()), (Some("x@invites.example"), Some("admin")));
    assert_eq!(entry["createdBy"]["type"], "user");
    assert!(entry.get("url").is_none() && !entry.to_string().contains(&token_of(&pending["url"])), "{entry}");
    // Only those who manage members see them.
    let viewer = person(&stack, &owner, "viewer@invites.example", "viewer").await;
    assert_eq!(viewer.get("/members/invitations").await.error_code(403), "FORBIDDEN");

    // The admin is removed: the invitation they made dies with their standing; their key is
    // listed, and keeps working until revoked.
    let members = owner.get("/members").await.expect(200)["data"].clone();
    let admin_id = members.as_array().unwrap().iter().find(|m| m["email"] == "admin@invites.example").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let removed = owner.delete(&format!("/members/{admin_id}")).await.expect(200)["data"].clone();
    assert_eq!(removed["invitationsEnded"], 1, "{removed}");
    assert_eq!(removed["apiKeysRevoked"], false);
    assert_eq!(removed["apiKeys"].as_array().unwrap().len(), 1, "{removed}");
    assert_eq!(removed["apiKeys"][0]["id"], made["id"]);
    let late = stack.anonymous().post("/auth/accept-invite", accept_body(&pending["url"], "Late")).await;
    assert_eq!(late.error_code(404), "NOT_FOUND");
    assert!(owner.get("/members/invitations").await.expect(200)["data"].as_array().unwrap().is_empty());
    admin_key.get("/me").await.expect(200);

    // Removed with `revokeKeys`, a member's keys stop working with them.
    let member = person(&stack, &owner, "member@invites.example", "admin").await;
    let key = member.post("/api-keys", json!({ "name": "laptop" })).await.expect(201)["data"]["key"].clone();
    let member_key = stack.client(key.as_str().unwrap());
    let members = owner.get("/members").await.expect(200)["data"].clone();
    let member_id = members.as_array().unwrap().iter().find(|m| m["email"] == "member@invites.example").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let removed = owner.delete(&format!("/members/{member_id}?revokeKeys=true")).await.expect(200)["data"].clone();
    assert_eq!(
        (removed["apiKeysRevoked"].as_bool(), removed["apiKeys"].as_array().map(Vec::len)),
        (Some(true), Some(1))
    );
    crate::accounts::answers_within(401, "a revoked key of a removed member", || member_key.get("/me")).await;

    // Revoked by hand: the link stops at once; twice, or another team's, is 404.
    let invited =
        owner.post("/members/invitations", json!({ "email": "y@invites.example" })).await.expect(201)["data"].clone();
    let path = format!("/members/invitations/{}", invited["id"].as_str().unwrap());
    let other = stack.team("Other", false, 0).await;
    let other_owner = crate::accounts::owner(&stack, &other.id, "owner@other.example").await;
    assert_eq!(other_owner.delete(&path).await.error_code(404), "NOT_FOUND");
    let revoked = owner.delete(&path).await.expect(200)["data"].clone();
    assert_eq!(revoked["email"], "y@invites.example");
    let refused = stack.anonymous().post("/auth/accept-invite", accept_body(&invited["url"], "Y")).await;
    assert_eq!(refused.error_code(404), "NOT_FOUND");
    assert_eq!(owner.delete(&path).await.error_code(404), "NOT_FOUND");
    assert_eq!(owner.delete("/members/invitations/not-an-id").await.status, 400);

    // An admin does not revoke an owner's invitation to be owner.
    let as_owner = owner.post("/members/invitations", json!({ "email": "o2@invites.example", "role": "owner" })).await;
    let as_owner = as_owner.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    let admin_two = person(&stack, &owner, "admin2@invites.example", "admin").await;
    let refused = admin_two.delete(&format!("/members/invitations/{as_owner}")).await;
    assert_eq!(refused.error_code(403), "FORBIDDEN");
    // Demoted below admin, a member's pending invitations end too.
    let theirs = admin_two.post("/members/invitations", json!({ "email": "z@invites.example" })).await;
    let theirs = theirs.expect(201)["data"].clone();
    let members = owner.get("/members").await.expect(200)["data"].clone();
    let admin_two_id =
        members.as_array().unwrap().iter().find(|m| m["email"] == "admin2@invites.example").unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
    owner.put(&format!("/members/{admin_two_id}"), json!({ "role": "member" })).await.expect(200);
    let refused = stack.anonymous().post("/auth/accept-invite", accept_body(&theirs["url"], "Z")).await;
    assert_eq!(refused.error_code(404), "NOT_FOUND");
}

async fn sign_in_from(stack: &Stack, email: &str, password: &str, client: &str) -> Response {
    let api = stack.anonymous();
    let body = json!({ "email": email, "password": password });
    api.send(api.request(reqwest::Method::POST, "/auth/sign-in").header("X-Forwarded-For", client).json(&body)).await
}

/// Behind a trusted proxy: concurrent wrong passwords get exactly the limit's 401s, the owner
/// signs in from elsewhere meanwhile, and the client's own address is the proxy's word for it.
#[tokio::test]
async fn the_sign_in_throttle_is_exact_and_locks_out_only_the_guesser() {
    let stack =
        Stack::start_with(&[("SWITCHBOARD_TRUSTED_PROXIES", "127.0.0.0/8"), ("SWITCHBOARD_RATE_LIMIT_AUTH", "1000")])
            .await;
    let team = stack.team("Throttle", false, 0).await;
    owner(&stack, &team.id, "ada@throttle.example").await;

    let passwords: Vec<String> = (0..30).map(|n| format!("guess {n:02} wrong")).collect();
    let guesses = passwords.iter().map(|wrong| sign_in_from(&stack, "ada@throttle.example", wrong, "198.51.100.7"));
    let answers = futures::future::join_all(guesses).await;
    let count = |status: u16| answers.iter().filter(|answer| answer.status == status).count();
    assert_eq!((count(401), count(429)), (10, 20), "{:?}", answers.iter().map(|a| a.status).collect::<Vec<_>>());
    let refused = answers.iter().find(|answer| answer.status == 429).unwrap();
    let wait: u64 = refused.header("retry-after").and_then(|v| v.parse().ok()).expect("Retry-After");
    assert!(wait > 0 && wait <= 15 * 60, "{wait}");

    // The right password from the guesser's address waits too; from the owner's, it passes.
    let guesser = sign_in_from(&stack, "ada@throttle.example", PASSWORD, "198.51.100.7").await;
    assert_eq!(guesser.error_code(429), "RATE_LIMITED");
    sign_in_from(&stack, "ada@throttle.example", PASSWORD, "203.0.113.20").await.expect(200);
    // The audit log has the failures, with the client's address as the proxy gave it.
    let owner_session = browser(&stack, &sign_in_from(&stack, "ada@throttle.example", PASSWORD, "203.0.113.20").await);
    let failed = owner_session.get("/audit-log?action=auth.sign_in_failed&limit=50").await.expect(200).clone();
    assert_eq!(failed["pagination"]["totalCount"], 10, "{failed}");
    assert!(failed["data"].as_array().unwrap().iter().all(|e| e["ip"] == "198.51.100.7"), "{failed}");
}

/// Without trusted proxies, a client's `X-Forwarded-For` is its own say-so: it neither escapes
/// the throttle nor names the client in the audit log.
#[tokio::test]
async fn forwarding_headers_of_untrusted_clients_are_ignored() {
    let stack = Stack::start_with(&[("SWITCHBOARD_PUBLIC_URL", "https://switchboard.example")]).await;
    let team = stack.team("Forged", false, 0).await;
    let invitation = stack.admin(&["invite", "--team", &team.id, "--email", "ada@forged.example"]).await;
    let accept =
        json!({ "token": token_of(&invitation["url"]), "password": PASSWORD, "firstName": "A", "lastName": "B" });
    stack.anonymous().post("/auth/accept-invite", accept).await.expect(201);
    // The team's key: a session here would need the https the public URL promises.
    let owner = stack.client(&team.key);
    for n in 0..10 {
        let wrong = sign_in_from(&stack, "ada@forged.example", "wrong password", &format!("192.0.2.{n}")).await;
        assert_eq!(wrong.status, 401);
    }
    let forged = sign_in_from(&stack, "ada@forged.example", PASSWORD, "192.0.2.200").await;
    assert_eq!(forged.error_code(429), "RATE_LIMITED");
    let failed = owner.get("/audit-log?action=auth.sign_in_failed").await.expect(200).clone();
    assert!(failed["data"].as_array().unwrap().iter().all(|e| e["ip"] == "127.0.0.1"), "{failed}");

    // Links start with the public URL, whatever host the request names.
    let api = &owner;
    let invite = json!({ "email": "new@forged.example" });
    let request = api
        .request(reqwest::Method::POST, "/members/invitations")
        .header("X-Forwarded-Host", "evil.example")
        .header("X-Forwarded-Proto", "http")
        .json(&invite);
    let url = api.send(request).await.expect(201)["data"]["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with("https://switchboard.example/invite/"), "{url}");
}

#[tokio::test]
async fn cookies_are_secure_and_host_prefixed_when_the_platform_is_https() {
    let stack = Stack::start_with(&[("SWITCHBOARD_PUBLIC_URL", "https://switchboard.example")]).await;
    let team = stack.team("Secure", false, 0).await;
    let invitation = stack.admin(&["invite", "--team", &team.id, "--email", "ada@secure.example"]).await;
    let accept =
        json!({ "token": token_of(&invitation["url"]), "password": PASSWORD, "firstName": "A", "lastName": "B" });
    let accepted = stack.anonymous().post("/auth/accept-invite", accept).await;
    let cookie = accepted.header("set-cookie").unwrap_or_else(|| panic!("{}", accepted.text)).to_owned();
    assert!(cookie.starts_with("__Host-switchboard_session="), "{cookie}");
    for attribute in ["; Secure", "; HttpOnly", "; Path=/", "SameSite=Lax"] {
        assert!(cookie.contains(attribute), "{attribute} missing: {cookie}");
    }
    assert!(!cookie.contains("Domain"), "{cookie}");
    let token = cookie.split(';').next().and_then(|pair| pair.split_once('=')).map(|(_, v)| v.to_owned()).unwrap();
    let csrf = accepted.body["data"]["csrfToken"].as_str().unwrap().to_owned();
    let session = Api::new(&stack.base, Some(&format!("__Host-switchboard_session={token}"))).with_header("Cookie");
    assert_eq!(session.get("/auth/session").await.expect(200)["data"]["csrfToken"], csrf.as_str());
    // A plain cookie (planted by a sibling subdomain, or over http) is no session over https.
    let planted = Api::new(&stack.base, Some(&format!("switchboard_session={token}"))).with_header("Cookie");
    assert_eq!(planted.get("/auth/session").await.error_code(401), "UNAUTHORIZED");

    // Plain http, and a client saying https: not Secure.
    let plain = Stack::start().await;
    let team = plain.team("Plain", false, 0).await;
    let invitation = plain.admin(&["invite", "--team", &team.id, "--email", "ada@plain.example"]).await;
    let accept =
        json!({ "token": token_of(&invitation["url"]), "password": PASSWORD, "firstName": "A", "lastName": "B" });
    let api = plain.anonymous();
    let request = api.request(reqwest::Method::POST, "/auth/accept-invite").header("X-Forwarded-Proto", "https");
    let accepted = api.send(request.json(&accept)).await;
    let cookie = accepted.header("set-cookie").unwrap_or_else(|| panic!("{}", accepted.text));
    assert!(cookie.starts_with("switchboard_session=") && !cookie.contains("Secure"), "{cookie}");
}

/// Guessing the current password through a stolen session is throttled and audited.
#[tokio::test]
async fn wrong_current_passwords_are_throttled_and_audited() {
    let stack = Stack::start().await;
    let team = stack.team("Guess", false, 0).await;
    let owner = owner(&stack, &team.id, "ada@guess.example").await;
    let change = |current: &str| json!({ "currentPassword": current, "newPassword": "a brand new passphrase" });
    for n in 0..10 {
        let wrong = owner.post("/auth/password", change(&format!("guess {n}"))).await;
        assert_eq!(wrong.fields(), ["currentPassword"], "{}", wrong.text);
    }
    let throttled = owner.post("/auth/password", change(PASSWORD)).await;
    assert_eq!(throttled.error_code(429), "RATE_LIMITED");
    assert!(throttled.header("retry-after").is_some());
    let audited = owner.get("/audit-log?action=auth.password_change_failed").await.expect(200).clone();
    assert_eq!(audited["pagination"]["totalCount"], 10, "{audited}");
}

/// A session cookie rides along with a cross-site navigation: a GET that spends credits needs
/// the CSRF header, and spends nothing without it.
#[tokio::test]
async fn a_metered_read_by_cookie_needs_the_csrf_token() {
    let stack = Stack::start().await;
    let team = stack.team("Metered", false, 10).await;
    let owner = owner(&stack, &team.id, "ada@metered.example").await;
    let kb = owner.post("/knowledgebase", json!({ "name": "Support" })).await.expect(201)["data"]["id"].clone();
    let path = format!("/knowledgebase/{}/search?query=shipping", kb.as_str().unwrap());
    let cookie_only = Api::new(&stack.base, None);
    // The same cookie, without the header a page of this origin adds.
    let request = owner.request(reqwest::Method::GET, "/me").build().unwrap();
    let cookie = request.headers().get("cookie").unwrap().to_str().unwrap().to_owned();
    let forged = cookie_only.send(cookie_only.request(reqwest::Method::GET, &path).header("Cookie", &cookie)).await;
    assert_eq!(forged.error_code(403), "FORBIDDEN");
    assert_eq!(owner.get("/me").await.expect(200)["data"]["credits"]["balance"], 10, "nothing spent");
    owner.get(&path).await.expect(200);
    assert_eq!(owner.get("/me").await.expect(200)["data"]["credits"]["balance"], 9);
}

/// Unknown tokens cost a lookup, not a password hash; hashes past the queue wait their turn with
/// 503 and Retry-After instead of queueing without end.
#[tokio::test]
async fn password_hashes_are_spent_on_real_tokens_and_queue_with_a_bound() {
    let stack = Stack::start_with(&[("SWITCHBOARD_SIGNUP", "open"), ("SWITCHBOARD_RATE_LIMIT_AUTH", "100000")]).await;
    let stack = &stack;
    let bogus = (0..200).map(|n| {
        let body = json!({ "token": format!("bogus{n:040}"), "password": PASSWORD, "firstName": "A", "lastName": "B" });
        async move { stack.anonymous().post("/auth/accept-invite", body).await.status }
    });
    let statuses = futures::future::join_all(bogus).await;
    assert!(statuses.iter().all(|status| *status == 404), "{statuses:?}");

    let sign_ups = (0..200).map(|n| {
        let body = json!({
            "email": format!("u{n}@burst.example"), "password": PASSWORD, "firstName": "A", "lastName": "B",
            "teamName": format!("Burst {n}"),
        });
        async move { stack.anonymous().post("/auth/sign-up", body).await }
    });
    let answers = futures::future::join_all(sign_ups).await;
    let busy: Vec<&Response> = answers.iter().filter(|answer| answer.status == 503).collect();
    assert!(
        answers.iter().all(|answer| matches!(answer.status, 201 | 503)),
        "{:?}",
        answers.iter().map(|a| a.status).collect::<Vec<_>>()
    );
    assert!(!busy.is_empty(), "200 sign-ups at once all queued for a hash");
    assert_eq!(busy[0].body["code"], "SERVICE_UNAVAILABLE");
    assert!(busy[0].header("retry-after").is_some(), "{:?}", busy[0].headers);
}

/// A browser signed in as `email` with this `User-Agent`.
async fn browser_as(stack: &Stack, email: &str, user_agent: &str) -> Api {
    let api = stack.anonymous();
    let body = json!({ "email": email, "password": PASSWORD });
    let request = api.request(reqwest::Method::POST, "/auth/sign-in").header("User-Agent", user_agent).json(&body);
    browser(stack, &api.send(request).await)
}

/// A person sees where they are signed in, and ends one session or every other one.
#[tokio::test]
async fn people_list_and_end_their_own_sessions() {
    let stack = Stack::start().await;
    let team = stack.team("Sessions", false, 0).await;
    let first = owner(&stack, &team.id, "ada@sessions.example").await;
    let laptop =
        browser_as(&stack, "ada@sessions.example", "Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0 Safari/537.36").await;
    let phone = browser_as(
        &stack,
        "ada@sessions.example",
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Safari/604.1",
    )
    .await;

    let listed = laptop.get("/auth/sessions").await.expect(200)["data"].clone();
    let listed = listed.as_array().unwrap().clone();
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert_eq!(listed.iter().filter(|s| s["current"] == true).count(), 1);
    let current = listed.iter().find(|s| s["current"] == true).unwrap();
    assert_eq!(current["device"], "Chrome on Linux");
    assert_eq!(current["ip"], "127.0.0.1");
    let phone_id = listed.iter().find(|s| s["device"] == "Safari on iPhone").expect("the phone")["id"].clone();
    for member in ["createdAt", "lastSeenAt", "expiresAt", "userAgent"] {
        assert!(current[member].is_string(), "{member}: {current}");
    }

    // Another person's session ids are not theirs to end; keys have no sessions.
    let other = stack.team("Other", false, 0).await;
    let stranger = owner(&stack, &other.id, "eve@other.example").await;
    let path = format!("/auth/sessions/{}", phone_id.as_str().unwrap());
    assert_eq!(stranger.delete(&path).await.error_code(404), "NOT_FOUND");
    assert_eq!(stack.client(&team.key).get("/auth/sessions").await.error_code(401), "UNAUTHORIZED");
    phone.get("/me").await.expect(200);

    laptop.delete(&path).await.expect(200);
    crate::accounts::answers_within(401, "the ended phone session", || phone.get("/me")).await;
    assert_eq!(laptop.delete(&path).await.error_code(404), "NOT_FOUND", "ended already");

    let ended = laptop.post("/auth/sessions/end-others", json!({})).await.expect(200)["data"]["ended"].clone();
    assert_eq!(ended, 1, "the first browser's session");
    crate::accounts::answers_within(401, "the session ended from elsewhere", || first.get("/me")).await;
    laptop.get("/me").await.expect(200);
    assert_eq!(laptop.get("/auth/sessions").await.expect(200)["data"].as_array().unwrap().len(), 1);
    let log = laptop.get("/audit-log").await.expect(200)["data"].clone();
    for action in ["auth.session_ended", "auth.signed_out_elsewhere"] {
        assert!(log.as_array().unwrap().iter().any(|e| e["action"] == action), "{action} missing: {log}");
    }
}

/// The code an authenticator app shows at `unix_seconds` for a base32 `secret`.
pub(crate) fn totp_code(secret: &str, unix_seconds: u64) -> String {
    let key = totp_rs::Secret::Encoded(secret.to_owned()).to_bytes().expect("a base32 secret");
    totp_rs::TOTP::new_unchecked(totp_rs::Algorithm::SHA1, 6, 1, 30, key).generate(unix_seconds)
}

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

async fn challenge_for(stack: &Stack, email: &str) -> String {
    let answered = stack.anonymous().post("/auth/sign-in", json!({ "email": email, "password": PASSWORD })).await;
    let body = answered.expect(202);
    assert!(answered.header("set-cookie").is_none(), "no session before the second factor");
    assert_eq!(body["data"]["methods"], json!(["totp", "recovery_code"]));
    body["data"]["challenge"].as_str().unwrap().to_owned()
}

async fn verify(stack: &Stack, challenge: &str, code: &str) -> Response {
    stack.anonymous().post("/auth/sign-in/verify", json!({ "challenge": challenge, "code": code })).await
}

/// An authenticator app (TOTP) as a person sets it up and signs in with it, recovery codes,
/// the bounds on guessing, and a team that requires a second factor.
async fn second_factors(stack: &Stack) {
    let team = stack.team("Two steps", false, 0).await;
    let owner = owner(stack, &team.id, "ada@twostep.example").await;
    let member = person(stack, &owner, "mia@twostep.example", "member").await;
    assert_eq!(owner.get("/auth/second-factors").await.expect(200)["data"]["totp"], false);

    let enrolment = owner.post("/auth/second-factors/totp", json!({})).await.expect(201)["data"].clone();
    let secret = enrolment["secret"].as_str().unwrap().to_owned();
    assert!(enrolment["uri"].as_str().unwrap().starts_with("otpauth://totp/Switchboard"), "{enrolment}");
    assert!(enrolment["qrCode"].as_str().unwrap().starts_with("data:image/svg+xml;base64,"));
    let wrong = owner.post("/auth/second-factors/totp/confirm", json!({ "code": "000000" })).await;
    assert_eq!(wrong.fields(), ["code"], "{}", wrong.text);
    let now = unix_now();
    let confirmed = owner.post("/auth/second-factors/totp/confirm", json!({ "code": totp_code(&secret, now) })).await;
    let codes: Vec<String> = serde_json::from_value(confirmed.expect(200)["data"]["codes"].clone()).unwrap();
    assert_eq!(codes.len(), 10);
    let factors = owner.get("/auth/second-factors").await.expect(200)["data"].clone();
    assert_eq!((factors["totp"].as_bool(), factors["recoveryCodesLeft"].as_i64()), (Some(true), Some(10)));

    // Signing in asks for a code; the code of the step used already is refused, the next works.
    let challenge = challenge_for(stack, "ada@twostep.example").await;
    assert_eq!(verify(stack, &challenge, "123456").await.error_code(401), "UNAUTHORIZED");
    let reused = verify(stack, &challenge, &totp_code(&secret, now)).await;
    assert_eq!(reused.status, 401, "a code works once");
    // Issue 55: and says so, rather than "Invalid code" for a code that was right a moment ago.
    assert_eq!(reused.body["error"], "This code was already used", "{}", reused.text);
    assert!(reused.body["hint"].as_str().unwrap_or_default().contains("next one"), "{}", reused.text);
    let signed_in = verify(stack, &challenge, &totp_code(&secret, now + 30)).await;
    let session = browser(stack, &signed_in);
    session.get("/me").await.expect(200);
    assert_eq!(verify(stack, &challenge, &totp_code(&secret, now + 30)).await.status, 401, "a challenge is used once");

    // A recovery code, typed loosely, works once.
    let challenge = challenge_for(stack, "ada@twostep.example").await;
    let typed = codes[0].to_uppercase().replace('-', " ");
    browser(stack, &verify(stack, &challenge, &typed).await).get("/me").await.expect(200);
    let challenge = challenge_for(stack, "ada@twostep.example").await;
    assert_eq!(verify(stack, &challenge, &codes[0]).await.status, 401, "a recovery code works once");
    assert_eq!(session.get("/auth/second-factors").await.expect(200)["data"]["recoveryCodesLeft"], 9);

    // Guessing is bounded: 5 codes per challenge, 10 wrong ones per person in 15 minutes.
    let challenge = challenge_for(stack, "ada@twostep.example").await;
    for _ in 0..5 {
        assert_eq!(verify(stack, &challenge, "111111").await.status, 401);
    }
    let spent = verify(stack, &challenge, &codes[1]).await;
    assert_eq!(spent.status, 401, "a sixth try is over the challenge's bound: {}", spent.text);
    // Wrong codes so far: 2 + 1 + 5 = 8 (the spent challenge's sixth try was refused uncounted).
    let challenge = challenge_for(stack, "ada@twostep.example").await;
    for _ in 0..2 {
        assert_eq!(verify(stack, &challenge, "222222").await.status, 401);
    }
    let throttled = verify(stack, &challenge, &codes[1]).await;
    assert_eq!(throttled.error_code(429), "RATE_LIMITED");
    assert!(throttled.header("retry-after").is_some());
    let audit = session.get("/audit-log?action=auth.second_factor_failed&limit=50").await.expect(200).clone();
    assert!(audit["pagination"]["totalCount"].as_u64().unwrap() >= 8, "{audit}");

    // The team requires a second factor: a member without one may only set one up.
    assert_eq!(member.put("/members/security", json!({ "requireSecondFactor": true })).await.status, 403);
    let key = stack.client(&team.key);
    assert_eq!(key.put("/members/security", json!({ "requireSecondFactor": true })).await.error_code(403), "FORBIDDEN");
    session.put("/members/security", json!({ "requireSecondFactor": true })).await.expect(200);
    assert_eq!(session.get("/members/security").await.expect(200)["data"]["requireSecondFactor"], true);
    crate::accounts::answers_within(403, "a member without a second factor", || member.get("/agents")).await;
    let limited = member.get("/auth/session").await.expect(200)["data"].clone();
    assert_eq!(limited["secondFactorNeeded"], true);
    key.get("/agents").await.expect(200);
    let theirs = member.post("/auth/second-factors/totp", json!({})).await.expect(201)["data"]["secret"].clone();
    let code = totp_code(theirs.as_str().unwrap(), unix_now());
    member.post("/auth/second-factors/totp/confirm", json!({ "code": code })).await.expect(200);
    crate::accounts::answers_within(200, "the member, with a second factor now", || member.get("/agents")).await;
    assert_eq!(member.delete("/auth/second-factors/totp").await.error_code(409), "CONFLICT", "required");
    session.put("/members/security", json!({ "requireSecondFactor": false })).await.expect(200);
    member.delete("/auth/second-factors/totp").await.expect(200);

    // An owner without a second factor cannot require one; keys have no second factors.
    let other = stack.team("One step", false, 0).await;
    let plain_owner = crate::accounts::owner(stack, &other.id, "bo@onestep.example").await;
    let refused = plain_owner.put("/members/security", json!({ "requireSecondFactor": true })).await;
    assert_eq!(refused.error_code(409), "CONFLICT");
    assert_eq!(key.get("/auth/second-factors").await.error_code(401), "UNAUTHORIZED");
}

#[tokio::test]
async fn an_authenticator_app_guards_sign_in() {
    second_factors(&Stack::start().await).await;
}

#[tokio::test]
async fn an_authenticator_app_guards_sign_in_on_postgres() {
    let Some(stack) = Stack::serve_on_postgres(&["identity", "agents"], &[]).await else {
        eprintln!("NOTE: an_authenticator_app_guards_sign_in_on_postgres skipped: no TEST_DATABASE_URL");
        return;
    };
    second_factors(&stack).await;
}

/// Passkeys over the API (their ceremonies with a real authenticator are in the browser test):
/// options only for a person, each ceremony once, a forged credential refused.
#[tokio::test]
async fn passkey_ceremonies_are_a_persons_and_used_once() {
    let stack = Stack::start().await;
    let team = stack.team("Passkeys", false, 0).await;
    let owner = owner(&stack, &team.id, "ada@passkeys.example").await;
    let key = stack.client(&team.key);
    let path = "/auth/second-factors/passkeys/options";
    assert_eq!(key.post(path, json!({})).await.error_code(401), "UNAUTHORIZED");
    let options = owner.post(path, json!({})).await.expect(200)["data"].clone();
    let public_key = &options["options"]["publicKey"];
    assert_eq!(public_key["rp"]["id"], "localhost", "a loopback public URL is localhost to WebAuthn: {options}");
    assert!(public_key["challenge"].as_str().is_some_and(|c| c.len() >= 16), "{options}");
    assert_eq!(public_key["authenticatorSelection"]["userVerification"], "required");
    let forged = json!({ "ceremony": options["ceremony"], "name": "Laptop", "credential": { "id": "AAAA", "type": "public-key" } });
    assert_eq!(owner.post("/auth/second-factors/passkeys", forged.clone()).await.fields(), ["credential"]);
    let again = owner.post("/auth/second-factors/passkeys", forged).await;
    assert_eq!(again.error_code(401), "UNAUTHORIZED", "a ceremony is taken once: {}", again.text);
    assert_eq!(owner.get("/auth/second-factors").await.expect(200)["data"]["passkeys"], json!([]));

    let sign_in = stack.anonymous().post("/auth/passkey/options", json!({})).await.expect(200)["data"].clone();
    assert!(sign_in["options"]["publicKey"]["allowCredentials"].as_array().is_none_or(Vec::is_empty), "{sign_in}");
    let forged = json!({ "ceremony": sign_in["ceremony"], "credential": { "id": "AAAA", "type": "public-key" } });
    let refused = stack.anonymous().post("/auth/passkey", forged).await;
    assert!(matches!(refused.status, 400 | 401), "{}", refused.text);
    assert!(refused.header("set-cookie").is_none());
    let unknown = stack.anonymous().post("/auth/sign-in/passkey-options", json!({ "challenge": "no-such" })).await;
    assert_eq!(unknown.error_code(401), "UNAUTHORIZED");
    let both = json!({ "challenge": "c", "code": "123456", "passkey": { "ceremony": "x", "credential": {} } });
    assert_eq!(stack.anonymous().post("/auth/sign-in/verify", both).await.fields(), ["code"]);
}

/// Issue 53, finding 6: what a caller steers (a call's summary, its analysis) and what anyone
/// who writes names (an agent) reaches an analyst's spreadsheet as text, never as a formula.
#[tokio::test]
async fn exported_cells_never_run_as_formulas() {
    use switchboard_proto::v1::{CallAnalysis, EndCallRequest};

    use crate::call_outcomes::{cell, end, ended, rows};
    use crate::conversations::{Runtime, upsert};

    let stack = Stack::start().await;
    let team = stack.team("Spreadsheets", false, 100).await;
    let api = stack.client(&team.key);
    let agent_name = "=HYPERLINK(\"https://evil.example\",\"Open\")";
    let fields = json!([
        { "name": "followUp", "type": "string" }, { "name": "note", "type": "string" },
        { "name": "score", "type": "number" }, { "name": "plain", "type": "string" },
    ]);
    let agent = api.post("/agents", json!({ "name": agent_name, "type": "phone", "postCallAnalysis": fields })).await;
    let agent = agent.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    let mut runtime = Runtime::connect(&stack).await;
    let mut call = upsert(&team, "steered", "+14155550101", "INCOMING", "2026-03-01T10:00:00Z");
    call.agent_id = Some(agent);
    runtime.call(call).await.unwrap();
    let custom = json!({ "followUp": "@SUM(1+1)*cmd|' /C calc'!A0", "note": "\t=1+1", "score": -3, "plain": "fine" });
    let report = EndCallRequest {
        analysis: Some(CallAnalysis {
            summary: Some("+cmd|' /C calc'!A0".into()),
            sentiment: "neutral".into(),
            successful: None,
            custom_json: custom.to_string(),
        }),
        ..end(&team, "steered", "2026-03-01T10:02:00Z")
    };
    ended(&mut runtime, report).await.unwrap();

    let export = api.get("/calls/export").await;
    assert_eq!(export.status, 200, "{}", export.text);
    let table = rows(&export.text);
    assert_eq!(cell(&table, 1, "agent_name"), format!("'{agent_name}"));
    assert_eq!(cell(&table, 1, "summary"), "'+cmd|' /C calc'!A0");
    assert_eq!(cell(&table, 1, "custom.followUp"), "'@SUM(1+1)*cmd|' /C calc'!A0");
    assert_eq!(cell(&table, 1, "custom.note"), "'\t=1+1");
    // Numbers, phone numbers and plain text stay as they were.
    assert_eq!(cell(&table, 1, "custom.score"), "-3");
    assert_eq!(cell(&table, 1, "custom.plain"), "fine");
    assert_eq!(cell(&table, 1, "from"), "+14155550101");
    for row in &table {
        for value in row {
            let runs = value.starts_with(['=', '+', '-', '@', '\t', '\r']);
            let inert = value.parse::<f64>().is_ok()
                || value.strip_prefix('+').is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()));
            assert!(!runs || inert, "a cell a spreadsheet would run: {value:?}");
        }
    }
}
