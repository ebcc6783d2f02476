//! Webpages and documents through the gateway, against a real web server started here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::agents::{create_agent, id};
use crate::common::multipart::{self, Part};
use crate::common::web::{Reply, WebServer};
use crate::common::{Api, Stack};
use crate::knowledgebase::create_knowledgebase;

pub const ENV: &[(&str, &str)] = &[
    ("SWITCHBOARD_RATE_LIMIT_WRITE", "100000"),
    ("SWITCHBOARD_RATE_LIMIT_SEARCH", "100000"),
    ("SWITCHBOARD_RATE_LIMIT_STANDARD", "100000"),
    ("SWITCHBOARD_SCRAPE_ALLOW_PRIVATE", "true"),
    ("SWITCHBOARD_SCRAPE_TIMEOUT_MS", "2000"),
    ("SWITCHBOARD_JOB_BACKOFF_MS", "200"),
];

pub const FAQ: &str = r#"<html><head><title>Acme FAQ</title><script>var hidden = "tracking-script-text";</script></head>
<body><nav><a href="/">Home</a> Navigation menu entry</nav>
<div class="cookie-banner">We use cookies. Accept all cookies?</div>
<main><h1>Acme FAQ</h1>
<h2>Shipping to Norway</h2><p>Our warehouse in Tromso ships orders to Norway every Tuesday and Friday.</p>
<h2>Returns</h2><p>Unused items can be returned within 30 days for a full refund.</p>
</main><footer>Copyright Acme</footer></body></html>"#;

/// `path → (status, content type, body)`; tests change it between scrapes.
pub type Pages = Arc<Mutex<HashMap<String, (u16, String, String)>>>;

/// The test web server serving `pages` by request target; anything else is a 404.
pub async fn web_server(pages: Pages) -> WebServer {
    WebServer::start(move |request| {
        let found = pages.lock().unwrap().get(&request.target).cloned();
        let (status, content_type, body) = found.unwrap_or((404, "text/plain".into(), "not found".into()));
        std::future::ready(Reply::new(status).header("Content-Type", &content_type).body(body))
    })
    .await
}

pub fn page(pages: &Pages, path: &str, status: u16, content_type: &str, body: &str) {
    pages.lock().unwrap().insert(path.to_owned(), (status, content_type.to_owned(), body.to_owned()));
}

/// Polls a webpage or document until it is no longer updating.
pub async fn settled(api: &Api, path: &str) -> Value {
    for _ in 0..300 {
        let current = api.get(path).await.expect(200)["data"].clone();
        if current["isUpdating"] == false {
            return current;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{path} kept updating");
}

async fn search(api: &Api, base: &str, query: &str) -> Value {
    api.get(&format!("{base}/search?query={}&limit=3", query.replace(' ', "%20"))).await.expect(200)["data"].clone()
}

#[tokio::test]
async fn a_webpage_is_scraped_searchable_refreshed_once_a_day_and_deleted() {
    let pages: Pages = Arc::default();
    page(&pages, "/faq", 200, "text/html; charset=utf-8", FAQ);
    page(&pages, "/robots.txt", 200, "text/plain", "User-agent: *\nDisallow: /private\n");
    let site = web_server(pages.clone()).await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 100).await;
    let api = stack.client(&team.key);
    let kb = create_knowledgebase(&api, "Support").await;
    let agent = create_agent(&api, "Desk", json!({ "knowledgebaseId": kb["id"] })).await;
    let base = format!("/agents/{}/knowledgebase", id(&agent));

    let added = api.post(&format!("{base}/webpages"), json!({ "name": "FAQ", "url": format!("{site}/faq") })).await;
    let webpage = added.expect(201)["data"].clone();
    assert_eq!((webpage["status"].as_str(), webpage["isUpdating"].as_bool()), (Some("pending"), Some(true)));
    let path = format!("{base}/webpages/{}", id(&webpage));
    let ready = settled(&api, &path).await;
    assert_eq!(ready["status"], "ready", "{ready}");
    assert!(ready["lastScrapedAt"].is_string());
    let content = ready["content"].as_array().unwrap();
    let text = serde_json::to_string(content).unwrap();
    assert!(text.contains("ships orders to Norway"), "{text}");
    for noise in ["tracking-script-text", "Navigation menu", "Accept all cookies", "Copyright"] {
        assert!(!text.contains(noise), "{noise} leaked into {text}");
    }
    assert_eq!(content[0]["source"], json!({ "type": "webpage", "id": webpage["id"], "name": "FAQ" }));

    let hits = search(&api, &base, "when do you ship to Norway").await;
    assert_eq!(hits[0]["reference"]["source"]["type"], "webpage");
    assert!(hits[0]["reference"]["answer"].as_str().unwrap().contains("Tuesday"));
    let whole = api.get(&format!("/knowledgebase/{}", id(&kb))).await.expect(200)["data"].clone();
    assert_eq!(whole["references"], json!([]), "extracted entries are not manual references");
    assert_eq!(whole["webpages"][0]["id"], webpage["id"]);

    // A new url is not scraped until the next refresh.
    let moved = api.put(&path, json!({ "url": format!("{site}/faq-v2"), "notes": "Main FAQ" })).await;
    assert_eq!(moved.expect(200)["data"]["status"], "ready");
    page(&pages, "/faq-v2", 200, "text/html", &FAQ.replace("Tuesday and Friday", "Monday and Thursday"));

    let refreshed = api.post(&format!("{path}/refresh"), json!(null)).await;
    assert_eq!(refreshed.expect(200)["data"]["status"], "refreshing");
    assert_eq!(refreshed.body["data"]["url"], format!("{site}/faq-v2"));
    let again = api.post(&format!("{path}/refresh"), json!(null)).await;
    assert!(again.status == 409 || again.status == 429, "{}", again.text);
    let after = settled(&api, &path).await;
    assert!(serde_json::to_string(&after["content"]).unwrap().contains("Monday and Thursday"));
    let limited = api.post(&format!("{path}/refresh"), json!(null)).await;
    assert_eq!(limited.error_code(429), "RATE_LIMITED");
    assert!(limited.body["nextAvailableAt"].is_string());
    assert_eq!(limited.body["resetAt"], limited.body["nextAvailableAt"], "every 429 carries resetAt");
    assert!(limited.header("retry-after").is_some_and(|s| s.parse::<i64>().unwrap() > 86_000));

    // Another team sees nothing of it.
    let other = stack.team("Other", false, 10).await;
    let other_api = stack.client(&other.key);
    let foreign = format!("/knowledgebase/{}/webpages/{}", id(&kb), id(&webpage));
    assert_eq!(other_api.get(&foreign).await.status, 404);
    assert_eq!(other_api.post(&format!("{foreign}/refresh"), json!(null)).await.status, 404);
    assert_eq!(other_api.delete(&foreign).await.status, 404);

    assert_eq!(api.delete(&path).await.status, 200);
    assert_eq!(api.get(&path).await.status, 404);
    assert!(search(&api, &base, "when do you ship to Norway").await.as_array().unwrap().is_empty());
}

#[tokio::test]
async fn pages_that_cannot_be_scraped_fail_with_a_reason() {
    let pages: Pages = Arc::default();
    page(&pages, "/robots.txt", 200, "text/plain", "User-agent: *\nDisallow: /private\n");
    page(&pages, "/data.json", 200, "application/json", "{\"a\":1}");
    page(&pages, "/private/page", 200, "text/html", FAQ);
    let site = web_server(pages).await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));

    for (url, reason) in [("/missing", "404"), ("/data.json", "not HTML"), ("/private/page", "robots")] {
        let added =
            api.post(&format!("{base}/webpages"), json!({ "name": "Bad", "url": format!("{site}{url}") })).await;
        let path = format!("{base}/webpages/{}", id(&added.expect(201)["data"]));
        let failed = settled(&api, &path).await;
        assert_eq!(failed["status"], "failed", "{url}: {failed}");
        assert!(failed["failureReason"].as_str().unwrap().contains(reason), "{url}: {failed}");
    }
    for url in ["ftp://example.com/file", "not a url"] {
        let refused = api.post(&format!("{base}/webpages"), json!({ "name": "Bad", "url": url })).await;
        assert_eq!(refused.error_code(400), "VALIDATION_ERROR", "{url}");
    }
}

#[tokio::test]
async fn documents_are_uploaded_extracted_searchable_and_deleted() {
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 100).await;
    let api = stack.client(&team.key);
    let kb = create_knowledgebase(&api, "Support").await;
    let base = format!("/knowledgebase/{}", id(&kb));
    let documents = format!("{base}/documents");

    let text = b"The blue parrot named Captain lives in the lobby of our Lisbon office and greets every visitor.";
    let (content_type, body) =
        multipart::form(&[Part::field("notes", b"Lobby facts"), Part::file("file", "parrot.txt", text)]);
    let uploaded = api.raw("POST", &documents, Some(&content_type), body).await;
    let document = uploaded.expect(201)["data"].clone();
    assert_eq!(document["fileName"], "parrot.txt");
    assert_eq!(document["name"], "parrot.txt");
    assert_eq!(document["notes"], "Lobby facts");
    let path = format!("{documents}/{}", id(&document));
    let ready = settled(&api, &path).await;
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(ready["content"][0]["source"]["type"], "document");
    let hits = search(&api, &base, "who greets visitors in Lisbon").await;
    assert_eq!(hits[0]["reference"]["source"]["id"], document["id"]);

    let csv = b"question,answer\nDo you open on Sundays?,We open from 10 to 16 on Sundays.\n";
    let (content_type, body) =
        multipart::form(&[Part::field("name", b"Opening FAQ"), Part::file("file", "faq.csv", csv)]);
    let faq = api.raw("POST", &documents, Some(&content_type), body).await.expect(201)["data"].clone();
    let faq = settled(&api, &format!("{documents}/{}", id(&faq))).await;
    assert_eq!(faq["content"][0]["question"], "Do you open on Sundays?");

    let renamed = api.put(&path, json!({ "name": "Parrot", "notes": null })).await;
    assert_eq!(renamed.expect(200)["data"]["name"], "Parrot");
    assert_eq!(renamed.body["data"]["notes"], Value::Null);

    // Rejections store nothing.
    let (content_type, body) = multipart::form(&[Part::file("file", "virus.exe", b"MZ\0\0")]);
    let unsupported = api.raw("POST", &documents, Some(&content_type), body).await;
    assert_eq!(unsupported.error_code(415), "UNSUPPORTED_MEDIA_TYPE");
    assert!(unsupported.body["hint"].as_str().unwrap().contains(".pdf"));
    let (content_type, body) = multipart::form(&[Part::file("file", "fake.pdf", b"this is not a pdf")]);
    let unreadable = api.raw("POST", &documents, Some(&content_type), body).await;
    assert_eq!(unreadable.error_code(422), "UNPROCESSABLE_ENTITY");
    assert!(unreadable.body["hint"].is_string());
    let (content_type, body) = multipart::form(&[Part::file("file", "big.txt", &vec![b'a'; 21 * 1024 * 1024])]);
    assert_eq!(api.raw("POST", &documents, Some(&content_type), body).await.status, 413);
    let not_multipart = api.raw("POST", &documents, Some("application/json"), b"{}".to_vec()).await;
    assert_eq!(not_multipart.error_code(415), "UNSUPPORTED_MEDIA_TYPE");
    let listed = api.get(&base).await.expect(200)["data"]["documents"].clone();
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");

    let other = stack.team("Other", false, 10).await;
    assert_eq!(stack.client(&other.key).get(&path).await.status, 404);

    assert_eq!(api.delete(&path).await.status, 200);
    assert_eq!(api.get(&path).await.status, 404);
    let hits = search(&api, &base, "who greets visitors in Lisbon").await;
    assert!(hits.as_array().unwrap().iter().all(|hit| hit["reference"]["source"]["id"] != document["id"]));
}

/// A day of three seconds: a daily page is due three seconds after its last refresh.
const SHORT_DAY: &[(&str, &str)] = &[("SWITCHBOARD_WEBPAGE_REFRESH_DAY", "3s")];

/// Polls the page until its content holds `text` (the scheduled refresh ran), at most 30 s.
async fn refreshed_to(api: &Api, path: &str, text: &str) -> Value {
    for _ in 0..300 {
        let current = api.get(path).await.expect(200)["data"].clone();
        if current["isUpdating"] == false && serde_json::to_string(&current["content"]).unwrap().contains(text) {
            return current;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{path} was not refreshed to hold {text:?} within 30 s");
}

fn ms(value: &Value) -> i64 {
    switchboard_kit::time::parse_date_time_ms(value.as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn a_daily_webpage_refreshes_itself_by_the_manual_rules_and_after_a_restart() {
    let pages: Pages = Arc::default();
    page(&pages, "/hours", 200, "text/html", FAQ);
    // The same text at another address: one knowledge base holds a page once (issue 40).
    page(&pages, "/hours-copy", 200, "text/html", FAQ);
    let site = web_server(pages.clone()).await;
    let env: Vec<_> = ENV.iter().chain(SHORT_DAY).copied().collect();
    // Always `switchboard dev` on a data directory (not the Qdrant-server variant of
    // `start_with`), so that the same platform can be stopped and started again below.
    let stack = Stack::start_in(tempfile::tempdir().expect("a data directory"), &env).await;
    let team = stack.team("Acme", false, 100).await;
    let api = stack.client(&team.key);
    let kb = create_knowledgebase(&api, "Support").await;
    let base = format!("/knowledgebase/{}/webpages", id(&kb));

    let bad =
        api.post(&base, json!({ "name": "FAQ", "url": format!("{site}/hours"), "refreshInterval": "hourly" })).await;
    assert_eq!(bad.fields(), ["refreshInterval"]);
    let plain = api.post(&base, json!({ "name": "Plain", "url": format!("{site}/hours-copy") })).await;
    assert_eq!(
        (plain.expect(201)["data"]["refreshInterval"].as_str(), plain.body["data"]["nextRefreshAt"].is_null()),
        (Some("off"), true)
    );
    let added =
        api.post(&base, json!({ "name": "FAQ", "url": format!("{site}/hours"), "refreshInterval": "daily" })).await;
    let webpage = added.expect(201)["data"].clone();
    assert_eq!(webpage["refreshInterval"], "daily");
    let created = ms(&webpage["createdAt"]);
    assert_eq!(ms(&webpage["nextRefreshAt"]), created + 3_000);
    let path = format!("{base}/{}", id(&webpage));
    let first = settled(&api, &path).await;
    assert!(serde_json::to_string(&first["content"]).unwrap().contains("Tuesday and Friday"));

    // The page changes; a day later the service refreshes it by itself.
    page(&pages, "/hours", 200, "text/html", &FAQ.replace("Tuesday and Friday", "Monday and Thursday"));
    let second = refreshed_to(&api, &path, "Monday and Thursday").await;
    let started = ms(&second["nextRefreshAt"]) - 3_000;
    assert!(started >= created + 3_000, "the scheduled refresh started {} ms after creation", started - created);
    // It counts as the day's refresh: a manual one is refused until the next is due (or, on a
    // machine so slow that the next day came meanwhile, because that one is running).
    let limited = api.post(&format!("{path}/refresh"), json!(null)).await;
    match limited.status {
        429 => assert!(ms(&limited.body["nextAvailableAt"]) >= ms(&second["nextRefreshAt"]), "{}", limited.text),
        409 => assert_eq!(limited.error_code(409), "CONFLICT"),
        status => panic!("a manual refresh after a scheduled one answered {status}: {}", limited.text),
    }
    // The page that was not scheduled was scraped once only.
    let plain_path = format!("{base}/{}", plain.body["data"]["id"].as_str().unwrap());
    assert!(
        serde_json::to_string(&settled(&api, &plain_path).await["content"]).unwrap().contains("Tuesday and Friday")
    );

    // The schedule is kept in the database: it goes on after a restart.
    page(&pages, "/hours", 200, "text/html", &FAQ.replace("Tuesday and Friday", "Wednesday and Saturday"));
    let Stack { process, data_dir, .. } = stack;
    assert_eq!(process.terminate().await, Some(0));
    let again = Stack::start_in(data_dir, &env).await;
    let api = again.client(&team.key);
    let third = refreshed_to(&api, &path, "Wednesday and Saturday").await;
    assert!(ms(&third["nextRefreshAt"]) >= ms(&second["nextRefreshAt"]) + 3_000);

    // Turned off, it is left alone.
    let off = api.put(&path, json!({ "refreshInterval": "off" })).await;
    assert_eq!(
        (off.expect(200)["data"]["refreshInterval"].as_str(), off.body["data"]["nextRefreshAt"].is_null()),
        (Some("off"), true)
    );
    assert_eq!(api.put(&path, json!({ "refreshInterval": 7 })).await.fields(), ["refreshInterval"]);
}
