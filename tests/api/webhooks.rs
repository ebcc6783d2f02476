//! Webhooks as an integrator meets them: endpoints managed over HTTP, events of real changes
//! received by a real HTTP receiver, signatures checked with the Standard Webhooks reference
//! library (PyPI `standardwebhooks`), retries, the failing state, and team isolation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::common::web::{Reply, WebServer};
use crate::common::{Api, Stack};

/// A request the receiver got.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    path: String,
    headers: HashMap<String, String>,
    body: String,
}

impl Received {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("webhook bodies are JSON")
    }

    pub(crate) fn kind(&self) -> String {
        self.json()["type"].as_str().unwrap_or_default().to_owned()
    }
}

/// An HTTP receiver on loopback answering every request with the status of the moment.
pub(crate) struct Receiver {
    pub(crate) url: String,
    status: Arc<AtomicU16>,
    received: Arc<Mutex<Vec<Received>>>,
    /// Stops accepting when the receiver is dropped.
    _server: WebServer,
}

impl Receiver {
    pub(crate) async fn start() -> Receiver {
        let status = Arc::new(AtomicU16::new(200));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (answer, log) = (status.clone(), received.clone());
        let server = WebServer::start(move |request| {
            let body = String::from_utf8_lossy(&request.body).into_owned();
            log.lock().unwrap().push(Received { path: request.target, headers: request.headers, body });
            std::future::ready(Reply::new(answer.load(Ordering::SeqCst)).body("no"))
        })
        .await;
        Receiver { url: server.origin().to_owned(), status, received, _server: server }
    }

    pub(crate) fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    pub(crate) fn on(&self, path: &str) -> Vec<Received> {
        self.received.lock().unwrap().iter().filter(|request| request.path == path).cloned().collect()
    }

    /// Waits (at most 20 s) until `path` got `count` requests; then returns them.
    pub(crate) async fn wait_for(&self, path: &str, count: usize, what: &str) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.on(path);
            if got.len() >= count {
                return got;
            }
            assert!(Instant::now() < deadline, "waited 20 s for {what}: {count} requests on {path}, got {got:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Verifies every request with the reference library, as a receiver would; panics naming
/// the first that fails.
async fn verify_with_reference_library(secret: &str, requests: &[Received]) {
    let python = std::env::var("SWITCHBOARD_TEST_WEBHOOK_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let messages: Vec<Value> =
        requests.iter().map(|request| json!({ "headers": request.headers, "body": request.body })).collect();
    let input = json!({ "secret": secret, "messages": messages }).to_string();
    let script = r#"
import json, sys
from standardwebhooks.webhooks import Webhook
given = json.load(sys.stdin)
hook = Webhook(given["secret"])
for message in given["messages"]:
    hook.verify(message["body"], message["headers"])
print(len(given["messages"]))
"#;
    let mut child = tokio::process::Command::new(&python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python} ({e}); scripts/test installs standardwebhooks"));
    child.stdin.take().unwrap().write_all(input.as_bytes()).await.unwrap();
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the verifier did not finish in 60 s")
        .unwrap();
    assert!(
        output.status.success(),
        "standardwebhooks refused a delivery: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), requests.len().to_string());
}

/// Waits (at most 20 s) until `check` holds for the webhook's deliveries.
pub(crate) async fn deliveries_until(
    api: &Api,
    webhook_id: &str,
    what: &str,
    check: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let page = api.get(&format!("/webhooks/{webhook_id}/deliveries?limit=100")).await;
        let deliveries = page.expect(200)["data"].as_array().unwrap().clone();
        if check(&deliveries) {
            return deliveries;
        }
        assert!(Instant::now() < deadline, "waited 20 s for {what}; deliveries: {deliveries:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const CONTACT_EVENTS: [&str; 3] = ["contact.created", "contact.updated", "contact.deleted"];

#[tokio::test]
async fn webhooks_are_checked_kept_to_their_team_and_never_show_the_secret_again() {
    let stack = Stack::start().await;
    let (mine, theirs) = (stack.team("Hooks", false, 0).await, stack.team("Others", false, 0).await);
    let (api, other) = (stack.client(&mine.key), stack.client(&theirs.key));

    for (body, field) in [
        (json!({ "url": "http://127.0.0.1:9/hook", "events": ["contact.created"] }), "url"),
        (json!({ "url": "http://localhost/hook", "events": ["contact.created"] }), "url"),
        (json!({ "url": "http://[::1]/hook", "events": ["contact.created"] }), "url"),
        (json!({ "url": "http://10.0.0.7/hook", "events": ["contact.created"] }), "url"),
        (json!({ "url": "ftp://hooks.example.com/", "events": ["contact.created"] }), "url"),
        (json!({ "url": "not a url", "events": ["contact.created"] }), "url"),
        (json!({ "url": "https://hooks.example.com/a", "events": [] }), "events"),
        (json!({ "url": "https://hooks.example.com/a", "events": ["contact.exploded"] }), "events[0]"),
        (json!({ "url": "https://hooks.example.com/a", "events": "contact.created" }), "events"),
        (json!({ "events": ["contact.created"] }), "url"),
    ] {
        let refused = api.post("/webhooks", body.clone()).await;
        assert_eq!(refused.error_code(400), "VALIDATION_ERROR", "{body}");
        assert!(refused.fields().iter().any(|f| f == field), "{body}: {:?}", refused.fields());
    }
    let bad_json = api.raw("POST", "/webhooks", Some("application/json"), b"{\"url\":".to_vec()).await;
    assert_eq!(bad_json.status, 400, "{}", bad_json.text);
    assert_eq!(api.get("/webhooks").await.expect(200)["data"], json!([]), "nothing refused was kept");

    let created = api
        .post(
            "/webhooks",
            json!({ "url": "https://hooks.example.com/switchboard", "events": ["contact.created", "call.ended", "contact.created"], "description": "CRM sync" }),
        )
        .await;
    let webhook = created.expect(201)["data"].clone();
    let id = webhook["id"].as_str().unwrap().to_owned();
    assert!(webhook["secret"].as_str().unwrap().starts_with("whsec_"), "{webhook}");
    assert_eq!(webhook["events"], json!(["contact.created", "call.ended"]));
    assert_eq!((webhook["status"].as_str(), webhook["description"].as_str()), (Some("active"), Some("CRM sync")));

    let listed = api.get("/webhooks").await.expect(200)["data"].clone();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(listed[0].get("secret").is_none(), "{listed}");
    let read = api.get(&format!("/webhooks/{id}")).await.expect(200)["data"].clone();
    assert!(read.get("secret").is_none());
    assert_eq!(read["url"], "https://hooks.example.com/switchboard");

    let changed = api.put(&format!("/webhooks/{id}"), json!({ "events": ["contact.updated"] })).await;
    assert_eq!(changed.expect(200)["data"]["events"], json!(["contact.updated"]));
    assert_eq!(changed.body["data"]["description"], "CRM sync", "left out keeps its value");
    let refused = api.put(&format!("/webhooks/{id}"), json!({ "url": "http://192.168.1.1/" })).await;
    assert_eq!(refused.error_code(400), "VALIDATION_ERROR");
    assert_eq!(api.get(&format!("/webhooks/{id}")).await.expect(200)["data"]["url"], read["url"]);

    // Another team sees none of it, and cannot act on it.
    assert_eq!(other.get("/webhooks").await.expect(200)["data"], json!([]));
    assert_eq!(other.get(&format!("/webhooks/{id}")).await.error_code(404), "NOT_FOUND");
    assert_eq!(other.put(&format!("/webhooks/{id}"), json!({ "description": "x" })).await.error_code(404), "NOT_FOUND");
    assert_eq!(other.post(&format!("/webhooks/{id}/test"), json!({})).await.error_code(404), "NOT_FOUND");
    assert_eq!(other.get(&format!("/webhooks/{id}/deliveries")).await.error_code(404), "NOT_FOUND");
    assert_eq!(other.delete(&format!("/webhooks/{id}")).await.error_code(404), "NOT_FOUND");
    let unknown = uuid::Uuid::new_v4();
    assert_eq!(api.get(&format!("/webhooks/{unknown}")).await.error_code(404), "NOT_FOUND");
    let retry = api.post(&format!("/webhooks/{id}/deliveries/{unknown}/retry"), json!({})).await;
    assert_eq!(retry.error_code(404), "NOT_FOUND");
    let bad_status = api.get(&format!("/webhooks/{id}/deliveries?status=lost")).await;
    assert_eq!(bad_status.status, 400, "{}", bad_status.text);

    assert_eq!(api.delete(&format!("/webhooks/{id}")).await.expect(200)["data"]["id"], id.as_str());
    assert_eq!(api.get(&format!("/webhooks/{id}")).await.error_code(404), "NOT_FOUND");
}

/// Contact events end to end: signed, in order, retried, replayed on request, never another
/// team's, never for a change that did not happen.
async fn contact_events_reach_the_receiver(stack: &Stack) {
    let receiver = Receiver::start().await;
    let (mine, theirs) = (stack.team("Receiving", false, 0).await, stack.team("Elsewhere", false, 0).await);
    let (api, other) = (stack.client(&mine.key), stack.client(&theirs.key));
    let hook = api
        .post("/webhooks", json!({ "url": format!("{}/mine", receiver.url), "events": CONTACT_EVENTS }))
        .await
        .expect(201)["data"]
        .clone();
    let (hook_id, secret) = (hook["id"].as_str().unwrap().to_owned(), hook["secret"].as_str().unwrap().to_owned());
    let their_hook =
        other.post("/webhooks", json!({ "url": format!("{}/theirs", receiver.url), "events": CONTACT_EVENTS })).await;
    their_hook.expect(201);

    let created = api.post("/contacts", json!({ "number": "+14155552671", "firstName": "Ada" })).await;
    let contact = created.expect(201)["data"].clone();
    let contact_id = contact["id"].as_str().unwrap().to_owned();
    // A change that fails (the number is taken) tells nobody.
    assert_eq!(api.post("/contacts", json!({ "number": "+14155552671" })).await.status, 409);
    let updated = api.put(&format!("/contacts/{contact_id}"), json!({ "lastName": "Lovelace" })).await;
    let updated = updated.expect(200)["data"].clone();
    let deleted = api.delete(&format!("/contacts/{contact_id}")).await;
    deleted.expect(200);

    let got = receiver.wait_for("/mine", 3, "the three contact events").await;
    let kinds: Vec<String> = got.iter().map(Received::kind).collect();
    assert_eq!(kinds, CONTACT_EVENTS, "in the order they happened");
    assert_eq!(got[0].json()["data"], contact, "the resource as the API showed it");
    assert_eq!(got[1].json()["data"], updated);
    assert!(got[0].json()["timestamp"].as_str().unwrap().ends_with('Z'));
    for request in &got {
        assert_eq!(request.headers.get("content-type").map(String::as_str), Some("application/json"));
        assert!(request.headers["webhook-signature"].starts_with("v1,"), "{request:?}");
    }
    verify_with_reference_library(&secret, &got).await;

    // The test event, to this endpoint alone.
    let queued = api.post(&format!("/webhooks/{hook_id}/test"), json!({})).await;
    let test = queued.expect(202)["data"].clone();
    assert_eq!((test["event"].as_str(), test["status"].as_str()), (Some("webhook.test"), Some("pending")));
    let got = receiver.wait_for("/mine", 4, "the test event").await;
    assert_eq!(got[3].kind(), "webhook.test");
    assert_eq!(got[3].json()["data"]["webhookId"], hook_id.as_str());
    verify_with_reference_library(&secret, &got[3..]).await;
    let delivered = deliveries_until(&api, &hook_id, "four delivered", |all| {
        all.len() == 4 && all.iter().all(|d| d["status"] == "delivered")
    })
    .await;
    assert_eq!(delivered[0]["event"], "webhook.test", "newest first");
    assert!(delivered.iter().all(|d| d["statusCode"] == 200 && d["attempts"] == 1 && d["nextRetryAt"].is_null()));

    // A receiver that fails is retried with the same event id until it answers 2xx.
    receiver.answer(503);
    api.post("/contacts", json!({ "number": "+14155550123" })).await.expect(201);
    let failing = deliveries_until(&api, &hook_id, "a failed attempt", |all| {
        all.len() == 5 && all[0]["statusCode"] == 503 && all[0]["status"] == "pending"
    })
    .await;
    assert!(failing[0]["nextRetryAt"].is_string() && failing[0]["error"].is_string(), "{:#}", failing[0]);
    receiver.answer(200);
    deliveries_until(&api, &hook_id, "the retry to succeed", |all| all[0]["status"] == "delivered").await;
    let retried: Vec<Received> = receiver.on("/mine")[4..].to_vec();
    assert!(retried.len() >= 2, "{retried:?}");
    assert!(retried.iter().all(|r| r.headers["webhook-id"] == retried[0].headers["webhook-id"]));
    verify_with_reference_library(&secret, &retried).await;

    // Sent again on request: the same event id and body.
    let first = &delivered[3];
    let before = receiver.on("/mine").len();
    let again =
        api.post(&format!("/webhooks/{hook_id}/deliveries/{}/retry", first["id"].as_str().unwrap()), json!({})).await;
    assert_eq!(again.expect(202)["data"]["status"], "pending");
    let got = receiver.wait_for("/mine", before + 1, "the manual retry").await;
    assert_eq!(got[before].headers["webhook-id"], got[0].headers["webhook-id"]);
    assert_eq!(got[before].body, got[0].body);

    assert!(receiver.on("/theirs").is_empty(), "another team's webhook got: {:?}", receiver.on("/theirs"));
    // The receiver sees the request before the relay records its answer, so wait for the record.
    deliveries_until(&api, &hook_id, "the manual retry to be recorded", |all| {
        all.iter().all(|d| d["status"] == "delivered")
    })
    .await;
    let pending = api.get(&format!("/webhooks/{hook_id}/deliveries?status=pending")).await;
    assert_eq!(pending.expect(200)["pagination"]["totalCount"], 0);

    // Attempts show in the metrics (dev serves every component's on one admin port).
    if stack.is_dev() {
        let admin = stack.process.line_after("metrics:").expect("dev prints the admin port's metrics URL");
        let text = reqwest::get(&admin).await.unwrap().text().await.unwrap();
        let sample = |outcome: &str| {
            let labels = ["webhook_event=\"contact.created\"", &format!("outcome=\"{outcome}\"")];
            crate::telemetry::sample(&text, "switchboard_webhook_attempts_total", &labels)
        };
        assert!(sample("delivered") >= Some(3.0), "{text}");
        assert!(sample("retry") >= Some(1.0), "{text}");
    }
}

pub(crate) const FAST_RETRIES: [(&str, &str); 2] =
    [("SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE", "true"), ("SWITCHBOARD_WEBHOOK_RETRY_BASE_MS", "200")];

#[tokio::test]
async fn contact_events_are_signed_ordered_and_retried_on_sqlite() {
    let stack = Stack::start_with(&FAST_RETRIES).await;
    contact_events_reach_the_receiver(&stack).await;
}

#[tokio::test]
async fn contact_events_are_signed_ordered_and_retried_on_postgres() {
    let Some(stack) = Stack::serve_on_postgres(&["identity", "crm", "webhooks"], &FAST_RETRIES).await else {
        return;
    };
    contact_events_reach_the_receiver(&stack).await;
}

#[tokio::test]
async fn a_delivery_given_up_marks_the_webhook_failing_until_one_succeeds() {
    let env = [
        ("SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("SWITCHBOARD_WEBHOOK_RETRY_BASE_MS", "100"),
        ("SWITCHBOARD_WEBHOOK_RETRY_FOR_MS", "600"),
    ];
    let stack = Stack::start_with(&env).await;
    let receiver = Receiver::start().await;
    receiver.answer(500);
    let team = stack.team("Down", false, 0).await;
    let api = stack.client(&team.key);
    let hook = api.post("/webhooks", json!({ "url": receiver.url, "events": ["contact.created"] })).await;
    let hook_id = hook.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    api.post("/contacts", json!({ "number": "+14155550188" })).await.expect(201);
    let given_up = deliveries_until(&api, &hook_id, "the delivery to be given up", |all| {
        all.len() == 1 && all[0]["status"] == "failed"
    })
    .await;
    assert!(given_up[0]["attempts"].as_u64().unwrap() >= 2, "{:#}", given_up[0]);
    assert!(given_up[0]["nextRetryAt"].is_null());
    assert_eq!(api.get(&format!("/webhooks/{hook_id}")).await.expect(200)["data"]["status"], "failing");

    receiver.answer(204);
    api.post(&format!("/webhooks/{hook_id}/test"), json!({})).await.expect(202);
    let delivered =
        deliveries_until(&api, &hook_id, "the test to be delivered", |all| all[0]["status"] == "delivered").await;
    assert_eq!(api.get(&format!("/webhooks/{hook_id}")).await.expect(200)["data"]["status"], "active");

    // Issue 55: a delivery shows the payload it sends, as the receiver got it; another team's
    // key finds no such delivery.
    let delivery_id = delivered[0]["id"].as_str().unwrap();
    let path = format!("/webhooks/{hook_id}/deliveries/{delivery_id}");
    let detail = api.get(&path).await.expect(200)["data"].clone();
    assert_eq!(detail["id"], delivery_id);
    assert_eq!(detail["status"], "delivered");
    let sent =
        receiver.on("/").into_iter().find(|request| request.body.contains("webhook.test")).expect("the test event");
    assert_eq!(detail["payload"], serde_json::from_str::<Value>(&sent.body).unwrap());
    let stranger = stack.client(&stack.team("Not theirs", false, 0).await.key);
    assert_eq!(stranger.get(&path).await.error_code(404), "NOT_FOUND");
    // A read-only key reads what the team's full keys read; it may not send it again.
    let reader = stack.client(&stack.key(&team.id, true).await);
    assert_eq!(reader.get(&path).await.expect(200)["data"]["payload"], detail["payload"]);
    let again = format!("/webhooks/{hook_id}/deliveries/{delivery_id}/retry");
    assert_eq!(reader.post(&again, json!({})).await.error_code(403), "FORBIDDEN");
    let unknown = format!("/webhooks/{hook_id}/deliveries/{}", uuid::Uuid::new_v4());
    assert_eq!(api.get(&unknown).await.error_code(404), "NOT_FOUND");
}

/// A paused webhook (issue 40): events for it are held, shown as `held`, not sent; enabling
/// it sends them; the test event and a retry are refused while it is paused; another team
/// cannot switch it.
async fn a_disabled_webhook_holds_events_until_enabled(stack: &Stack) {
    let receiver = Receiver::start().await;
    let (mine, theirs) = (stack.team("Paused", false, 0).await, stack.team("Stranger", false, 0).await);
    let (api, other) = (stack.client(&mine.key), stack.client(&theirs.key));
    let hook = api.post("/webhooks", json!({ "url": format!("{}/held", receiver.url), "events": ["contact.created"] }));
    let hook = hook.await.expect(201)["data"].clone();
    assert_eq!(hook["enabled"], true, "enabled unless said otherwise: {hook}");
    let hook_id = hook["id"].as_str().unwrap().to_owned();
    let path = format!("/webhooks/{hook_id}");

    let theirs = other.put(&path, json!({ "enabled": false })).await;
    assert_eq!(theirs.error_code(404), "NOT_FOUND");
    assert_eq!(api.get(&path).await.expect(200)["data"]["enabled"], true, "another team's switch did nothing");
    let not_bool = api.put(&path, json!({ "enabled": "no" })).await;
    assert_eq!(not_bool.error_code(400), "VALIDATION_ERROR");

    let paused = api.put(&path, json!({ "enabled": false })).await.expect(200)["data"].clone();
    assert_eq!((paused["enabled"].as_bool(), paused["url"].as_str()), (Some(false), hook["url"].as_str()));
    assert_eq!(api.get("/webhooks").await.expect(200)["data"][0]["enabled"], false);

    api.post("/contacts", json!({ "number": "+14155550177", "firstName": "Held" })).await.expect(201);
    let held = deliveries_until(&api, &hook_id, "the event to be held", |all| all.len() == 1).await;
    assert_eq!(held[0]["status"], "held", "{:#}", held[0]);
    assert!(held[0]["nextRetryAt"].is_null() && held[0]["attempts"] == 0, "{:#}", held[0]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(receiver.on("/held").is_empty(), "a disabled webhook was sent: {:?}", receiver.on("/held"));
    let filtered = api.get(&format!("{path}/deliveries?status=held")).await;
    assert_eq!(filtered.expect(200)["pagination"]["totalCount"], 1);
    let pending = api.get(&format!("{path}/deliveries?status=pending")).await;
    assert_eq!(pending.expect(200)["pagination"]["totalCount"], 0, "held is not pending");

    let test = api.post(&format!("{path}/test"), json!({})).await;
    assert_eq!(test.error_code(409), "CONFLICT");
    assert!(test.text.contains("disabled"), "{}", test.text);
    let delivery_id = held[0]["id"].as_str().unwrap();
    let retry = api.post(&format!("{path}/deliveries/{delivery_id}/retry"), json!({})).await;
    assert_eq!(retry.error_code(409), "CONFLICT");

    // Enabled again: the held event is sent, once.
    assert_eq!(api.put(&path, json!({ "enabled": true })).await.expect(200)["data"]["enabled"], true);
    let got = receiver.wait_for("/held", 1, "the held event after enabling").await;
    assert_eq!(got[0].kind(), "contact.created");
    assert_eq!(got[0].headers["webhook-id"], held[0]["eventId"].as_str().unwrap());
    deliveries_until(&api, &hook_id, "the held delivery to be delivered", |all| {
        all.len() == 1 && all[0]["status"] == "delivered"
    })
    .await;

    // Created paused.
    let created = api
        .post(
            "/webhooks",
            json!({ "url": format!("{}/off", receiver.url), "events": ["contact.created"], "enabled": false }),
        )
        .await;
    assert_eq!(created.expect(201)["data"]["enabled"], false);
}

#[tokio::test]
async fn a_disabled_webhook_holds_events_until_enabled_on_sqlite() {
    let stack = Stack::start_with(&FAST_RETRIES).await;
    a_disabled_webhook_holds_events_until_enabled(&stack).await;
}

#[tokio::test]
async fn a_disabled_webhook_holds_events_until_enabled_on_postgres() {
    let Some(stack) = Stack::serve_on_postgres(&["identity", "crm", "webhooks"], &FAST_RETRIES).await else {
        return;
    };
    a_disabled_webhook_holds_events_until_enabled(&stack).await;
}

#[tokio::test]
async fn webpages_tell_when_they_are_ready_and_when_they_fail() {
    use crate::knowledge_sources::{ENV, FAQ, Pages, page, settled, web_server};
    let pages: Pages = Arc::default();
    page(&pages, "/faq", 200, "text/html; charset=utf-8", FAQ);
    let site = web_server(pages.clone()).await;
    let receiver = Receiver::start().await;
    let mut env = ENV.to_vec();
    env.extend(FAST_RETRIES);
    let stack = Stack::start_with(&env).await;
    let team = stack.team("Pages", false, 100).await;
    let api = stack.client(&team.key);
    let hook = json!({ "url": format!("{}/pages", receiver.url), "events": ["webpage.ready", "webpage.failed"] });
    let secret = api.post("/webhooks", hook).await.expect(201)["data"]["secret"].as_str().unwrap().to_owned();
    let kb = crate::knowledgebase::create_knowledgebase(&api, "Support").await;
    let base = format!("/knowledgebase/{}", kb["id"].as_str().unwrap());

    let added = api.post(&format!("{base}/webpages"), json!({ "name": "FAQ", "url": format!("{site}/faq") })).await;
    let webpage_id = added.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    let ready = settled(&api, &format!("{base}/webpages/{webpage_id}")).await;
    let got = receiver.wait_for("/pages", 1, "webpage.ready").await;
    assert_eq!(got[0].kind(), "webpage.ready");
    let data = got[0].json()["data"].clone();
    assert_eq!((data["id"].as_str(), data["status"].as_str()), (Some(webpage_id.as_str()), Some("ready")));
    assert_eq!(data["name"], ready["name"]);

    // A page that is gone fails for good: told once.
    let added = api.post(&format!("{base}/webpages"), json!({ "name": "Gone", "url": format!("{site}/gone") })).await;
    let gone_id = added.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    let failed = settled(&api, &format!("{base}/webpages/{gone_id}")).await;
    assert_eq!(failed["status"], "failed");
    let got = receiver.wait_for("/pages", 2, "webpage.failed").await;
    assert_eq!(got[1].kind(), "webpage.failed");
    assert_eq!(got[1].json()["data"]["id"], gone_id.as_str());
    verify_with_reference_library(&secret, &got).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.on("/pages").len(), 2, "{:?}", receiver.on("/pages"));
}

#[tokio::test]
async fn calls_and_chats_tell_once_when_they_end() {
    use crate::conversations::{Runtime, upsert};
    use switchboard_proto::v1::{EndChatRequest, UpsertChatRequest};
    let stack = Stack::start_with(&FAST_RETRIES).await;
    let receiver = Receiver::start().await;
    let mut runtime = Runtime::connect(&stack).await;
    let team = stack.team("Calls", false, 0).await;
    let api = stack.client(&team.key);
    let hook = json!({ "url": format!("{}/ended", receiver.url), "events": ["call.ended", "chat.ended"] });
    let secret = api.post("/webhooks", hook).await.expect(201)["data"]["secret"].as_str().unwrap().to_owned();
    let agent = api.post("/agents", json!({ "name": "Front desk", "type": "phone" })).await.expect(201)["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let mut call = upsert(&team, "ext-1", "(415) 555-2671", "INCOMING", "2026-03-01T10:00:00Z");
    call.agent_id = Some(agent.clone());
    let call_id = runtime.call(call).await.unwrap();
    runtime.transcript(&team.id, "ext-1", &[(1, "agent", "Hello, Acme dental.", 1_000)]).await;
    // The runtime ends the call twice (a retry): told once.
    for _ in 0..2 {
        runtime.end(&team.id, "ext-1", "2026-03-01T10:02:05Z", "Rescheduled an appointment").await;
    }
    let chat = UpsertChatRequest {
        team_id: team.id.clone(),
        external_id: "web-1".to_owned(),
        agent_id: Some(agent.clone()),
        channel: "web".to_owned(),
        contact_number: None,
        contact_email: Some("grace@example.com".to_owned()),
        started_at: "2026-03-01T11:00:00Z".to_owned(),
    };
    let signed = runtime.signed(chat);
    let chat_id = runtime.client.upsert_chat(signed).await.unwrap().into_inner().id;
    let end = EndChatRequest {
        team_id: team.id.clone(),
        external_id: "web-1".to_owned(),
        ended_at: "2026-03-01T11:05:00Z".to_owned(),
        summary: Some("Asked about delivery".to_owned()),
    };
    let signed = runtime.signed(end);
    runtime.client.end_chat(signed).await.unwrap();

    let mut got = receiver.wait_for("/ended", 2, "call.ended and chat.ended").await;
    // Different resources keep no order between them.
    got.sort_by_key(Received::kind);
    assert_eq!(got.iter().map(Received::kind).collect::<Vec<_>>(), vec!["call.ended", "chat.ended"]);
    let ended = got[0].json()["data"].clone();
    let shown = api.get(&format!("/calls/{call_id}")).await.expect(200)["data"].clone();
    for member in ["id", "from", "to", "type", "status", "duration", "createdAt", "endedAt", "summary", "transcript"] {
        assert_eq!(ended[member], shown[member], "{member}: {ended:#} vs {shown:#}");
    }
    assert_eq!(ended["agent"], json!({ "id": agent, "name": "Front desk" }));
    let chat = got[1].json()["data"].clone();
    assert_eq!((chat["id"].as_str(), chat["status"].as_str()), (Some(chat_id.as_str()), Some("ended")));
    assert_eq!(chat["agent"]["name"], "Front desk");
    verify_with_reference_library(&secret, &got).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.on("/ended").len(), 2, "told once each: {:?}", receiver.on("/ended"));
}

#[tokio::test]
async fn instructions_and_subteams_tell_the_team_that_owns_them() {
    let stack = Stack::start_with(&FAST_RETRIES).await;
    let receiver = Receiver::start().await;
    let agency = stack.team("Agency", true, 1000).await;
    let api = stack.client(&agency.key);
    let hook = json!({ "url": format!("{}/agency", receiver.url), "events": ["agent.instructions.updated", "subteam.created"] });
    let secret = api.post("/webhooks", hook).await.expect(201)["data"]["secret"].as_str().unwrap().to_owned();

    let agent = api.post("/agents", json!({ "name": "Ava", "type": "phone" })).await.expect(201)["data"].clone();
    let path = format!("/agents/{}/instructions", agent["id"].as_str().unwrap());
    let replaced = api.put(&path, json!({ "instructions": "Be brief." })).await.expect(200)["data"].clone();
    let subteam = api.post("/agency/subteams", crate::auth::subteam_body("Client")).await.expect(201)["data"].clone();
    // The subteam's own changes are its own: the agency's webhook does not hear them.
    let client = stack.client(&agency.key);
    let theirs = format!("/agents?teamId={}", subteam["id"].as_str().unwrap());
    client.post(&theirs, json!({ "name": "Bo", "type": "chat" })).await.expect(201);

    let mut got = receiver.wait_for("/agency", 2, "instructions and subteam events").await;
    // Different resources (and services) keep no order between them.
    got.sort_by_key(Received::kind);
    assert_eq!(
        got.iter().map(Received::kind).collect::<Vec<_>>(),
        vec!["agent.instructions.updated", "subteam.created"]
    );
    let told = got[0].json()["data"].clone();
    for member in ["id", "name", "instructions", "version", "updatedAt"] {
        assert_eq!(told[member], replaced[member], "{member}");
    }
    assert_eq!(got[1].json()["data"]["id"], subteam["id"]);
    assert_eq!(got[1].json()["data"]["name"], "Client");
    verify_with_reference_library(&secret, &got).await;
}

#[tokio::test]
async fn credits_low_is_told_once_when_the_balance_crosses_the_threshold() {
    let stack = Stack::start_with(&FAST_RETRIES).await;
    let receiver = Receiver::start().await;
    let agency = stack.team("Spender", true, 100).await;
    let api = stack.client(&agency.key);
    let hook = json!({ "url": format!("{}/credits", receiver.url), "events": ["credits.low"] });
    let secret = api.post("/webhooks", hook).await.expect(201)["data"]["secret"].as_str().unwrap().to_owned();
    assert_eq!(api.get("/credits/alert").await.expect(200)["data"], json!({ "threshold": null, "balance": 100 }));
    for bad in [json!({ "threshold": -1 }), json!({ "threshold": "10" }), json!({ "threshold": 1.5 })] {
        assert_eq!(api.put("/credits/alert", bad.clone()).await.status, 400, "{bad}");
    }
    let set = api.put("/credits/alert", json!({ "threshold": 85 })).await;
    assert_eq!(set.expect(200)["data"], json!({ "threshold": 85, "balance": 100 }));

    // Subteams are paid from the agency's balance: 100 → 90 stays above, 90 → 80 crosses, 80 → 70 is under already.
    for (name, credits) in [("A", 10), ("B", 10), ("C", 10)] {
        let mut body = crate::auth::subteam_body(name);
        body["totalMonthlyCredits"] = json!(credits);
        body["email"] = json!(format!("{name}@client.example"));
        api.post("/agency/subteams", body).await.expect(201);
    }
    let got = receiver.wait_for("/credits", 1, "credits.low").await;
    assert_eq!(got[0].kind(), "credits.low");
    assert_eq!(got[0].json()["data"], json!({ "teamId": agency.id, "balance": 80, "threshold": 85 }));
    verify_with_reference_library(&secret, &got).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.on("/credits").len(), 1, "told once per crossing: {:?}", receiver.on("/credits"));
    let cleared = api.put("/credits/alert", json!({ "threshold": null })).await;
    assert_eq!(cleared.expect(200)["data"]["threshold"], Value::Null);
}

/// A subteam's webhooks receive only what its access configuration shows, whoever made them and
/// whenever the setting changed: switched off after the subscription, the event is not sent.
#[tokio::test]
async fn a_subteam_receives_no_event_its_access_settings_hide() {
    let stack = Stack::start_with(&FAST_RETRIES).await;
    let receiver = Receiver::start().await;
    let agency = stack.team("Agency", true, 1000).await;
    let api = stack.client(&agency.key);
    let subteam = api.post("/agency/subteams", crate::auth::subteam_body("Client")).await.expect(201)["data"].clone();
    let subteam_id = subteam["id"].as_str().unwrap().to_owned();
    let own = stack.client(&stack.key(&subteam_id, false).await);
    let hook = json!({ "url": format!("{}/client", receiver.url), "events": ["agent.instructions.updated"] });
    own.post("/webhooks", hook).await.expect(201);
    let agent = own.post("/agents", json!({ "name": "Ava", "type": "phone" })).await.expect(201)["data"].clone();
    let instructions = format!("/agents/{}/instructions?teamId={subteam_id}", agent["id"].as_str().unwrap());
    let settings = format!("/agency/subteams/{subteam_id}");

    // Switched off after the subscription: the agency's change is not told to the subteam.
    api.put(&settings, json!({ "accessConfig": { "instructions": false } })).await.expect(200);
    api.put(&instructions, json!({ "instructions": "The agency's secret playbook." })).await.expect(200);
    // On again once the hidden event has been published (the outbox is relayed every 100 ms),
    // so that it met the setting off: the next change is told. Events of one agent leave its
    // outbox in order, so the hidden one would have arrived first.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    api.put(&settings, json!({ "accessConfig": { "instructions": true } })).await.expect(200);
    api.put(&instructions, json!({ "instructions": "Be brief." })).await.expect(200);
    let got = receiver.wait_for("/client", 1, "the instructions event after the setting came back").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = if got.len() == 1 { receiver.on("/client") } else { got };
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].json()["data"]["instructions"], "Be brief.");
    assert!(got.iter().all(|request| !request.body.contains("secret playbook")), "{got:?}");
}

/// The same for a call: a subteam subscribed to `call.ended` while `conversations` was open is
/// not told of a call that ends after its agency closed it (the call's transcript would reach
/// it), and is told again once it is open.
#[tokio::test]
async fn a_subteam_is_not_told_of_calls_its_access_settings_hide() {
    use crate::common::Team;
    use crate::conversations::{Runtime, upsert};
    let stack = Stack::start_with(&FAST_RETRIES).await;
    let receiver = Receiver::start().await;
    let mut runtime = Runtime::connect(&stack).await;
    let agency = stack.team("Agency", true, 1000).await;
    let api = stack.client(&agency.key);
    let subteam = api.post("/agency/subteams", crate::auth::subteam_body("Client")).await.expect(201)["data"].clone();
    let subteam = Team {
        id: subteam["id"].as_str().unwrap().to_owned(),
        key: stack.key(subteam["id"].as_str().unwrap(), false).await,
    };
    let own = stack.client(&subteam.key);
    let hook = json!({ "url": format!("{}/client", receiver.url), "events": ["call.ended"] });
    own.post("/webhooks", hook).await.expect(201);
    let settings = format!("/agency/subteams/{}", subteam.id);

    api.put(&settings, json!({ "accessConfig": { "conversations": false } })).await.expect(200);
    runtime.call(upsert(&subteam, "hidden", "(415) 555-2671", "INCOMING", "2026-03-01T10:00:00Z")).await.unwrap();
    runtime.transcript(&subteam.id, "hidden", &[(1, "caller", "My card number is 4111.", 1_000)]).await;
    runtime.end(&subteam.id, "hidden", "2026-03-01T10:01:00Z", "A hidden call").await;
    // Relayed every 100 ms: the hidden event has met the setting off before it opens again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    api.put(&settings, json!({ "accessConfig": { "conversations": true } })).await.expect(200);
    runtime.call(upsert(&subteam, "shown", "(415) 555-2672", "INCOMING", "2026-03-01T11:00:00Z")).await.unwrap();
    runtime.end(&subteam.id, "shown", "2026-03-01T11:01:00Z", "A shown call").await;

    receiver.wait_for("/client", 1, "call.ended of the call after the setting came back").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = receiver.on("/client");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].json()["data"]["summary"], "A shown call");
    assert!(got.iter().all(|request| !request.body.contains("4111")), "{got:?}");
}
