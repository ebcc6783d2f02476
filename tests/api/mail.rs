//! Invitation links by e-mail when the platform has SMTP: a local sink (aiosmtpd, from PyPI)
//! receives what a team's invitation, an agency's new subteam and a password-reset request send.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::accounts::{PASSWORD, browser, owner, sign_in, token_of};
use crate::auth::subteam_body;
use crate::common::{Stack, free_port};

/// The text of every message in the sink's maildir.
pub(crate) fn messages(maildir: &Path) -> Vec<String> {
    let mut texts = Vec::new();
    for sub in ["new", "cur"] {
        if let Ok(entries) = std::fs::read_dir(maildir.join(sub)) {
            for entry in entries.flatten() {
                texts.push(std::fs::read_to_string(entry.path()).unwrap_or_default());
            }
        }
    }
    texts
}

pub(crate) async fn received(maildir: &Path, needle: &str) -> String {
    let wait = async {
        loop {
            if let Some(text) = messages(maildir).into_iter().find(|text| text.contains(needle)) {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(15), wait)
        .await
        .unwrap_or_else(|_| panic!("no mail with {needle} reached the sink within 15 s"))
}

/// The SMTP sink (aiosmtpd, killed when dropped) on a free port, listening: its folder (the
/// maildir is `mail` in it), the process, and the `SWITCHBOARD_SMTP_URL` that reaches it.
pub(crate) async fn smtp_sink() -> (tempfile::TempDir, tokio::process::Child, String) {
    let python = std::env::var("SWITCHBOARD_TEST_SMTP_PYTHON").expect(
        "SWITCHBOARD_TEST_SMTP_PYTHON names a Python with aiosmtpd (scripts/test installs it: ensure_smtp_sink)",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let maildir = dir.path().join("mail");
    let port = free_port();
    let sink = tokio::process::Command::new(python)
        .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}"), "-c", "aiosmtpd.handlers.Mailbox"])
        .arg(&maildir)
        .kill_on_drop(true)
        .spawn()
        .expect("the SMTP sink starts");
    let listening = async {
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), listening).await.expect("the SMTP sink listens within 20 s");
    (dir, sink, format!("smtp://127.0.0.1:{port}"))
}

/// The SMTP sink, and a stack that mails through it.
pub(crate) async fn stack_with_sink() -> (Stack, tempfile::TempDir, tokio::process::Child) {
    let (dir, sink, smtp) = smtp_sink().await;
    let stack = Stack::start_with(&[
        ("SWITCHBOARD_SMTP_URL", &smtp),
        ("SWITCHBOARD_SMTP_FROM", "Portal <portal@switchboard.example>"),
    ])
    .await;
    (stack, dir, sink)
}

#[tokio::test]
async fn invitations_are_mailed_when_the_platform_has_smtp() {
    let (stack, dir, mut sink) = stack_with_sink().await;
    let maildir = dir.path().join("mail");
    let agency = stack.team("Mail Agency", true, 50).await;
    let api = stack.client(&agency.key);

    let invitation = api.post("/members/invitations", json!({ "email": "new.member@mail.example" })).await;
    let url = invitation.expect(201)["data"]["url"].as_str().expect("url").to_owned();
    assert_eq!(invitation.body["data"]["mailed"], true, "the answer says the link was mailed");
    let mail = received(&maildir, &url).await;
    assert!(mail.contains("To: new.member@mail.example"), "{mail}");
    assert!(mail.contains("portal@switchboard.example"), "{mail}");
    assert!(mail.contains("Mail Agency"), "{mail}");

    let subteam = api.post("/agency/subteams", subteam_body("Mailed Client")).await;
    let invite_url = subteam.expect(201)["data"]["inviteUrl"].as_str().expect("inviteUrl").to_owned();
    let mail = received(&maildir, &invite_url).await;
    assert!(mail.contains("To: grace@client.example"), "{mail}");

    // Issue 40, defect 7: an invitation's page can name the team, the address and the role.
    let token = url.rsplit('/').next().expect("a token").to_owned();
    let visitor = stack.anonymous();
    let preview = visitor.get(&format!("/auth/invitations/{token}")).await;
    let data = &preview.expect(200)["data"];
    assert_eq!(data["team"]["name"], "Mail Agency");
    assert_eq!(data["email"], "new.member@mail.example");
    assert_eq!(data["role"], "member");
    assert!(data["expiresAt"].is_string(), "{data}");
    visitor.get("/auth/invitations/not-a-token").await.expect(404);
    let password = "correct horse battery staple 42";
    let accepted = visitor
        .post(
            "/auth/accept-invite",
            json!({ "token": token, "password": password, "firstName": "Nia", "lastName": "Member" }),
        )
        .await;
    accepted.expect(201);
    visitor.get(&format!("/auth/invitations/{token}")).await.expect(404);

    // A reset link by mail, asked for by its owner: the answer is the same for an unknown
    // address, which gets no mail.
    let asked = visitor.post("/auth/forgot", json!({ "email": "New.Member@mail.example" })).await;
    assert_eq!(
        asked.expect(202)["message"],
        "If an account uses this address, a link to reset its password is on its way"
    );
    let mail = received(&maildir, "/reset/").await;
    assert!(mail.contains("To: new.member@mail.example"), "{mail}");
    let unknown = visitor.post("/auth/forgot", json!({ "email": "nobody@mail.example" })).await;
    assert_eq!(unknown.expect(202)["message"], asked.body["message"]);
    visitor.post("/auth/forgot", json!({ "email": "not an address" })).await.expect(400);
    // Three e-mails an address from one client in 15 minutes; the fourth request waits.
    for _ in 0..2 {
        visitor.post("/auth/forgot", json!({ "email": "new.member@mail.example" })).await.expect(202);
    }
    let refused = visitor.post("/auth/forgot", json!({ "email": "new.member@mail.example" })).await;
    assert!(refused.expect(429)["retryAfter"].as_i64().is_some_and(|s| s > 0), "{}", refused.body);
    let resets = messages(&maildir).iter().filter(|text| text.contains("/reset/")).count();
    assert!(resets <= 3, "{resets} reset mails for one address");
    // The newest link mailed works, and only it: each link ends the ones made before it.
    let mailed = async {
        loop {
            let links: Vec<String> = messages(&maildir)
                .iter()
                .flat_map(|mail| mail.split_whitespace().filter(|word| word.contains("/reset/")).map(str::to_owned))
                .collect();
            if links.len() == 3 {
                return links;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let links = tokio::time::timeout(Duration::from_secs(15), mailed).await.expect("3 reset mails within 15 s");
    let mut answers = Vec::new();
    for link in &links {
        let token = link.rsplit('/').next().expect("its token");
        answers.push(
            visitor.post("/auth/reset", json!({ "token": token, "password": "another horse battery 77" })).await.status,
        );
    }
    answers.sort_unstable();
    assert_eq!(answers, [200, 404, 404], "{links:?}");

    let _ = sink.kill().await;
}

/// Issue 40, defect 7: a person changes their own name, and their e-mail address through a
/// link mailed to the new one; the old one gets a notice, sessions stay, keys cannot.
#[tokio::test]
async fn a_person_changes_their_name_and_confirms_a_new_address() {
    let (stack, dir, mut sink) = stack_with_sink().await;
    profile_changes(&stack, &dir.path().join("mail")).await;
    let _ = sink.kill().await;
}

/// The same with identity on PostgreSQL behind a `serve gateway`.
#[tokio::test]
async fn a_person_changes_their_name_and_address_on_postgres() {
    let (dir, mut sink, smtp) = smtp_sink().await;
    let env = [("SWITCHBOARD_SMTP_URL", smtp.as_str())];
    let Some(stack) = Stack::serve_on_postgres(&["identity", "agents"], &env).await else {
        eprintln!("NOTE: a_person_changes_their_name_and_address_on_postgres skipped: no TEST_DATABASE_URL");
        return;
    };
    profile_changes(&stack, &dir.path().join("mail")).await;
    let _ = sink.kill().await;
}

async fn profile_changes(stack: &Stack, maildir: &Path) {
    let team = stack.team("Profile Team", false, 10).await;
    let ada = owner(stack, &team.id, "ada@profile.example").await;

    // The name: both, one, and what is refused.
    let renamed = ada.patch("/me", json!({ "firstName": " Augusta ", "lastName": "Lovelace" })).await;
    let user = renamed.expect(200)["data"].clone();
    assert_eq!((user["firstName"].as_str(), user["lastName"].as_str()), (Some("Augusta"), Some("Lovelace")));
    let session = ada.get("/auth/session").await;
    assert_eq!(session.expect(200)["data"]["user"]["lastName"], "Lovelace", "{}", session.text);
    ada.patch("/me", json!({ "firstName": "Ada" })).await.expect(200);
    let me = ada.get("/me").await.expect(200)["data"]["user"].clone();
    assert_eq!((me["firstName"].as_str(), me["lastName"].as_str()), (Some("Ada"), Some("Lovelace")), "{me}");
    let long = ada.patch("/me", json!({ "firstName": "x".repeat(51) })).await;
    assert_eq!(long.expect(400)["details"][0]["field"], "firstName", "{}", long.text);
    ada.patch("/me", json!({ "lastName": "   " })).await.expect(400);

    // A key acts for the team, not for a person.
    let key = stack.client(&team.key);
    key.patch("/me", json!({ "firstName": "Key" })).await.expect(401);
    key.post("/me/email", json!({ "email": "key@profile.example", "password": PASSWORD })).await.expect(401);

    // The address: the password is needed; a taken address gets the answer a free one gets.
    let new = "ada.new@profile.example";
    let missing = ada.post("/me/email", json!({ "email": new })).await;
    assert_eq!(missing.expect(400)["details"][0]["field"], "password", "{}", missing.text);
    let wrong = ada.post("/me/email", json!({ "email": new, "password": "not the password" })).await;
    assert_eq!(wrong.expect(400)["details"][0]["field"], "password", "{}", wrong.text);
    ada.post("/me/email", json!({ "email": "not an address", "password": PASSWORD })).await.expect(400);
    ada.post("/me/email", json!({ "email": "ADA@profile.example", "password": PASSWORD })).await.expect(400);
    let other = stack.team("Other Team", false, 10).await;
    owner(stack, &other.id, "taken@profile.example").await;
    let taken = ada.post("/me/email", json!({ "email": "Taken@profile.example", "password": PASSWORD })).await;
    assert_eq!(taken.expect(202)["data"]["email"], "taken@profile.example");
    assert!(!taken.text.contains("Other Team"), "{}", taken.text);
    let notice = received(maildir, "uses this address already").await;
    assert!(notice.contains("To: taken@profile.example") && !notice.contains("/confirm-email/"), "{notice}");

    let asked = ada.post("/me/email", json!({ "email": new, "password": PASSWORD })).await;
    let data = asked.expect(202)["data"].clone();
    assert_eq!((data["email"].as_str(), data["mailed"].as_bool()), (Some(new), Some(true)), "{data}");
    let mail = received(maildir, "/confirm-email/").await;
    assert!(mail.contains(&format!("To: {new}")), "{mail}");
    // A line longer than 78 characters is sent quoted-printable: its soft line breaks go.
    let body = mail.replace("=\r\n", "").replace("=\n", "");
    let link = body.split_whitespace().find(|word| word.contains("/confirm-email/")).expect("the link in the mail");
    let token = link.rsplit('/').next().expect("its token").to_owned();

    // Nothing changes until the link is opened.
    sign_in(stack, "ada@profile.example", PASSWORD).await.expect(200);
    assert_eq!(ada.get("/auth/session").await.expect(200)["data"]["user"]["email"], "ada@profile.example");

    let visitor = stack.anonymous();
    visitor.post("/auth/confirm-email", json!({ "token": "not-a-token" })).await.expect(404);
    let confirmed = visitor.post("/auth/confirm-email", json!({ "token": token })).await;
    assert_eq!(confirmed.status, 200, "the link {link} of {mail}: {}", confirmed.text);
    assert_eq!(confirmed.expect(200)["data"]["email"], new);
    visitor.post("/auth/confirm-email", json!({ "token": token })).await.expect(404);

    // The old address is told; the session stays, with the new address; sign-in follows it.
    let notice = received(maildir, "no longer").await;
    assert!(notice.contains("To: ada@profile.example"), "{notice}");
    assert!(notice.contains(new), "{notice}");
    // Gateways keep a session's answer for 2 s at most: the new address shows within that.
    let shown = async {
        while ada.get("/auth/session").await.expect(200)["data"]["user"]["email"] != new {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), shown).await.expect("the session shows the new address within 10 s");
    sign_in(stack, new, PASSWORD).await.expect(200);
    sign_in(stack, "ada@profile.example", PASSWORD).await.expect(401);

    // The audit log has each step.
    let log = ada.get("/audit-log?limit=100").await.expect(200)["data"].clone();
    let actions: Vec<&str> = log.as_array().expect("entries").iter().filter_map(|e| e["action"].as_str()).collect();
    for action in ["user.name_changed", "user.email_change_requested", "user.email_change_failed", "user.email_changed"]
    {
        assert!(actions.contains(&action), "{action} missing from {actions:?}");
    }

    // A viewer changes their own name too: it is theirs, not the team's.
    let invited = ada.post("/members/invitations", json!({ "email": "vic@profile.example", "role": "viewer" })).await;
    let accept = json!({
        "token": token_of(&invited.expect(201)["data"]["url"]), "password": PASSWORD, "firstName": "Vic", "lastName": "V"
    });
    let vic = browser(stack, &stack.anonymous().post("/auth/accept-invite", accept).await);
    vic.post("/agents", json!({ "name": "Nope", "type": "phone" })).await.expect(403);
    vic.patch("/me", json!({ "lastName": "Viewer" })).await.expect(200);
}
