//! The portal in a real browser: tests/portal/run.mjs (Playwright driving Debian's Chromium,
//! axe-core in each page) against this stack, from an owner's invitation to keys, members,
//! subteams and the audit log, then the workspace (tests/portal/workspace/: agents, knowledge,
//! calls and chats, contacts and import, boards, webhooks, usage) on a team filled by
//! `admin seed-demo` through the ingestion gRPC API, with a call and a chat made of HTML and
//! script (`--hostile`). Screenshots of every page are kept in
//! `$CARGO_TARGET_DIR/portal-screenshots` (or `target/portal-screenshots`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::Stack;
use crate::common::web::{Reply, Request, WebServer};

/// Every step of the run waits at most 10 s; the whole run at most this.
const RUN_LIMIT: Duration = Duration::from_secs(900);

/// One person clicks through every page in a few minutes: far more reads than the spec's
/// 100 a minute per team, which the limit tests check elsewhere. Webhooks and webpages are
/// served by the test itself, on loopback.
const ENV: &[(&str, &str)] = &[
    ("SWITCHBOARD_RATE_LIMIT_STANDARD", "100000"),
    ("SWITCHBOARD_RATE_LIMIT_WRITE", "100000"),
    ("SWITCHBOARD_RATE_LIMIT_SEARCH", "100000"),
    ("SWITCHBOARD_RATE_LIMIT_AUTH", "1000"),
    ("SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE", "true"),
    ("SWITCHBOARD_SCRAPE_ALLOW_PRIVATE", "true"),
    // Short enough that the security steps meet "Confirm it is you" once for certain (they
    // wait it out), long enough that a set-up begun after a proof finishes without another.
    ("SWITCHBOARD_REAUTH_AFTER", "10s"),
];

#[tokio::test]
async fn the_portal_works_in_a_real_browser() {
    let runner = std::env::var("SWITCHBOARD_TEST_PORTAL")
        .expect("SWITCHBOARD_TEST_PORTAL names tests/portal/run.mjs (scripts/test installs it: ensure_portal_tests)");
    // The profile's e-mail change follows the link the platform mails (issue 40, defect 7).
    let (mail_dir, mut sink, smtp) = crate::mail::smtp_sink().await;
    // The agents' "Try it" chat talks to this model (the knowledge steps' extraction gets 404
    // from it and keeps the heading pairs, as with no model).
    let model = WebServer::start(|request| std::future::ready(chat_reply(&request))).await;
    let model_url = model.url("/v1");
    let mut env = ENV.to_vec();
    env.push(("SWITCHBOARD_SMTP_URL", &smtp));
    env.push(("SWITCHBOARD_LLM_URL", &model_url));
    let stack = Stack::start_with(&env).await;
    let agency = stack.team("Browser Agency", true, 500).await;
    let seed = stack
        .admin(&[
            "seed-demo",
            "--team",
            &agency.id,
            "--calls",
            "60",
            "--chats",
            "12",
            "--recordings",
            "4",
            "--recording-kb",
            "1200",
            "--contacts",
            "40",
            "--hostile",
        ])
        .await;
    assert!(seed["hostile"]["callId"].is_string(), "seed-demo wrote the hostile call: {seed}");
    let seed_file = stack.data_path().join("portal-seed.json");
    std::fs::write(&seed_file, seed.to_string()).expect("writing the seed file");
    let invitation = stack.admin(&["invite", "--team", &agency.id, "--email", "owner@browser-agency.example"]).await;
    let url = invitation["url"].as_str().expect("an invitation link");
    let portal = stack.base.trim_end_matches("/v1").to_owned();
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    let shots = std::path::Path::new(&target).join("portal-screenshots");

    let mut command = tokio::process::Command::new("node");
    command
        .arg(&runner)
        .env("PORTAL_URL", &portal)
        .env("OWNER_INVITE_URL", url)
        .env("SCREENSHOT_DIR", &shots)
        .env("PORTAL_SEED", &seed_file)
        .env("PORTAL_MAILDIR", mail_dir.path().join("mail"))
        .kill_on_drop(true);
    let output = tokio::time::timeout(RUN_LIMIT, command.output())
        .await
        .unwrap_or_else(|_| panic!("the browser run did not finish in {RUN_LIMIT:?}"))
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the browser run failed ({}); screenshots in {}\n{stdout}\n{stderr}",
        output.status,
        shots.display()
    );
    println!("{stdout}");
    let _ = sink.kill().await;
}

/// A streamed chat reply that says what the knowledge base gave the model: "From what I know: "
/// and the first entry's answer, in three pieces; without an entry, a greeting. A request that
/// does not stream (the knowledgebase's extraction) gets 404.
fn chat_reply(request: &Request) -> Reply {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    if request.path() != "/v1/chat/completions" || body["stream"] != true {
        return Reply::new(404).body("not here");
    }
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let answer = system.lines().find_map(|line| line.strip_prefix("A: ")).map(str::to_owned);
    let text = match answer {
        Some(answer) => format!("From what I know: {answer}"),
        None => "Hello! How can I help?".to_owned(),
    };
    let middle = (0..=text.len() / 2).rev().find(|&at| text.is_char_boundary(at)).unwrap_or(0);
    let (head, tail) = text.split_at(middle);
    let mut events = String::new();
    for piece in ["", head, tail] {
        let chunk = json!({ "choices": [{ "delta": { "content": piece } }] });
        events.push_str(&format!("data: {chunk}\n\n"));
    }
    events.push_str("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    Reply::new(200).header("Content-Type", "text/event-stream").body(events)
}
