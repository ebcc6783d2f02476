//! Invitation links by e-mail when the platform has SMTP: a local sink (aiosmtpd, from PyPI)
//! receives what a team's invitation and an agency's new subteam send.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::auth::subteam_body;
use crate::common::{Stack, free_port};

/// The text of every message in the sink's maildir.
fn messages(maildir: &Path) -> Vec<String> {
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

async fn received(maildir: &Path, needle: &str) -> String {
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

#[tokio::test]
async fn invitations_are_mailed_when_the_platform_has_smtp() {
    let python = std::env::var("SWITCHBOARD_TEST_SMTP_PYTHON").expect(
        "SWITCHBOARD_TEST_SMTP_PYTHON names a Python with aiosmtpd (scripts/test installs it: ensure_smtp_sink)",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let maildir = dir.path().join("mail");
    let port = free_port();
    let mut sink = tokio::process::Command::new(python)
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

    let smtp = format!("smtp://127.0.0.1:{port}");
    let stack = Stack::start_with(&[
        ("SWITCHBOARD_SMTP_URL", &smtp),
        ("SWITCHBOARD_SMTP_FROM", "Portal <portal@switchboard.example>"),
    ])
    .await;
    let agency = stack.team("Mail Agency", true, 50).await;
    let api = stack.client(&agency.key);

    let invitation = api.post("/members/invitations", json!({ "email": "new.member@mail.example" })).await;
    let url = invitation.expect(201)["data"]["url"].as_str().expect("url").to_owned();
    let mail = received(&maildir, &url).await;
    assert!(mail.contains("To: new.member@mail.example"), "{mail}");
    assert!(mail.contains("portal@switchboard.example"), "{mail}");
    assert!(mail.contains("Mail Agency"), "{mail}");

    let subteam = api.post("/agency/subteams", subteam_body("Mailed Client")).await;
    let invite_url = subteam.expect(201)["data"]["inviteUrl"].as_str().expect("inviteUrl").to_owned();
    let mail = received(&maildir, &invite_url).await;
    assert!(mail.contains("To: grace@client.example"), "{mail}");

    let _ = sink.kill().await;
}
