//! Webpages and documents as sources of a knowledge base: scraped or extracted by background
//! jobs into Q&A entries that search finds. A small web server in this file plays the
//! website; documents are made here too (text, Markdown, HTML, CSV, DOCX, PDF).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::agents::{create_agent, id};
use crate::common::multipart::{self, Part};
use crate::common::web::{Reply, Request, WebServer};
use crate::common::{Api, Response, Stack};
use crate::knowledgebase::create_knowledgebase;
use serde_json::{Value, json};

/// Limits lifted, loopback pages allowed, and jobs, timeouts and sizes small enough for tests.
pub(crate) const ENV: &[(&str, &str)] = &[
    ("SWITCHBOARD_RATE_LIMIT_WRITE", "100000"),
    ("SWITCHBOARD_RATE_LIMIT_STANDARD", "100000"),
    ("SWITCHBOARD_RATE_LIMIT_SEARCH", "100000"),
    ("SWITCHBOARD_SCRAPE_ALLOW_PRIVATE", "true"),
    ("SWITCHBOARD_JOB_BACKOFF_MS", "200"),
    ("SWITCHBOARD_JOB_LEASE_MS", "1500"),
    ("SWITCHBOARD_SCRAPE_TIMEOUT_MS", "2000"),
    ("SWITCHBOARD_SCRAPE_MAX_BYTES", "1000000"),
];

const WEBPAGE_FIELDS: &[&str] = &[
    "createdAt",
    "entryCount",
    "failureReason",
    "id",
    "isUpdating",
    "lastScrapedAt",
    "name",
    "nextRefreshAt",
    "notes",
    "refreshInterval",
    "status",
    "updatedAt",
    "url",
];

const DOCUMENT_FIELDS: &[&str] = &[
    "contentType",
    "createdAt",
    "entryCount",
    "extractedAt",
    "failureReason",
    "fileName",
    "id",
    "isUpdating",
    "name",
    "notes",
    "size",
    "status",
    "updatedAt",
];

pub(crate) const SHIPPING: &str = "Our warehouse in Tromsø ships orders every Tuesday and Friday.";
pub(crate) const RETURNS: &str = "Unworn jackets can be returned within 60 days for a full refund.";
pub(crate) const REPAIRS: &str = "Our repair workshop in Bodø mends zippers and seams free of charge for two years.";
/// Words of the page's chrome (script, navigation, cookie banner) that must not be indexed.
const CHROME: &[&str] = &["zebra-pixel", "alpaca", "cookies", "Accept all"];

fn faq_page(shipping: &str) -> String {
    format!(
        r#"<!doctype html><html><head><title>Nordlys Outdoor FAQ</title>
<script>window.tracker = "zebra-pixel"; document.title = "Shop the alpaca collection";</script>
<style>.cookie-banner {{ position: fixed; }}</style></head>
<body>
  <nav><a href="/">Home</a> <a href="/shop">Shop the alpaca collection</a></nav>
  <div class="cookie-banner">We use cookies to improve your visit. <a href="/ok">Accept all</a></div>
  <main>
    <h1>Frequently asked questions</h1>
    <p>Nordlys sells outdoor clothing for arctic weather.</p>
    <h2>When do you ship orders?</h2>
    <p>{shipping}</p>
    <h2>Can I return a jacket?</h2>
    <p>{RETURNS}</p>
    <h2>Do you offer repairs?</h2>
    <p>{REPAIRS}</p>
  </main>
</body></html>"#
    )
}

// ---------------------------------------------------------------------------------------
// The website, on the shared test web server.

struct SiteState {
    faq: Mutex<String>,
    faq_status: AtomicU16,
    faq_delay_ms: AtomicU64,
    robots_status: AtomicU16,
    hits: Mutex<HashMap<String, usize>>,
}

pub(crate) struct Site {
    server: WebServer,
    state: Arc<SiteState>,
}

impl Site {
    pub(crate) async fn start() -> Site {
        let state = Arc::new(SiteState {
            faq: Mutex::new(faq_page(SHIPPING)),
            faq_status: AtomicU16::new(200),
            faq_delay_ms: AtomicU64::new(0),
            robots_status: AtomicU16::new(200),
            hits: Mutex::new(HashMap::new()),
        });
        let shared = state.clone();
        let server = WebServer::start(move |request| answer(request, shared.clone())).await;
        Site { server, state }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    fn set_faq(&self, html: String) {
        *self.state.faq.lock().unwrap() = html;
    }

    /// `/faq` answers with this status (200 serves the page).
    fn faq_status(&self, status: u16) {
        self.state.faq_status.store(status, Ordering::SeqCst);
    }

    /// `/faq` waits this long before it answers.
    fn faq_delay(&self, ms: u64) {
        self.state.faq_delay_ms.store(ms, Ordering::SeqCst);
    }

    /// `/robots.txt` answers with this status (200 serves the rules).
    fn robots_status(&self, status: u16) {
        self.state.robots_status.store(status, Ordering::SeqCst);
    }

    /// Requests received for `path` (without query).
    pub(crate) fn hits(&self, path: &str) -> usize {
        self.state.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    fn total_hits(&self) -> usize {
        self.state.hits.lock().unwrap().values().sum()
    }

    /// Waits (up to 60 s) until `path` was requested at least `count` times.
    async fn wait_for_hits(&self, path: &str, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.hits(path) < count {
            assert!(Instant::now() < deadline, "{path} was requested {} times, not {count}", self.hits(path));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

const HTML: (&str, &str) = ("Content-Type", "text/html; charset=utf-8");

/// A reply with these headers and body.
fn reply(status: u16, headers: &[(&str, &str)], body: impl Into<Vec<u8>>) -> Reply {
    headers.iter().fold(Reply::new(status), |reply, (name, value)| reply.header(name, value)).body(body)
}

async fn answer(request: Request, state: Arc<SiteState>) -> Reply {
    let path = request.path().to_owned();
    *state.hits.lock().unwrap().entry(path.clone()).or_default() += 1;
    match path.as_str() {
        "/robots.txt" => {
            let status = state.robots_status.load(Ordering::SeqCst);
            let robots = if status == 200 { "User-agent: *\nDisallow: /private\n" } else { "down" };
            reply(status, &[("Content-Type", "text/plain")], robots)
        }
        "/faq" => {
            let delay = state.faq_delay_ms.load(Ordering::SeqCst);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            let status = state.faq_status.load(Ordering::SeqCst);
            if status == 200 {
                let page = state.faq.lock().unwrap().clone();
                reply(200, &[HTML], page)
            } else {
                reply(status, &[HTML], "<html><body><h1>Something broke</h1></body></html>")
            }
        }
        "/moved" => reply(301, &[("Location", "/faq"), HTML], ""),
        "/moved-private" => reply(301, &[("Location", "/private/page"), HTML], ""),
        "/loop" => reply(302, &[("Location", "/loop"), HTML], ""),
        "/latin1" => {
            let page = "<html><body><h2>Lager</h2><p>Lageret i Tromsø sender pakker på tirsdager.</p></body></html>";
            let latin1: Vec<u8> = page.chars().map(|c| u8::try_from(u32::from(c)).unwrap()).collect();
            reply(200, &[("Content-Type", "text/html; charset=iso-8859-1")], latin1)
        }
        "/notes.txt" => {
            let text = "Gift wrapping is free for orders above 50 euros.\n\nWe wrap with recycled paper.\n";
            reply(200, &[("Content-Type", "text/plain; charset=utf-8")], text)
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            reply(200, &[HTML], faq_page(SHIPPING))
        }
        "/missing" => reply(404, &[HTML], "<html><body><p>No such page</p></body></html>"),
        "/huge" => {
            let body = format!("<html><body><main><p>{}</p></main></body></html>", "lorem ipsum ".repeat(100_000));
            reply(200, &[HTML], body)
        }
        // No Content-Length: the body ends when the connection closes.
        "/huge-stream" => {
            let body = format!("<html><body><p>{}</p></body></html>", "dolor sit amet ".repeat(100_000));
            reply(200, &[("Content-Type", "text/html")], body).until_close()
        }
        "/data.json" => {
            let body = r#"{"shipping": "Our warehouse ships orders every Tuesday."}"#;
            reply(200, &[("Content-Type", "application/json")], body)
        }
        "/blank" => reply(200, &[HTML], "<html><body><main>  </main></body></html>"),
        "/private/page" | "/other" => reply(200, &[HTML], faq_page("Private things.")),
        _ => reply(404, &[HTML], "not found"),
    }
}

// ---------------------------------------------------------------------------------------
// Helpers.

pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn now_ms() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

/// `2024-01-15T14:30:00.123Z` as Unix milliseconds.
fn parse_iso(text: &str) -> i64 {
    let number = |range: std::ops::Range<usize>| -> i64 { text[range].parse().expect("ISO date-time") };
    assert!(text.len() == 24 && text.ends_with('Z'), "not an ISO date-time with milliseconds: {text}");
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    // Days from civil (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + number(11..13)) * 60 + number(14..16)) * 60_000 + number(17..19) * 1000 + number(20..23)
}

fn sorted_keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value.as_object().expect("an object").keys().cloned().collect();
    keys.sort();
    keys
}

fn without_content(detail: &Value) -> Value {
    let mut view = detail.clone();
    view.as_object_mut().unwrap().remove("content");
    view
}

pub(crate) fn texts(entries: &[Value]) -> String {
    entries.iter().map(|e| format!("{}\n{}\n", e["question"], e["answer"])).collect()
}

/// Polls a webpage or document until it is neither `pending` nor `refreshing` (60 s at most).
pub(crate) async fn settle(api: &Api, path: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = api.get(path).await;
        let data = response.expect(200)["data"].clone();
        let updating = matches!(data["status"].as_str(), Some("pending" | "refreshing"));
        assert_eq!(data["isUpdating"], updating, "isUpdating follows the status: {data}");
        if !updating {
            return data;
        }
        assert!(Instant::now() < deadline, "{path} is still {} after 60 s", data["status"]);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

pub(crate) async fn search(api: &Api, base: &str, query: &str, params: &str) -> Vec<Value> {
    let response = api.get(&format!("{base}/search?query={}{params}", encode(query))).await;
    response.expect(200)["data"].as_array().unwrap().iter().map(|hit| hit["reference"].clone()).collect()
}

/// Every entry at least not dissimilar to `query` (up to 50): a search with threshold 0.
pub(crate) async fn near(api: &Api, base: &str, query: &str) -> Vec<Value> {
    search(api, base, query, "&limit=50&threshold=0").await
}

pub(crate) async fn add_webpage(api: &Api, base: &str, name: &str, url: &str) -> Value {
    api.post(&format!("{base}/webpages"), json!({ "name": name, "url": url })).await.expect(201)["data"].clone()
}

/// A knowledge base's path and a webpage in it that has been scraped.
async fn ready_page(api: &Api, site: &Site) -> (String, String, Value) {
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(api, "Support").await));
    let page = add_webpage(api, &base, "FAQ", &site.url("/faq")).await;
    let path = format!("{base}/webpages/{}", id(&page));
    let settled = settle(api, &path).await;
    assert_eq!(settled["status"], "ready", "{settled}");
    (base, path, settled)
}

/// The knowledgebase service's database, whichever engine the stack runs it on.
async fn knowledgebase_database(stack: &Stack) -> sqlx::AnyPool {
    sqlx::any::install_default_drivers();
    sqlx::AnyPool::connect(&stack.database_url("knowledgebase")).await.unwrap()
}

/// Moves the page's last accepted refresh 25 hours into the past.
async fn age_last_refresh(stack: &Stack, webpage_id: &str) {
    let pool = knowledgebase_database(stack).await;
    let updated = sqlx::query(
        "UPDATE webpages SET last_refresh_requested_at = last_refresh_requested_at - 25 * 3600 * 1000 WHERE id = $1",
    )
    .bind(webpage_id)
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(updated.rows_affected(), 1);
    pool.close().await;
}

/// Files in the stack's object storage (uploaded documents).
fn stored_files(stack: &Stack) -> usize {
    fn count(dir: &std::path::Path) -> usize {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries.map(|entry| entry.unwrap().path()).map(|path| if path.is_dir() { count(&path) } else { 1 }).sum()
    }
    count(&stack.data_path().join("objects"))
}

/// Uploads a document made of these parts.
pub(crate) async fn upload(api: &Api, base: &str, parts: &[Part<'_>]) -> Response {
    let (content_type, body) = multipart::form(parts);
    api.raw("POST", &format!("{base}/documents"), Some(&content_type), body).await
}

pub(crate) async fn upload_file(api: &Api, base: &str, file_name: &str, content: &[u8]) -> Value {
    upload(api, base, &[Part::file("file", file_name, content)]).await.expect(201)["data"].clone()
}

/// A one-page PDF 1.4 with `sentence` in Helvetica; the xref offsets are computed here.
fn pdf(sentence: &str) -> Vec<u8> {
    pdf_drawing(&format!("BT /F1 12 Tf 72 720 Td ({sentence}) Tj ET"))
}

/// A one-page PDF 1.4 drawing `stream` (its font is Helvetica, /F1).
fn pdf_drawing(stream: &str) -> Vec<u8> {
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
         /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_owned(),
        format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", index + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).as_bytes(),
    );
    out
}

/// A DOCX with a `Heading1` paragraph and a body paragraph.
fn docx(heading: &str, paragraph: &str) -> Vec<u8> {
    docx_of(&format!(
        r#"<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>{heading}</w:t></w:r></w:p>
<w:p><w:r><w:t>{paragraph}</w:t></w:r></w:p>"#
    ))
}

/// A DOCX whose body is `paragraphs` (WordprocessingML).
fn docx_of(paragraphs: &str) -> Vec<u8> {
    use std::io::Write;
    let content_types = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
</Types>"#;
    let rels = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>
</Relationships>"#;
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>
{paragraphs}
</w:body></w:document>"#
    );
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    for (name, content) in
        [("[Content_Types].xml", content_types), ("_rels/.rels", rels), ("word/document.xml", &document)]
    {
        zip.start_file(name, options).unwrap();
        zip.write_all(content.as_bytes()).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

// ---------------------------------------------------------------------------------------
// Webpages.

#[tokio::test]
async fn a_webpage_is_scraped_into_searchable_qa_entries_without_its_chrome() {
    let site = Site::start().await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 1000).await;
    let api = stack.client(&team.key);
    let kb = create_knowledgebase(&api, "Support").await;
    let base = format!("/knowledgebase/{}", id(&kb));

    let created = api
        .post(&format!("{base}/webpages"), json!({ "name": "Shop FAQ", "url": site.url("/faq"), "notes": "Main FAQ" }))
        .await;
    let page = created.expect(201)["data"].clone();
    assert!(created.body["message"].is_string());
    assert_eq!(sorted_keys(&page), WEBPAGE_FIELDS);
    assert_eq!(page["name"], "Shop FAQ");
    assert_eq!(page["url"], site.url("/faq"));
    assert_eq!(page["notes"], "Main FAQ");
    assert_eq!(page["status"], "pending");
    assert_eq!(page["isUpdating"], true);
    assert_eq!(page["lastScrapedAt"], Value::Null);
    assert_eq!(page["failureReason"], Value::Null);
    assert_eq!(page["entryCount"], 0);
    assert!(page["createdAt"].as_str().unwrap().ends_with('Z'));

    let path = format!("{base}/webpages/{}", id(&page));
    let ready = settle(&api, &path).await;
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(ready["failureReason"], Value::Null);
    let scraped_at = parse_iso(ready["lastScrapedAt"].as_str().expect("lastScrapedAt"));
    assert!(scraped_at >= parse_iso(page["createdAt"].as_str().unwrap()));
    assert_eq!(sorted_keys(&without_content(&ready)), WEBPAGE_FIELDS);

    let content = ready["content"].as_array().unwrap().clone();
    assert_eq!(ready["entryCount"], content.len());
    for entry in &content {
        assert_eq!(entry["type"], "QA");
        assert_eq!(entry["source"], json!({ "type": "webpage", "id": page["id"], "name": "Shop FAQ" }));
        assert!(entry["id"].is_string() && entry["createdAt"].is_string() && entry["updatedAt"].is_string());
    }
    let shipping = content.iter().find(|e| e["question"] == "When do you ship orders?").expect("a heading question");
    assert!(shipping["answer"].as_str().unwrap().contains(SHIPPING), "{shipping}");
    let all = texts(&content);
    for fact in [SHIPPING, RETURNS, REPAIRS] {
        assert!(all.contains(fact), "{fact} missing from {all}");
    }
    for junk in CHROME {
        assert!(!all.contains(junk), "{junk} leaked into {all}");
    }

    // Search finds the page's entries by meaning and says where they come from.
    let hits = search(&api, &base, "Which days does the Tromsø warehouse send out parcels?", "&limit=3").await;
    assert_eq!(hits[0]["source"], json!({ "type": "webpage", "id": page["id"], "name": "Shop FAQ" }));
    assert!(hits[0]["answer"].as_str().unwrap().contains(SHIPPING), "{}", hits[0]);
    for junk in CHROME {
        let found = near(&api, &base, junk).await;
        assert!(!found.is_empty() && found.iter().all(|e| e["source"]["id"] == page["id"]));
        assert!(!texts(&found).contains(junk), "{junk} is searchable");
    }
    let balance = 1000 - 1 - CHROME.len();
    assert_eq!(api.get("/me").await.body["data"]["credits"]["balance"], balance);

    // An extracted entry can be read as a reference, but changed only through its page.
    let entry_path = format!("{base}/references/{}", id(shipping));
    let read = api.get(&entry_path).await;
    assert_eq!(read.expect(200)["data"], *shipping);
    let edit = api.put(&entry_path, json!({ "answer": "We never ship." })).await;
    assert_eq!(edit.error_code(409), "CONFLICT");
    assert_eq!(api.delete(&entry_path).await.error_code(409), "CONFLICT");
    assert_eq!(api.get(&path).await.body["data"]["content"], ready["content"], "nothing changed");

    // The knowledge base lists the page, never its entries as references.
    let whole = api.get(&base).await.expect(200)["data"].clone();
    assert_eq!(whole["references"], json!([]));
    assert_eq!(whole["documents"], json!([]));
    assert_eq!(whole["webpages"], json!([without_content(&ready)]));
    let listed = api.get("/knowledgebase").await;
    assert_eq!(listed.expect(200)["data"][0]["counts"], json!({ "webpages": 1, "documents": 0, "references": 0 }));

    // The agent path shows the same page.
    let agent = create_agent(&api, "Ava", json!({ "knowledgebaseId": kb["id"] })).await;
    let via_agent = api.get(&format!("/agents/{}/knowledgebase/webpages/{}", id(&agent), id(&page))).await;
    assert_eq!(via_agent.expect(200)["data"], ready);
    let agent_search = format!("/agents/{}/knowledgebase", id(&agent));
    let hits = search(&api, &agent_search, "Can I send back a coat I never wore?", "&limit=1").await;
    assert_eq!(hits[0]["source"]["id"], page["id"]);
    assert!(hits[0]["answer"].as_str().unwrap().contains(RETURNS), "{}", hits[0]);
}

#[tokio::test]
async fn webpage_bodies_and_paths_are_validated() {
    let site = Site::start().await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));
    let path = format!("{base}/webpages");
    let long_url = format!("{}?pad={}", site.url("/faq"), "a".repeat(2048));
    let cases = [
        (json!({ "name": "FAQ", "url": "ftp://example.com/faq" }), vec!["url"]),
        (json!({ "name": "FAQ", "url": "not a url" }), vec!["url"]),
        (json!({ "name": "FAQ", "url": "/faq" }), vec!["url"]),
        (json!({ "name": "FAQ", "url": "" }), vec!["url"]),
        (json!({ "name": "FAQ", "url": &long_url[..2049] }), vec!["url"]),
        (json!({ "name": "", "url": site.url("/faq") }), vec!["name"]),
        (json!({ "name": "x".repeat(256), "url": site.url("/faq") }), vec!["name"]),
        (json!({ "name": "FAQ", "url": site.url("/faq"), "notes": "n".repeat(5001) }), vec!["notes"]),
        (json!({ "name": 5, "url": ["x"] }), vec!["name", "url"]),
        (json!({}), vec!["name", "url"]),
    ];
    for (body, fields) in cases {
        let response = api.post(&path, body.clone()).await;
        assert_eq!(response.error_code(400), "VALIDATION_ERROR", "{body}");
        assert_eq!(response.fields(), fields, "{body}");
    }
    assert_eq!(api.get(&base).await.body["data"]["webpages"], json!([]), "nothing was created");

    // The longest name, notes and URL are accepted.
    let edge =
        api.post(&path, json!({ "name": "é".repeat(255), "url": &long_url[..2048], "notes": "é".repeat(5000) })).await;
    let edge = edge.expect(201)["data"].clone();
    assert_eq!(edge["url"].as_str().unwrap().len(), 2048);
    let edge_path = format!("{path}/{}", id(&edge));
    for (body, field) in [
        (json!({ "url": "mailto:help@example.com" }), "url"),
        (json!({ "name": "" }), "name"),
        (json!({ "notes": 7 }), "notes"),
    ] {
        let response = api.put(&edge_path, body.clone()).await;
        assert_eq!(response.error_code(400), "VALIDATION_ERROR", "{body}");
        assert_eq!(response.fields(), [field], "{body}");
    }
    assert_eq!(api.get(&edge_path).await.expect(200)["data"]["name"], "é".repeat(255));

    let bad_id = api.get(&format!("{path}/not-a-uuid")).await;
    assert_eq!(bad_id.error_code(400), "VALIDATION_ERROR");
    assert_eq!(bad_id.fields(), ["webpageId"]);
    let unknown = uuid::Uuid::new_v4();
    let missing_page = api.get(&format!("{path}/{unknown}")).await;
    assert_eq!(missing_page.error_code(404), "NOT_FOUND");
    assert_eq!(missing_page.body["error"], "Webpage not found");
    let missing_kb = api
        .post(&format!("/knowledgebase/{unknown}/webpages"), json!({ "name": "FAQ", "url": site.url("/faq") }))
        .await;
    assert_eq!(missing_kb.error_code(404), "NOT_FOUND");
    assert_eq!(missing_kb.body["error"], "Knowledgebase not found");

    // An agent without a knowledge base has no sources.
    let agent = create_agent(&api, "Ava", json!({})).await;
    let agent_base = format!("/agents/{}/knowledgebase", id(&agent));
    let file = [Part::file("file", "notes.txt", &b"Some text."[..])];
    let responses = [
        api.post(&format!("{agent_base}/webpages"), json!({ "name": "FAQ", "url": site.url("/faq") })).await,
        api.get(&format!("{agent_base}/webpages/{unknown}")).await,
        api.put(&format!("{agent_base}/webpages/{unknown}"), json!({ "name": "x" })).await,
        api.delete(&format!("{agent_base}/webpages/{unknown}")).await,
        api.raw("POST", &format!("{agent_base}/webpages/{unknown}/refresh"), None, Vec::new()).await,
        upload(&api, &agent_base, &file).await,
        api.get(&format!("{agent_base}/documents/{unknown}")).await,
        api.put(&format!("{agent_base}/documents/{unknown}"), json!({ "name": "x" })).await,
        api.delete(&format!("{agent_base}/documents/{unknown}")).await,
    ];
    for response in responses {
        assert_eq!(response.error_code(404), "NOT_FOUND");
        assert_eq!(response.body["error"], "Agent has no knowledgebase assigned");
    }
}

/// A knowledge base with an agent on it, and its two API paths: through the agent and directly.
async fn on_both_paths(api: &Api) -> (String, String) {
    let kb = create_knowledgebase(api, "Support").await;
    let agent = create_agent(api, "Ava", json!({ "knowledgebaseId": kb["id"] })).await;
    (format!("/agents/{}/knowledgebase", id(&agent)), format!("/knowledgebase/{}", id(&kb)))
}

#[tokio::test]
async fn webpages_are_renamed_without_rescraping_and_deleted_on_both_paths() {
    let site = Site::start().await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 1000).await;
    let api = stack.client(&team.key);
    let (via_agent, via_kb) = on_both_paths(&api).await;

    let created = api.post(&format!("{via_agent}/webpages"), json!({ "name": "FAQ", "url": site.url("/faq") })).await;
    let page = created.expect(201)["data"].clone();
    let on_kb = format!("{via_kb}/webpages/{}", id(&page));
    let on_agent = format!("{via_agent}/webpages/{}", id(&page));
    let ready = settle(&api, &on_kb).await;
    assert_eq!(ready["status"], "ready", "{ready}");
    let fetched = site.hits("/faq");

    let renamed = api.put(&on_kb, json!({ "name": "Customer FAQ", "notes": "Checked by Ann" })).await;
    assert_eq!(renamed.expect(200)["data"]["name"], "Customer FAQ");
    assert!(renamed.body["message"].is_string());
    assert_eq!(sorted_keys(&renamed.body["data"]), WEBPAGE_FIELDS);
    assert_eq!(renamed.body["data"]["notes"], "Checked by Ann");
    assert_eq!(renamed.body["data"]["url"], site.url("/faq"));
    let cleared = api.put(&on_agent, json!({ "notes": null })).await;
    assert_eq!(cleared.expect(200)["data"]["notes"], Value::Null);
    assert_eq!(cleared.body["data"]["name"], "Customer FAQ");

    // A new url is kept for the next refresh: nothing is scraped now.
    let moved = api.put(&on_agent, json!({ "url": site.url("/other") })).await;
    let moved = moved.expect(200)["data"].clone();
    assert_eq!(moved["url"], site.url("/other"));
    assert_eq!(moved["status"], "ready");
    assert_eq!(moved["isUpdating"], false);
    assert_eq!(moved["lastScrapedAt"], ready["lastScrapedAt"]);
    let after = api.get(&on_kb).await.expect(200)["data"].clone();
    assert_eq!(after["status"], "ready");
    assert_eq!(after["content"].as_array().unwrap().len(), ready["content"].as_array().unwrap().len());
    assert_eq!(texts(after["content"].as_array().unwrap()), texts(ready["content"].as_array().unwrap()));
    assert_eq!(site.hits("/other"), 0, "the new url was not fetched");
    assert_eq!(site.hits("/faq"), fetched);

    // Entries carry the source's current name.
    let hits = search(&api, &via_kb, "When are orders shipped from Tromsø?", "&limit=1").await;
    assert_eq!(hits[0]["source"], json!({ "type": "webpage", "id": page["id"], "name": "Customer FAQ" }));
    assert!(after["content"].as_array().unwrap().iter().all(|e| e["source"]["name"] == "Customer FAQ"));

    // The next refresh scrapes the new url and replaces the content.
    api.raw("POST", &format!("{on_kb}/refresh"), None, Vec::new()).await.expect(200);
    let refreshed = settle(&api, &on_kb).await;
    assert_eq!(refreshed["status"], "ready", "{refreshed}");
    assert_eq!(site.hits("/other"), 1);
    let all = texts(refreshed["content"].as_array().unwrap());
    assert!(all.contains("Private things.") && !all.contains(SHIPPING), "{all}");

    // A manual reference stays when the page goes; the page's entries leave search at once.
    let manual = api
        .post(&format!("{via_kb}/references"), json!({ "question": "Opening hours?", "answer": "Nine to five." }))
        .await;
    let manual = manual.expect(201)["data"].clone();
    let deleted = api.delete(&on_agent).await;
    assert_eq!(deleted.expect(200)["data"]["id"], page["id"]);
    for query in ["When are orders shipped from Tromsø?", "Opening hours?", RETURNS, REPAIRS] {
        let left = near(&api, &via_kb, query).await;
        assert!(left.iter().all(|e| e["id"] == manual["id"]), "{query}: {left:?}");
    }
    let hits = search(&api, &via_kb, "Opening hours?", "&limit=1").await;
    assert_eq!(hits[0]["id"], manual["id"]);
    assert!(near(&api, &via_kb, "Private things.").await.iter().all(|e| e["id"] == manual["id"]));
    for gone in [api.get(&on_kb).await, api.get(&on_agent).await, api.put(&on_kb, json!({ "name": "x" })).await] {
        assert_eq!(gone.error_code(404), "NOT_FOUND");
        assert_eq!(gone.body["error"], "Webpage not found");
    }
    assert_eq!(api.delete(&on_kb).await.status, 404);
    assert_eq!(api.get(&via_kb).await.body["data"]["webpages"], json!([]));
}

/// Issue 40: a webpage added again with `#2` on the end was accepted, and every result of the page
/// then showed twice. A URL that differs only by its fragment (or the case of its scheme) is the
/// same page: 409 on both paths, for an add and for a change of url; another path, a trailing
/// slash or another knowledge base is not a duplicate.
#[tokio::test]
async fn a_url_that_differs_only_by_its_fragment_is_the_same_page() {
    let site = Site::start().await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 1000).await;
    let api = stack.client(&team.key);
    let (via_agent, via_kb) = on_both_paths(&api).await;
    let faq = site.url("/faq");
    let page = add_webpage(&api, &via_kb, "FAQ", &faq).await;
    let on_kb = format!("{via_kb}/webpages/{}", id(&page));
    assert_eq!(settle(&api, &on_kb).await["status"], "ready");

    let upper_scheme = faq.replacen("http://", "HTTP://", 1);
    for (base, url) in [
        (&via_kb, faq.clone()),
        (&via_agent, faq.clone()),
        (&via_kb, format!("{faq}#2")),
        (&via_agent, format!("{faq}#2")),
        (&via_agent, format!("{upper_scheme}#shipping")),
    ] {
        let again = api.post(&format!("{base}/webpages"), json!({ "name": "FAQ again", "url": url })).await;
        assert_eq!(again.error_code(409), "CONFLICT", "{base} {url}");
        assert!(again.body["error"].as_str().is_some_and(|e| e.contains("already")), "{}", again.body);
    }
    let pages = api.get(&via_kb).await.expect(200)["data"]["webpages"].clone();
    assert_eq!(pages.as_array().unwrap().len(), 1, "{pages}");

    // Every entry of the page is found once.
    let hits = near(&api, &via_kb, "When are orders shipped from Tromsø?").await;
    let mut ids: Vec<String> = hits.iter().map(|hit| hit["id"].as_str().unwrap().to_owned()).collect();
    let found = ids.len();
    ids.sort();
    ids.dedup();
    assert!(found > 0 && ids.len() == found, "{hits:#?}");

    // A change of url to the same page is refused too; to its own url with a fragment it is not.
    let other = add_webpage(&api, &via_agent, "Other", &site.url("/other")).await;
    for path in [format!("{via_kb}/webpages/{}", id(&other)), format!("{via_agent}/webpages/{}", id(&other))] {
        let moved = api.put(&path, json!({ "url": format!("{faq}#returns") })).await;
        assert_eq!(moved.error_code(409), "CONFLICT", "{path}");
        assert_eq!(api.get(&path).await.expect(200)["data"]["url"], site.url("/other"));
    }
    let own = api.put(&on_kb, json!({ "url": format!("{faq}#top") })).await;
    assert_eq!(own.expect(200)["data"]["url"], format!("{faq}#top"));

    // Not the same page: another path (a trailing slash counts), or another knowledge base.
    let slash = api.post(&format!("{via_kb}/webpages"), json!({ "name": "Slash", "url": format!("{faq}/") })).await;
    slash.expect(201);
    let elsewhere = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Elsewhere").await));
    add_webpage(&api, &elsewhere, "FAQ", &faq).await;
}

#[tokio::test]
async fn a_refresh_rescrapes_once_per_day_and_never_while_a_scrape_runs() {
    let site = Site::start().await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 1000).await;
    let api = stack.client(&team.key);
    let kb = create_knowledgebase(&api, "Support").await;
    let base = format!("/knowledgebase/{}", id(&kb));

    // While the first scrape is under way, a refresh is a conflict.
    site.faq_delay(1000);
    let page = add_webpage(&api, &base, "FAQ", &site.url("/faq")).await;
    let path = format!("{base}/webpages/{}", id(&page));
    let refresh = format!("{path}/refresh");
    let early = api.raw("POST", &refresh, None, Vec::new()).await;
    assert_eq!(early.error_code(409), "CONFLICT");
    let ready = settle(&api, &path).await;
    assert_eq!(ready["status"], "ready", "{ready}");

    // The first scrape does not count: a refresh is accepted at once, and scrapes again.
    site.set_faq(faq_page("Our warehouse in Tromsø now ships orders every Monday only."));
    let before = now_ms();
    let accepted = api.raw("POST", &refresh, None, Vec::new()).await;
    let after = now_ms();
    assert_eq!(
        accepted.expect(200)["data"],
        json!({ "id": page["id"], "url": site.url("/faq"), "name": "FAQ", "status": "refreshing" })
    );
    assert!(accepted.body["message"].is_string());
    let again = api.raw("POST", &refresh, None, Vec::new()).await;
    assert_eq!(again.error_code(409), "CONFLICT", "a refresh while one runs");
    let refreshed = settle(&api, &path).await;
    assert_eq!(refreshed["status"], "ready", "{refreshed}");
    let all = texts(refreshed["content"].as_array().unwrap());
    assert!(all.contains("every Monday only"), "{all}");
    assert!(!all.contains(SHIPPING), "{all}");
    assert!(
        parse_iso(refreshed["lastScrapedAt"].as_str().unwrap()) > parse_iso(ready["lastScrapedAt"].as_str().unwrap())
    );
    let hits = search(&api, &base, "On which weekday does the Tromsø warehouse ship?", "&limit=50&threshold=0").await;
    assert!(hits.iter().all(|e| !e["answer"].as_str().unwrap().contains(SHIPPING)), "old content left search");
    assert!(hits[0]["answer"].as_str().unwrap().contains("every Monday only"), "{}", hits[0]);

    // Within 24 hours of the accepted refresh: 429 with the time it is allowed again.
    let limited = api.raw("POST", &refresh, None, Vec::new()).await;
    assert_eq!(limited.error_code(429), "RATE_LIMITED");
    let next = parse_iso(limited.body["nextAvailableAt"].as_str().expect("nextAvailableAt"));
    let day = 24 * 3600 * 1000;
    assert!((before + day..=after + day).contains(&next), "{next} not a day after {before}..{after}");
    let retry_after: i64 = limited.header("retry-after").expect("Retry-After").parse().unwrap();
    assert!((86_000..=86_400).contains(&retry_after), "Retry-After: {retry_after}");
    assert_eq!(api.get(&path).await.body["data"]["status"], "ready", "a refused refresh changes nothing");

    // A day later it is accepted again.
    age_last_refresh(&stack, &id(&page)).await;
    let agent = create_agent(&api, "Ava", json!({ "knowledgebaseId": kb["id"] })).await;
    let agent_refresh = format!("/agents/{}/knowledgebase/webpages/{}/refresh", id(&agent), id(&page));
    let accepted = api.raw("POST", &agent_refresh, None, Vec::new()).await;
    assert_eq!(accepted.expect(200)["data"]["status"], "refreshing");
    assert_eq!(settle(&api, &path).await["status"], "ready");
    assert_eq!(api.raw("POST", &agent_refresh, None, Vec::new()).await.error_code(429), "RATE_LIMITED");
}

#[tokio::test]
async fn of_two_simultaneous_refreshes_exactly_one_is_accepted() {
    let site = Site::start().await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let (_, path, page) = ready_page(&api, &site).await;
    let refresh = format!("{path}/refresh");
    let (first, second) =
        tokio::join!(api.raw("POST", &refresh, None, Vec::new()), api.raw("POST", &refresh, None, Vec::new()));
    let mut statuses = [first.status, second.status];
    statuses.sort_unstable();
    assert!(statuses == [200, 409] || statuses == [200, 429], "{statuses:?}: {} / {}", first.text, second.text);
    assert_eq!(settle(&api, &path).await["status"], "ready");
    assert_eq!(site.hits("/faq"), 2, "one first scrape and one refresh");
    assert_eq!(api.raw("POST", &refresh, None, Vec::new()).await.status, 429);
    assert_eq!(api.get(&path).await.body["data"]["entryCount"], page["entryCount"]);
}

#[tokio::test]
async fn a_failed_refresh_keeps_the_previous_content_searchable() {
    let site = Site::start().await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 1000).await;
    let api = stack.client(&team.key);
    let (base, path, ready) = ready_page(&api, &site).await;
    let webpage_id = id(&ready);

    // The first refresh after the first scrape is allowed at once.
    site.faq_status(500);
    api.raw("POST", &format!("{path}/refresh"), None, Vec::new()).await.expect(200);
    let failed = settle(&api, &path).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["isUpdating"], false);
    let reason = failed["failureReason"].as_str().expect("failureReason");
    assert!(reason.contains("500"), "{reason}");
    assert_eq!(failed["lastScrapedAt"], ready["lastScrapedAt"]);
    assert_eq!(failed["entryCount"], ready["entryCount"]);
    assert_eq!(failed["content"], ready["content"], "the last good content stays");
    let hits = search(&api, &base, "Which days does the Tromsø warehouse send out parcels?", "&limit=1").await;
    assert_eq!(hits[0]["source"]["id"], ready["id"]);
    assert!(hits[0]["answer"].as_str().unwrap().contains(SHIPPING));
    let listed = api.get(&base).await.expect(200)["data"]["webpages"][0].clone();
    assert_eq!(listed["status"], "failed");
    assert_eq!(listed["failureReason"], failed["failureReason"]);

    // A server error may pass: the scrape is tried again (4 attempts in all), then left failed.
    site.wait_for_hits("/faq", 5).await;
    let still = settle(&api, &path).await;
    assert_eq!(still["status"], "failed");
    assert_eq!(still["entryCount"], ready["entryCount"]);

    // Once the site is back, the next allowed refresh makes the page ready again.
    site.faq_status(200);
    age_last_refresh(&stack, &webpage_id).await;
    api.raw("POST", &format!("{path}/refresh"), None, Vec::new()).await.expect(200);
    let recovered = settle(&api, &path).await;
    assert_eq!(recovered["status"], "ready", "{recovered}");
    assert_eq!(recovered["failureReason"], Value::Null);
}

#[tokio::test]
async fn pages_that_cannot_be_used_fail_with_a_reason_and_redirects_are_followed() {
    let site = Site::start().await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 100).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));
    let cases: &[(&str, &[&str])] = &[
        ("/missing", &["404"]),
        ("/data.json", &["application/json"]),
        ("/huge", &["larger"]),
        ("/huge-stream", &["larger"]),
        ("/slow", &["did not answer"]),
        ("/private/page", &["robots"]),
        ("/blank", &["no text"]),
        ("/loop", &["more than 5 redirects"]),
        ("/moved-private", &["robots"]),
    ];
    let mut pages = Vec::new();
    for (page_path, _) in cases {
        pages.push(add_webpage(&api, &base, page_path, &site.url(page_path)).await);
    }
    let moved = add_webpage(&api, &base, "Moved", &site.url("/moved")).await;
    let latin1 = add_webpage(&api, &base, "Latin-1", &site.url("/latin1")).await;
    let plain = add_webpage(&api, &base, "Plain text", &site.url("/notes.txt")).await;

    for ((page_path, words), page) in cases.iter().zip(&pages) {
        let settled = settle(&api, &format!("{base}/webpages/{}", id(page))).await;
        assert_eq!(settled["status"], "failed", "{page_path}: {settled}");
        let reason = settled["failureReason"].as_str().unwrap_or_else(|| panic!("{page_path}: no reason"));
        for word in *words {
            assert!(reason.contains(word), "{page_path}: {reason}");
        }
        assert_eq!(settled["entryCount"], 0, "{page_path}");
        assert_eq!(settled["content"], json!([]), "{page_path}");
        assert_eq!(settled["lastScrapedAt"], Value::Null, "{page_path}");
    }
    assert_eq!(site.hits("/private/page"), 0, "robots.txt was obeyed");

    let followed = settle(&api, &format!("{base}/webpages/{}", id(&moved))).await;
    assert_eq!(followed["status"], "ready", "{followed}");
    assert_eq!(followed["url"], site.url("/moved"));
    assert!(texts(followed["content"].as_array().unwrap()).contains(SHIPPING));
    let decoded = settle(&api, &format!("{base}/webpages/{}", id(&latin1))).await;
    assert_eq!(decoded["status"], "ready", "{decoded}");
    assert!(texts(decoded["content"].as_array().unwrap()).contains("Lageret i Tromsø sender pakker på tirsdager."));
    let text = settle(&api, &format!("{base}/webpages/{}", id(&plain))).await;
    assert_eq!(text["status"], "ready", "{text}");
    let content = text["content"].as_array().unwrap();
    assert_eq!(content[0]["question"], "Plain text", "text pages are answered under the page's name");
    assert!(texts(content).contains("Gift wrapping is free for orders above 50 euros."));

    // A timeout may pass and is tried again; a 404 is final.
    site.wait_for_hits("/slow", 3).await;
    assert_eq!(site.hits("/missing"), 1, "a 404 is not retried");
    for query in ["lorem ipsum dolor sit amet", "Our warehouse ships orders every Tuesday.", SHIPPING] {
        let found = near(&api, &base, query).await;
        assert!(
            found.iter().all(|e| [&moved["id"], &latin1["id"], &plain["id"]].contains(&&e["source"]["id"])),
            "only the pages that could be read have entries"
        );
    }
}

#[tokio::test]
async fn a_robots_txt_that_cannot_be_read_postpones_the_scrape() {
    let site = Site::start().await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));
    site.robots_status(503);
    let page = add_webpage(&api, &base, "FAQ", &site.url("/faq")).await;
    let path = format!("{base}/webpages/{}", id(&page));
    let failed = settle(&api, &path).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let reason = failed["failureReason"].as_str().unwrap();
    assert!(reason.contains("robots.txt") && reason.contains("503"), "{reason}");
    assert_eq!(site.hits("/faq"), 0, "the page is not fetched without its robots.txt");

    // The attempt is repeated; once robots.txt answers, the page is scraped.
    site.wait_for_hits("/robots.txt", 2).await;
    site.robots_status(200);
    let deadline = Instant::now() + Duration::from_secs(60);
    let ready = loop {
        let current = api.get(&path).await.expect(200)["data"].clone();
        if current["status"] == "ready" {
            break current;
        }
        assert!(Instant::now() < deadline, "not scraped after robots.txt came back: {current}");
        tokio::time::sleep(Duration::from_millis(150)).await;
    };
    assert_eq!(ready["failureReason"], Value::Null);
    assert!(texts(ready["content"].as_array().unwrap()).contains(SHIPPING));
}

#[tokio::test]
async fn a_page_deleted_while_it_is_scraped_leaves_nothing_behind() {
    let site = Site::start().await;
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 100).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));
    site.faq_delay(1000);
    let page = add_webpage(&api, &base, "FAQ", &site.url("/faq")).await;
    let path = format!("{base}/webpages/{}", id(&page));
    site.wait_for_hits("/faq", 1).await;
    api.delete(&path).await.expect(200);

    // The scrape finishes after the delete (the job's row says when); nothing of it appears.
    let pool = knowledgebase_database(&stack).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status: String = sqlx::query_scalar("SELECT status FROM jobs WHERE subject_id = $1")
            .bind(id(&page))
            .fetch_one(&pool)
            .await
            .unwrap();
        if status == "completed" || status == "failed" {
            break;
        }
        assert!(Instant::now() < deadline, "the scrape job is still {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pool.close().await;
    assert_eq!(api.get(&path).await.error_code(404), "NOT_FOUND");
    assert!(near(&api, &base, SHIPPING).await.is_empty(), "no entries of the deleted page");
    assert_eq!(api.get(&base).await.body["data"]["webpages"], json!([]));
}

#[tokio::test]
async fn loopback_pages_are_refused_unless_the_operator_allows_them() {
    let site = Site::start().await;
    let env: Vec<(&str, &str)> =
        ENV.iter().copied().filter(|(name, _)| *name != "SWITCHBOARD_SCRAPE_ALLOW_PRIVATE").collect();
    let stack = Stack::start_with(&env).await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));
    let port = site.server.origin().rsplit(':').next().unwrap().to_owned();
    let urls = [
        site.url("/faq"),
        format!("http://localhost:{port}/faq"),
        format!("http://[::1]:{port}/faq"),
        format!("http://2130706433:{port}/faq"),
        format!("http://127.1:{port}/faq"),
        format!("http://[::ffff:127.0.0.1]:{port}/faq"),
    ];
    for (n, url) in urls.into_iter().enumerate() {
        // Most of these spell the same page (127.1 is 127.0.0.1), which a knowledge base holds
        // once (issue 40): each in a knowledge base of its own.
        let base = if n == 0 {
            base.clone()
        } else {
            format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await))
        };
        let page = add_webpage(&api, &base, "FAQ", &url).await;
        let settled = settle(&api, &format!("{base}/webpages/{}", id(&page))).await;
        assert_eq!(settled["status"], "failed", "{url}: {settled}");
        let reason = settled["failureReason"].as_str().unwrap();
        assert!(reason.contains("private") && reason.contains("loopback"), "{url}: {reason}");
        assert_eq!(settled["entryCount"], 0);
    }
    assert_eq!(site.total_hits(), 0, "nothing was requested from the loopback server");
}

#[tokio::test]
async fn a_scrape_interrupted_by_a_crash_runs_again_after_the_restart() {
    let site = Site::start().await;
    let stack = Stack::start_in(tempfile::tempdir().unwrap(), ENV).await;
    let team = stack.team("Acme", false, 100).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));
    site.faq_delay(1500);
    let page = add_webpage(&api, &base, "FAQ", &site.url("/faq")).await;
    site.wait_for_hits("/faq", 1).await;
    let path = format!("{base}/webpages/{}", id(&page));
    assert_eq!(api.get(&path).await.expect(200)["data"]["status"], "pending");

    // Killed while the page is being fetched: the job's lease is left in the database.
    let Stack { mut process, data_dir, .. } = stack;
    process.child.kill().await.unwrap();
    drop(process);
    site.faq_delay(0);

    let stack = Stack::start_in(data_dir, ENV).await;
    let api = stack.client(&team.key);
    let settled = settle(&api, &path).await;
    assert_eq!(settled["status"], "ready", "{settled}");
    assert!(texts(settled["content"].as_array().unwrap()).contains(SHIPPING));
    assert!(site.hits("/faq") >= 2, "fetched again after the restart");
    let hits = search(&api, &base, "Which days does the Tromsø warehouse send out parcels?", "&limit=1").await;
    assert_eq!(hits[0]["source"]["id"], page["id"]);
}

// ---------------------------------------------------------------------------------------
// Documents.

#[tokio::test]
async fn documents_of_every_supported_type_become_searchable() {
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 1000).await;
    let api = stack.client(&team.key);
    let kb = create_knowledgebase(&api, "Support").await;
    let base = format!("/knowledgebase/{}", id(&kb));

    let txt = b"Harbour Bikes rents electric bicycles by the hour.\n\n\
        A day pass for an electric bicycle costs 45 euros and includes a helmet and a lock.\n";
    let md = "# Harbour Bikes handbook\n\nWelcome to the handbook.\n\n## Winter storage\n\n\
        We keep customer bicycles over the winter in a heated garage for 12 euros a month.\n\n\
        ## Puncture repair\n\nFlat tyres are fixed while you wait, usually within twenty minutes.\n";
    let html = "<html><head><title>Ferry guide</title><script>var tracker = 'octopus-ink';</script></head>\
        <body><nav>Menu and links</nav><main><h2>Evening ferry</h2>\
        <p>The last ferry to the island leaves the harbour at 23:15 on weekdays.</p></main></body></html>";
    let csv = "question,answer\nDo you sell gift vouchers?,Gift vouchers are sold at every branch and online.\n\
        Can companies pay by invoice?,\"Yes, companies can pay by invoice within 30 days.\"\n";
    let docx = docx("Loyalty programme", "Members collect one stamp per rental and the tenth rental is free.");
    let pdf = pdf("Helmets for children are lent free of charge at the rental counter.");

    // name and notes from the form; otherwise the name is the file's.
    let response = upload(
        &api,
        &base,
        &[
            Part::field("name", b"Bike rental prices"),
            Part::field("notes", b"From the 2025 flyer"),
            Part::file("file", "prices.txt", txt),
        ],
    )
    .await;
    let named = response.expect(201)["data"].clone();
    assert!(response.body["message"].is_string());
    assert_eq!(sorted_keys(&named), DOCUMENT_FIELDS);
    assert_eq!(named["name"], "Bike rental prices");
    assert_eq!(named["notes"], "From the 2025 flyer");
    assert_eq!(named["fileName"], "prices.txt");
    assert_eq!(named["contentType"], "text/plain");
    assert_eq!(named["size"], txt.len());
    assert_eq!(named["status"], "pending");
    assert_eq!(named["isUpdating"], true);
    assert_eq!(named["extractedAt"], Value::Null);
    assert_eq!(named["failureReason"], Value::Null);
    assert_eq!(named["entryCount"], 0);

    let uploads = [
        ("handbook.md", md.as_bytes(), "text/markdown"),
        ("ferry.html", html.as_bytes(), "text/html"),
        ("faq.csv", csv.as_bytes(), "text/csv"),
        ("loyalty.docx", &docx[..], "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ("Helmets.PDF", &pdf[..], "application/pdf"),
    ];
    let mut documents = vec![named];
    for (file_name, content, content_type) in uploads {
        let document = upload_file(&api, &base, file_name, content).await;
        assert_eq!(document["name"], file_name);
        assert_eq!(document["fileName"], file_name);
        assert_eq!(document["notes"], Value::Null);
        assert_eq!(document["contentType"], content_type, "{file_name}");
        assert_eq!(document["size"], content.len());
        documents.push(document);
    }
    let mut ready = Vec::new();
    for document in &documents {
        let settled = settle(&api, &format!("{base}/documents/{}", id(document))).await;
        assert_eq!(settled["status"], "ready", "{settled}");
        assert_eq!(settled["failureReason"], Value::Null);
        assert!(settled["extractedAt"].as_str().unwrap().ends_with('Z'));
        let content = settled["content"].as_array().unwrap();
        assert!(!content.is_empty());
        assert_eq!(settled["entryCount"], content.len());
        for entry in content {
            assert_eq!(entry["type"], "QA");
            assert_eq!(entry["source"], json!({ "type": "document", "id": document["id"], "name": document["name"] }));
        }
        ready.push(settled);
    }

    // What each format gives.
    let content = |index: usize| ready[index]["content"].as_array().unwrap().clone();
    let winter = content(1).into_iter().find(|e| e["question"] == "Winter storage").expect("markdown heading");
    assert!(winter["answer"].as_str().unwrap().contains("heated garage"));
    assert!(!texts(&content(2)).contains("octopus"), "the HTML document's script was not indexed");
    assert!(!texts(&content(2)).contains("Menu and links"));
    let csv_pairs: Vec<(Value, Value)> =
        content(3).iter().map(|e| (e["question"].clone(), e["answer"].clone())).collect();
    assert_eq!(
        csv_pairs,
        [
            (json!("Do you sell gift vouchers?"), json!("Gift vouchers are sold at every branch and online.")),
            (json!("Can companies pay by invoice?"), json!("Yes, companies can pay by invoice within 30 days.")),
        ]
    );
    let loyalty = content(4);
    assert_eq!(loyalty[0]["question"], "Loyalty programme");
    assert!(loyalty[0]["answer"].as_str().unwrap().contains("tenth rental is free"));
    assert!(texts(&content(5)).contains("Helmets for children"), "{}", texts(&content(5)));

    // A sentence from inside each document finds it.
    let queries = [
        "A day pass for an electric bicycle costs 45 euros.",
        "We keep customer bicycles over the winter in a heated garage.",
        "The last ferry to the island leaves the harbour at 23:15.",
        "Do you sell gift vouchers?",
        "Members collect one stamp per rental and the tenth rental is free.",
        "Helmets for children are lent free of charge.",
    ];
    for (query, document) in queries.iter().zip(&documents) {
        let hits = search(&api, &base, query, "&limit=1").await;
        assert_eq!(hits[0]["source"]["type"], "document", "{query}");
        assert_eq!(hits[0]["source"]["id"], document["id"], "{query}: {}", hits[0]);
    }

    let whole = api.get(&base).await.expect(200)["data"].clone();
    assert_eq!(whole["references"], json!([]));
    assert_eq!(whole["documents"], Value::Array(ready.iter().map(without_content).collect()));
    let listed = api.get("/knowledgebase").await;
    assert_eq!(listed.expect(200)["data"][0]["counts"], json!({ "webpages": 0, "documents": 6, "references": 0 }));
}

/// A fact at the end of a long document section is found: the extractor cuts a long section
/// into entries of a few sentences (and any entry longer than 128 words would be embedded as
/// passages), so nothing past the model's window goes unsearched.
/// Issue 55, defect 6: a PDF handbook of 4 headed sections was one "Page 1" entry, returned
/// whole for every match. Documents are cut by their headings as webpages are: in a PDF, the
/// lines set larger than the body; in a DOCX, heading styles and paragraphs set in bold alone.
#[tokio::test]
async fn documents_are_cut_by_their_headings() {
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 100).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Handbook").await));
    let sections = [
        ("Opening hours", "The shop opens at nine on weekdays and at ten on Saturdays."),
        ("Returns", "Unused items are taken back within thirty days with the receipt."),
        ("Deliveries", "Orders placed before noon are delivered the next working day."),
        ("Gift cards", "Gift cards are valid for two years and can be used online."),
    ];
    let mut stream = String::from("BT /F1 22 Tf 72 750 Td (Staff handbook) Tj ET\n");
    let mut y = 710;
    for (heading, body) in sections {
        stream.push_str(&format!(
            "BT /F1 16 Tf 72 {y} Td ({heading}) Tj ET\nBT /F1 11 Tf 72 {} Td ({body}) Tj ET\n",
            y - 22
        ));
        y -= 70;
    }
    let bold = |text: &str| format!(r#"<w:p><w:r><w:rPr><w:b/></w:rPr><w:t>{text}</w:t></w:r></w:p>"#);
    let plain = |text: &str| format!(r#"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"#);
    let docx_body: String = sections.iter().map(|(heading, body)| bold(heading) + &plain(body)).collect();
    for (file, bytes) in [("handbook.pdf", pdf_drawing(&stream)), ("handbook.docx", docx_of(&docx_body))] {
        let document = upload_file(&api, &base, file, &bytes).await;
        let settled = settle(&api, &format!("{base}/documents/{}", id(&document))).await;
        assert_eq!(settled["status"], "ready", "{file}: {settled}");
        let content = settled["content"].as_array().unwrap();
        let questions: Vec<&str> = content.iter().map(|entry| entry["question"].as_str().unwrap()).collect();
        assert_eq!(questions.len(), 4, "{file}: one entry a section: {questions:?}");
        for ((heading, body), entry) in sections.iter().zip(content) {
            assert_eq!(entry["question"], *heading, "{file}: {entry}");
            assert_eq!(entry["answer"], *body, "{file}: each entry holds its section alone");
        }
    }
    // A search finds the section, not the whole document.
    let hits = search(&api, &base, "when are orders delivered", "&limit=1").await;
    assert_eq!(hits[0]["answer"], sections[2].1, "{hits:?}");
}

#[tokio::test]
async fn a_fact_at_the_end_of_a_long_document_section_is_found() {
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 100).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Handbook").await));
    let filler = "Visitors sign in at reception and wear a badge while they are in the building. \
                  Meeting rooms are booked through the front desk and cleaned every evening. ";
    let handbook = format!(
        "# Tenant handbook\n\n## Building rules\n\n{}The spare key to the bicycle storage room is kept in the red \
         lockbox behind the security desk.\n\n## Parking\n\nCars park in the underground garage on level minus two.\n",
        filler.repeat(10)
    );
    let document = upload_file(&api, &base, "handbook.md", handbook.as_bytes()).await;
    let settled = settle(&api, &format!("{base}/documents/{}", id(&document))).await;
    assert_eq!(settled["status"], "ready", "{settled}");

    let hits = search(&api, &base, "where is the bicycle storage spare key", "&limit=1&threshold=0.2").await;
    assert_eq!(hits.len(), 1, "not found with a similarity of at least 0.2");
    let answer = hits[0]["answer"].as_str().unwrap();
    assert!(answer.ends_with("behind the security desk."), "{answer}");
}

#[tokio::test]
async fn documents_are_renamed_and_deleted_on_both_paths() {
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 1000).await;
    let api = stack.client(&team.key);
    let (via_agent, via_kb) = on_both_paths(&api).await;
    let text = b"Our bakery on Elm Street bakes sourdough rye bread every morning at five.\n";
    let document = upload_file(&api, &via_agent, "bakery.txt", text).await;
    let on_kb = format!("{via_kb}/documents/{}", id(&document));
    let on_agent = format!("{via_agent}/documents/{}", id(&document));
    let ready = settle(&api, &on_kb).await;
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(api.get(&on_agent).await.expect(200)["data"], ready);
    assert_eq!(stored_files(&stack), 1);

    let renamed = api.put(&on_agent, json!({ "name": "Bakery hours", "notes": "Ask Tom" })).await;
    assert_eq!(renamed.expect(200)["data"]["name"], "Bakery hours");
    assert!(renamed.body["message"].is_string());
    assert_eq!(sorted_keys(&renamed.body["data"]), DOCUMENT_FIELDS);
    assert_eq!(renamed.body["data"]["notes"], "Ask Tom");
    assert_eq!(renamed.body["data"]["fileName"], "bakery.txt");
    assert_eq!(renamed.body["data"]["status"], "ready");
    let cleared = api.put(&on_kb, json!({ "notes": null })).await;
    assert_eq!(cleared.expect(200)["data"]["notes"], Value::Null);
    assert_eq!(cleared.body["data"]["name"], "Bakery hours");
    let invalid = api.put(&on_kb, json!({ "name": "", "notes": "n".repeat(5001) })).await;
    assert_eq!(invalid.error_code(400), "VALIDATION_ERROR");
    assert_eq!(invalid.fields(), ["name", "notes"]);

    let query = "When is the sourdough rye bread baked?";
    let hits = search(&api, &via_kb, query, "&limit=1").await;
    assert_eq!(hits[0]["source"], json!({ "type": "document", "id": document["id"], "name": "Bakery hours" }));

    let deleted = api.delete(&on_kb).await;
    assert_eq!(deleted.expect(200)["data"]["id"], document["id"]);
    assert!(near(&api, &via_kb, query).await.is_empty(), "its entries left search");
    assert_eq!(stored_files(&stack), 0, "the file went too");
    for gone in [api.get(&on_kb).await, api.get(&on_agent).await, api.delete(&on_agent).await] {
        assert_eq!(gone.error_code(404), "NOT_FOUND");
        assert_eq!(gone.body["error"], "Document not found");
    }
    assert_eq!(api.get(&via_kb).await.body["data"]["documents"], json!([]));
}

#[tokio::test]
async fn unusable_uploads_are_refused_and_nothing_is_stored() {
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));

    for file_name in ["setup.exe", "logo.png", "README"] {
        let response = upload(&api, &base, &[Part::file("file", file_name, b"MZ\x90\x00binary")]).await;
        assert_eq!(response.error_code(415), "UNSUPPORTED_MEDIA_TYPE", "{file_name}");
        let hint = response.body["hint"].as_str().expect("hint");
        for supported in [".txt", ".md", ".html", ".pdf", ".docx", ".csv"] {
            assert!(hint.contains(supported), "{hint}");
        }
    }
    let fake_pdf = upload(&api, &base, &[Part::file("file", "report.pdf", b"this is not a PDF at all")]).await;
    assert_eq!(fake_pdf.error_code(422), "UNPROCESSABLE_ENTITY");
    assert!(!fake_pdf.body["hint"].as_str().expect("hint").is_empty());
    let fake_docx = upload(&api, &base, &[Part::file("file", "letter.docx", b"plain text, no archive")]).await;
    assert_eq!(fake_docx.status, 422, "{}", fake_docx.text);
    let not_utf8 = upload(&api, &base, &[Part::file("file", "notes.txt", b"\xff\xfe\x00\x01")]).await;
    assert_eq!(not_utf8.status, 422, "{}", not_utf8.text);
    let empty = upload(&api, &base, &[Part::file("file", "empty.md", b"")]).await;
    assert_eq!(empty.status, 422, "{}", empty.text);

    let long_name = "n".repeat(256);
    for name in ["   ", long_name.as_str()] {
        let bad_name =
            upload(&api, &base, &[Part::field("name", name.as_bytes()), Part::file("file", "a.txt", b"Text.")]).await;
        assert_eq!(bad_name.error_code(400), "VALIDATION_ERROR");
        assert_eq!(bad_name.fields(), ["name"]);
    }
    let no_file = upload(&api, &base, &[Part::field("name", b"Just a name")]).await;
    assert_eq!(no_file.error_code(400), "VALIDATION_ERROR");
    assert_eq!(no_file.fields(), ["file"]);
    let json_body = api.post(&format!("{base}/documents"), json!({ "file": "hello" })).await;
    assert_eq!(json_body.error_code(415), "UNSUPPORTED_MEDIA_TYPE");
    let untyped = api.raw("POST", &format!("{base}/documents"), None, b"hello".to_vec()).await;
    assert_eq!(untyped.error_code(415), "UNSUPPORTED_MEDIA_TYPE");

    // Over the 20 MiB limit: refused before reading it all, and just over the limit too.
    let huge = vec![b'a'; 21 * 1024 * 1024];
    let too_large = upload(&api, &base, &[Part::file("file", "big.txt", &huge)]).await;
    assert_eq!(too_large.error_code(413), "PAYLOAD_TOO_LARGE");
    let just_over = vec![b'a'; 20 * 1024 * 1024 + 1];
    let too_large = upload(&api, &base, &[Part::file("file", "big.txt", &just_over)]).await;
    assert_eq!(too_large.error_code(413), "PAYLOAD_TOO_LARGE");

    assert_eq!(api.get(&base).await.expect(200)["data"]["documents"], json!([]), "nothing was stored");
    assert_eq!(stored_files(&stack), 0, "no file was kept");
    let listed = api.get("/knowledgebase").await;
    assert_eq!(listed.expect(200)["data"][0]["counts"]["documents"], 0);
    // Only the last part of a file name with directories is kept.
    let ok = upload_file(&api, &base, "../../etc/fine.txt", b"After all that, a readable file.").await;
    assert_eq!((ok["name"].clone(), ok["fileName"].clone()), (json!("fine.txt"), json!("fine.txt")));
    assert_eq!(settle(&api, &format!("{base}/documents/{}", id(&ok))).await["status"], "ready");
    assert_eq!(stored_files(&stack), 1);

    // Exactly at the limit is accepted (one sentence, padded with blanks to 20 MiB).
    let mut at_limit = b"The lighthouse keeper's logbook is kept in the harbour archive.\n".to_vec();
    at_limit.resize(20 * 1024 * 1024, b' ');
    let accepted = upload_file(&api, &base, "logbook.txt", &at_limit).await;
    assert_eq!(accepted["size"], 20 * 1024 * 1024);
    assert_eq!(settle(&api, &format!("{base}/documents/{}", id(&accepted))).await["status"], "ready");
    assert!(texts(&near(&api, &base, "where is the logbook of the lighthouse?").await).contains("harbour archive"));
    assert_eq!(stored_files(&stack), 2);
}

// ---------------------------------------------------------------------------------------
// Isolation.

fn page_kb_id(base: &str) -> &str {
    base.trim_start_matches("/knowledgebase/")
}

#[tokio::test]
async fn another_teams_webpages_and_documents_are_404() {
    let site = Site::start().await;
    let stack = Stack::start_with(ENV).await;
    let owner = stack.team("Owner", false, 10).await;
    let other = stack.team("Other", false, 10).await;
    let owner_api = stack.client(&owner.key);
    let (base, page_path, page) = ready_page(&owner_api, &site).await;
    let document =
        upload_file(&owner_api, &base, "secret.txt", b"The safe code is written on the back of the map.").await;
    let document_path = format!("{base}/documents/{}", id(&document));
    settle(&owner_api, &document_path).await;

    let api = stack.client(&other.key);
    let theirs = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Theirs").await));
    let crossed_page = format!("{theirs}/webpages/{}", id(&page));
    let crossed_document = format!("{theirs}/documents/{}", id(&document));
    let responses = [
        (api.get(&page_path).await, "Knowledgebase not found"),
        (api.put(&page_path, json!({ "name": "Mine" })).await, "Knowledgebase not found"),
        (api.delete(&page_path).await, "Knowledgebase not found"),
        (api.raw("POST", &format!("{page_path}/refresh"), None, Vec::new()).await, "Knowledgebase not found"),
        (
            api.post(&format!("{base}/webpages"), json!({ "name": "x", "url": site.url("/faq") })).await,
            "Knowledgebase not found",
        ),
        (api.get(&document_path).await, "Knowledgebase not found"),
        (api.put(&document_path, json!({ "name": "Mine" })).await, "Knowledgebase not found"),
        (api.delete(&document_path).await, "Knowledgebase not found"),
        (upload(&api, &base, &[Part::file("file", "x.txt", b"text")]).await, "Knowledgebase not found"),
        (api.get(&crossed_page).await, "Webpage not found"),
        (api.put(&crossed_page, json!({ "name": "Mine" })).await, "Webpage not found"),
        (api.delete(&crossed_page).await, "Webpage not found"),
        (api.raw("POST", &format!("{crossed_page}/refresh"), None, Vec::new()).await, "Webpage not found"),
        (api.get(&crossed_document).await, "Document not found"),
        (api.put(&crossed_document, json!({ "name": "Mine" })).await, "Document not found"),
        (api.delete(&crossed_document).await, "Document not found"),
    ];
    for (response, error) in responses {
        assert_eq!(response.status, 404, "{}", response.text);
        assert_eq!(response.body["error"], error);
    }
    assert!(near(&api, &theirs, "What is the safe code?").await.is_empty());
    assert!(near(&api, &theirs, SHIPPING).await.is_empty());

    // Through the owner's agent: the agent itself is not found.
    let agent = create_agent(&owner_api, "Ava", json!({ "knowledgebaseId": page_kb_id(&base) })).await;
    let agent_base = format!("/agents/{}/knowledgebase", id(&agent));
    let through_agent = [
        api.get(&format!("{agent_base}/webpages/{}", id(&page))).await,
        api.raw("POST", &format!("{agent_base}/webpages/{}/refresh", id(&page)), None, Vec::new()).await,
        api.delete(&format!("{agent_base}/documents/{}", id(&document))).await,
        upload(&api, &agent_base, &[Part::file("file", "x.txt", b"text")]).await,
    ];
    for response in through_agent {
        assert_eq!(response.status, 404, "{}", response.text);
        assert_eq!(response.body["error"], "Agent not found");
    }

    // A read-only key of the owner may look but not change.
    let read_only = stack.client(&stack.key(&owner.id, true).await);
    read_only.get(&page_path).await.expect(200);
    assert_eq!(read_only.raw("POST", &format!("{page_path}/refresh"), None, Vec::new()).await.status, 403);
    assert_eq!(read_only.delete(&document_path).await.status, 403);
    assert_eq!(upload(&read_only, &base, &[Part::file("file", "x.txt", b"text")]).await.status, 403);

    // Nothing changed for the owner.
    let still = owner_api.get(&page_path).await.expect(200)["data"].clone();
    assert_eq!((still["name"].clone(), still["status"].clone()), (json!("FAQ"), json!("ready")));
    assert_eq!(owner_api.get(&document_path).await.expect(200)["data"]["name"], "secret.txt");
    assert_eq!(owner_api.raw("POST", &format!("{page_path}/refresh"), None, Vec::new()).await.status, 200);
    assert_eq!(settle(&owner_api, &page_path).await["status"], "ready");
    assert_eq!(site.hits("/faq"), 2, "the first scrape and the owner's refresh");
}

/// A file whose name has no known extension is read as the part's Content-Type says
/// (`curl -F "file=@notes;type=text/plain"`); the extension wins when there is one.
#[tokio::test]
async fn a_file_without_a_known_extension_is_read_by_its_content_type() {
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));
    let typed = |file_name: &str, content_type: &str, content: &str| {
        let part = Part::file("file", file_name, content.as_bytes()).typed(content_type);
        let (content_type, body) = multipart::form(&[part]);
        let (api, path) = (api.clone(), format!("{base}/documents"));
        async move { api.raw("POST", &path, Some(&content_type), body).await }
    };
    let notes = typed("returns", "text/plain; charset=utf-8", "Returns\n\nFree within 30 days.").await;
    let notes = notes.expect(201)["data"].clone();
    assert_eq!((notes["fileName"].as_str(), notes["contentType"].as_str()), (Some("returns"), Some("text/plain")));
    let path = format!("{base}/documents/{}", id(&notes));
    let ready = settle(&api, &path).await;
    assert_eq!(ready["status"], "ready", "the extraction job reads it as text too: {ready}");
    assert!(texts(ready["content"].as_array().unwrap()).contains("Free within 30 days"), "{ready}");

    let markdown = typed("FAQ", "text/markdown", "# Shipping\n\nTo 30 countries.").await;
    assert_eq!(markdown.expect(201)["data"]["contentType"], "text/markdown");
    let by_extension = typed("faq.md", "application/octet-stream", "# Shipping\n\nTo 30 countries.").await;
    assert_eq!(by_extension.expect(201)["data"]["contentType"], "text/markdown");
    for (file_name, content_type) in
        [("logo", "image/png"), ("README", "application/octet-stream"), ("a.exe", "application/x-msdownload")]
    {
        let refused = typed(file_name, content_type, "MZ").await;
        assert_eq!(refused.error_code(415), "UNSUPPORTED_MEDIA_TYPE", "{file_name} as {content_type}");
    }
}
