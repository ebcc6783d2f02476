//! Single sign-on against a real OpenID provider (npm `oidc-provider`, tests/sso/provider.mjs)
//! on loopback: the settings over the API, then in Chromium (tests/portal/sso.mjs) a person
//! created at their first sign-in, an address no team covers, an account outside the covered
//! domains, and ID tokens whose nonce or signature is wrong (the provider's tamper modes).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::accounts::owner;
use crate::common::Stack;

const CLIENT_ID: &str = "switchboard-test";
const CLIENT_SECRET: &str = "a-client-secret-of-the-test";
const PASSWORD: &str = "provider password 1";

/// A provider process; killed when dropped.
struct Provider {
    issuer: String,
    _child: Child,
}

async fn provider(portal: &str, tamper: &str, users: &Value) -> Provider {
    let script = std::env::var("SWITCHBOARD_TEST_SSO_PROVIDER").expect(
        "SWITCHBOARD_TEST_SSO_PROVIDER names tests/sso/provider.mjs (scripts/test installs it: ensure_sso_provider)",
    );
    let mut child = Command::new("node")
        .arg(&script)
        .env("OIDC_PORT", "0")
        .env("OIDC_CLIENT_ID", CLIENT_ID)
        .env("OIDC_CLIENT_SECRET", CLIENT_SECRET)
        .env("OIDC_REDIRECT_URI", format!("{portal}/sso/callback"))
        .env("OIDC_USERS", users.to_string())
        .env("OIDC_TAMPER", tamper)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts the provider");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ready = async {
        while let Some(line) = lines.next_line().await.expect("reading the provider") {
            if let Some(issuer) = line.strip_prefix("oidc-provider ready ") {
                return issuer.trim().to_owned();
            }
        }
        panic!("the provider ({tamper:?}) exited before it was ready");
    };
    let issuer = tokio::time::timeout(Duration::from_secs(20), ready)
        .await
        .unwrap_or_else(|_| panic!("the provider ({tamper:?}) was not ready within 20 s"));
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Provider { issuer, _child: child }
}

fn user(sub: &str, email: &str, given: &str, family: &str) -> Value {
    json!({ "sub": sub, "email": email, "given_name": given, "family_name": family, "password": PASSWORD })
}

#[tokio::test]
async fn people_sign_in_through_their_teams_openid_provider() {
    let runner = std::env::var("SWITCHBOARD_TEST_PORTAL")
        .expect("SWITCHBOARD_TEST_PORTAL names tests/portal/run.mjs (scripts/test installs it: ensure_portal_tests)");
    let stack =
        Stack::start_with(&[("SWITCHBOARD_SSO_ALLOW_PRIVATE", "true"), ("SWITCHBOARD_RATE_LIMIT_AUTH", "1000")]).await;
    let portal = stack.base.trim_end_matches("/v1").to_owned();
    let users = json!([
        user("grace-1", "grace@acme.example", "Grace", "Hopper"),
        user("eve-1", "eve@elsewhere.example", "Eve", "Outside"),
        user("nora-1", "nora@nonce.example", "Nora", "Nonce"),
        user("sig-1", "sig@sig.example", "Sig", "Nature"),
    ]);
    let honest = provider(&portal, "", &users).await;
    let wrong_nonce = provider(&portal, "nonce", &users).await;
    let wrong_signature = provider(&portal, "signature", &users).await;

    // Settings: owners only, the secret never answered, a domain belongs to one team.
    let acme = stack.team("Acme", false, 0).await;
    let acme_owner = owner(&stack, &acme.id, "owner@acme.example").await;
    let config = json!({
        "issuer": honest.issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "domains": ["Acme.example"],
    });
    let key = stack.client(&acme.key);
    assert_eq!(key.put("/members/sso", config.clone()).await.error_code(403), "FORBIDDEN");
    assert_eq!(acme_owner.get("/members/sso").await.error_code(404), "NOT_FOUND");
    let saved = acme_owner.put("/members/sso", config).await.expect(200)["data"].clone();
    assert_eq!(saved["domains"], json!(["acme.example"]));
    assert_eq!(saved["defaultRole"], "member");
    assert_eq!(saved["redirectUri"], format!("{portal}/sso/callback"));
    assert!(!saved.to_string().contains(CLIENT_SECRET), "{saved}");
    let unreachable =
        json!({ "issuer": "http://127.0.0.1:9", "clientId": "x", "clientSecret": "y", "domains": ["z.example"] });
    assert_eq!(acme_owner.put("/members/sso", unreachable).await.status, 503);
    for (name, issuer, domain) in
        [("Nonce", &wrong_nonce.issuer, "nonce.example"), ("Sig", &wrong_signature.issuer, "sig.example")]
    {
        let team = stack.team(name, false, 0).await;
        let team_owner = owner(&stack, &team.id, &format!("owner@{domain}")).await;
        let body =
            json!({ "issuer": issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "domains": [domain] });
        team_owner.put("/members/sso", body).await.expect(200);
        let taken = json!({ "issuer": issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "domains": ["acme.example"] });
        assert_eq!(team_owner.put("/members/sso", taken).await.error_code(409), "CONFLICT");
    }
    let uncovered = stack.anonymous().post("/auth/sso/start", json!({ "email": "x@uncovered.example" })).await;
    assert_eq!(uncovered.error_code(404), "NOT_FOUND");
    // A callback without the browser binding signs no one in.
    let unbound = stack.anonymous().post("/auth/sso/finish", json!({ "code": "c", "state": "s" })).await;
    assert_eq!(unbound.error_code(401), "UNAUTHORIZED");

    // In Chromium.
    let cases = json!([
        { "name": "jit", "email": "grace@acme.example", "login": "grace@acme.example", "password": PASSWORD,
          "expect": "signed-in", "text": "Grace Hopper" },
        { "name": "not-covered", "email": "x@uncovered.example", "expect": "not-covered",
          "text": "No single sign-on covers this e-mail address" },
        { "name": "outside-the-domains", "email": "someone@acme.example", "login": "eve@elsewhere.example",
          "password": PASSWORD, "expect": "refused", "text": "not in a domain the team's single sign-on covers" },
        { "name": "wrong-nonce", "email": "nora@nonce.example", "login": "nora@nonce.example", "password": PASSWORD,
          "expect": "refused", "text": "could not be verified" },
        { "name": "wrong-signature", "email": "sig@sig.example", "login": "sig@sig.example", "password": PASSWORD,
          "expect": "refused", "text": "could not be verified" },
    ]);
    let script = std::path::Path::new(&runner).with_file_name("sso.mjs");
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    let shots = std::path::Path::new(&target).join("portal-screenshots");
    let mut command = Command::new("node");
    command
        .arg(&script)
        .env("PORTAL_URL", &portal)
        .env("SSO_CASES", cases.to_string())
        .env("SCREENSHOT_DIR", &shots)
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .expect("the browser run did not finish in 300 s")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));

    // Grace was made a member of Acme at her first sign-in, and no one else anywhere.
    let members = acme_owner.get("/members").await.expect(200)["data"].clone();
    let grace = members.as_array().unwrap().iter().find(|m| m["email"] == "grace@acme.example").cloned();
    let grace = grace.unwrap_or_else(|| panic!("Grace was not created: {members}"));
    assert_eq!((grace["role"].as_str(), grace["firstName"].as_str()), (Some("member"), Some("Grace")));
    assert_eq!(grace["canSignIn"], true);
    assert!(members.as_array().unwrap().iter().all(|m| m["email"] != "eve@elsewhere.example"), "{members}");
    let log = acme_owner.get("/audit-log").await.expect(200)["data"].clone();
    for action in ["member.joined", "auth.signed_in_sso", "team.sso_changed"] {
        assert!(log.as_array().unwrap().iter().any(|e| e["action"] == action), "{action} missing: {log}");
    }
    // A person without a password cannot sign in with one.
    let by_password =
        stack.anonymous().post("/auth/sign-in", json!({ "email": "grace@acme.example", "password": PASSWORD })).await;
    assert_eq!(by_password.status, 401);
}
