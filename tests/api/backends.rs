//! The optional production backends of the knowledgebase service, driven through the
//! gateway like the defaults are: uploaded files kept in an S3-compatible bucket (a moto
//! server, the S3 emulator the AWS SDKs test against; no real S3 is reachable here), and Q&A
//! pairs written by an OpenAI-compatible chat model (a small server in this file that speaks
//! the chat-completions protocol: no language model can run on these machines).

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agents::id;
use crate::common::multipart::{self, Part};
use crate::common::web::{Reply, Request, WebServer};
use crate::common::{Stack, free_port};
use crate::knowledgebase::create_knowledgebase;
use crate::sources::{ENV, REPAIRS, RETURNS, SHIPPING, Site, add_webpage, near, settle, texts, upload_file};

// ---------------------------------------------------------------------------------------
// S3-compatible object storage.

/// `moto_server` on a free port, killed when dropped.
struct S3 {
    endpoint: String,
    child: std::process::Child,
}

impl S3 {
    async fn start() -> S3 {
        let port = free_port();
        // scripts/test installs moto in a venv of its own and says where.
        let program = std::env::var("SWITCHBOARD_TEST_MOTO_SERVER").unwrap_or_else(|_| "moto_server".to_owned());
        let child = std::process::Command::new(&program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program} ({e}); scripts/test installs moto[server]"));
        let endpoint = format!("http://127.0.0.1:{port}");
        let s3 = S3 { endpoint, child };
        let deadline = Instant::now() + Duration::from_secs(30);
        while reqwest::get(&s3.endpoint).await.is_err() {
            assert!(Instant::now() < deadline, "moto_server did not start; is moto[server] installed?");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        s3
    }

    /// Creates a bucket (moto accepts unsigned requests).
    async fn create_bucket(&self, bucket: &str) {
        let response =
            reqwest::Client::new().put(format!("{}/{bucket}", self.endpoint)).send().await.expect("create bucket");
        assert!(response.status().is_success(), "creating the bucket: {}", response.status());
    }

    /// Key and size of each object in the bucket (moto answers unsigned listings).
    async fn objects(&self, bucket: &str) -> Vec<(String, usize)> {
        let listing = reqwest::get(format!("{}/{bucket}?list-type=2", self.endpoint))
            .await
            .expect("list bucket")
            .text()
            .await
            .expect("listing");
        let field = |object: &str, name: &str| -> String {
            let open = format!("<{name}>");
            object
                .split(&open)
                .nth(1)
                .and_then(|rest| rest.split(&format!("</{name}>")).next())
                .unwrap_or_default()
                .to_owned()
        };
        listing
            .split("<Contents>")
            .skip(1)
            .map(|object| (field(object, "Key"), field(object, "Size").parse().expect("object size")))
            .collect()
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn uploaded_files_are_kept_in_an_s3_bucket_and_removed_with_their_document() {
    let s3 = S3::start().await;
    s3.create_bucket("switchboard-uploads").await;
    let mut env = ENV.to_vec();
    env.extend([
        ("SWITCHBOARD_S3_BUCKET", "switchboard-uploads"),
        ("SWITCHBOARD_S3_ENDPOINT", s3.endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
    ]);
    let stack = Stack::start_with(&env).await;
    let team = stack.team("Acme", false, 100).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));

    let text = b"# Lost luggage\n\nBags left on the night train are kept at the Narvik depot for 30 days.\n";
    let document = upload_file(&api, &base, "luggage.md", text).await;
    let path = format!("{base}/documents/{}", id(&document));
    assert_eq!(settle(&api, &path).await["status"], "ready");

    let objects = s3.objects("switchboard-uploads").await;
    assert_eq!(objects.len(), 1, "one object per upload: {objects:?}");
    let (key, size) = &objects[0];
    assert!(key.contains(document["id"].as_str().unwrap()) && key.ends_with("luggage.md"), "{objects:?}");
    assert_eq!(*size, text.len(), "the file is stored as uploaded");
    assert!(!stack.data_path().join("objects").exists(), "nothing is written to the local directory");
    let found = near(&api, &base, "how long is forgotten luggage kept?").await;
    assert!(texts(&found).contains("Narvik depot"), "{found:?}");

    // `ready` means the extraction job read the file back from the bucket: it works from the
    // stored file, not from the upload request.
    api.delete(&path).await.expect(200);
    assert_eq!(s3.objects("switchboard-uploads").await, [], "deleting the document removes its file");
    assert_eq!(api.get(&path).await.status, 404);
}

#[tokio::test]
async fn an_unreachable_bucket_fails_the_upload_and_keeps_nothing() {
    // Nothing listens on this port: the upload cannot be stored and must not be half-kept.
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let mut env = ENV.to_vec();
    env.extend([
        ("SWITCHBOARD_S3_BUCKET", "nowhere"),
        ("SWITCHBOARD_S3_ENDPOINT", endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
    ]);
    let stack = Stack::start_with(&env).await;
    let team = stack.team("Acme", false, 100).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));
    let (content_type, body) = multipart::form(&[Part::file("file", "a.txt", b"Some text.")]);
    let failed = api.raw("POST", &format!("{base}/documents"), Some(&content_type), body).await;
    assert_eq!(failed.error_code(503), "SERVICE_UNAVAILABLE");
    assert_eq!(failed.body["error"], "File storage is unavailable");
    assert_eq!(api.get(&base).await.expect(200)["data"]["documents"], json!([]), "no document without its file");
}

// ---------------------------------------------------------------------------------------
// An OpenAI-compatible chat model.

/// What the chat endpoint received: headers and JSON body of each request.
#[derive(Default)]
struct ChatLog {
    requests: Mutex<Vec<(String, Value)>>,
}

/// Serves `POST /v1/chat/completions`. Each section's pairs are one question the "model"
/// makes up and the section's own text as the answer; a section that mentions `fail_on`
/// gets a 500, as a flaky provider would answer.
async fn chat_model(fail_on: &'static str) -> (WebServer, Arc<ChatLog>) {
    let log = Arc::new(ChatLog::default());
    let shared = log.clone();
    let server = WebServer::start(move |request| std::future::ready(answer_chat(&request, &shared, fail_on))).await;
    (server, log)
}

fn answer_chat(request: &Request, log: &ChatLog, fail_on: &str) -> Reply {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    log.requests.lock().unwrap().push((request.head.clone(), body.clone()));
    let user = body["messages"][1]["content"].as_str().unwrap_or_default().to_owned();
    let (status, reply) = if !request.head.starts_with("POST /v1/chat/completions ") {
        (404, json!({ "error": { "message": "no such route" } }))
    } else if user.contains(fail_on) {
        (500, json!({ "error": { "message": "the model is overloaded" } }))
    } else {
        let text = user.split("\n\n").nth(1).unwrap_or_default().trim().to_owned();
        let pairs =
            json!({ "pairs": [{ "question": format!("What does section {} say?", user.len()), "answer": text }] });
        // Wrapped in a code fence, as some models do although asked not to.
        let content = format!("```json\n{pairs}\n```");
        (200, json!({ "choices": [{ "index": 0, "message": { "role": "assistant", "content": content } }] }))
    };
    Reply::new(status).header("Content-Type", "application/json").body(reply.to_string())
}

#[tokio::test]
async fn a_configured_chat_model_writes_the_pairs_and_a_failed_section_keeps_its_heading() {
    let site = Site::start().await;
    let (model, log) = chat_model("repair workshop").await;
    let url = model.url("/v1");
    let mut env = ENV.to_vec();
    env.extend([
        ("SWITCHBOARD_LLM_URL", url.as_str()),
        ("SWITCHBOARD_LLM_MODEL", "tiny-test-model"),
        ("SWITCHBOARD_LLM_API_KEY", "sk-test-123"),
    ]);
    let stack = Stack::start_with(&env).await;
    let team = stack.team("Acme", false, 100).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Support").await));
    let page = add_webpage(&api, &base, "FAQ", &site.url("/faq")).await;
    let ready = settle(&api, &format!("{base}/webpages/{}", id(&page))).await;
    assert_eq!(ready["status"], "ready", "{ready}");

    let content = ready["content"].as_array().unwrap();
    let by_model: Vec<&Value> =
        content.iter().filter(|e| e["question"].as_str().unwrap().starts_with("What does section")).collect();
    assert!(by_model.iter().any(|e| e["answer"].as_str().unwrap().contains(SHIPPING)), "{content:?}");
    assert!(by_model.iter().any(|e| e["answer"].as_str().unwrap().contains(RETURNS)), "{content:?}");
    // The model failed on the repairs section: its heading question stands in.
    let repairs = content.iter().find(|e| e["answer"].as_str().unwrap().contains(REPAIRS)).expect("repairs kept");
    assert_eq!(repairs["question"], "Do you offer repairs?");
    assert!(!content.iter().any(|e| e["question"] == "When do you ship orders?"), "the model's pairs replace headings");

    let requests = log.requests.lock().unwrap().clone();
    assert!(requests.len() >= 3, "one request per section: {}", requests.len());
    for (head, body) in &requests {
        assert!(head.to_ascii_lowercase().contains("authorization: bearer sk-test-123"), "{head}");
        assert_eq!(body["model"], "tiny-test-model");
        assert_eq!(body["response_format"]["type"], "json_object");
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][1]["role"], "user");
    }

    let found = near(&api, &base, "which days are parcels sent from the warehouse?").await;
    assert!(found[0]["question"].as_str().unwrap().starts_with("What does section"), "{found:?}");
    assert!(found[0]["answer"].as_str().unwrap().contains(SHIPPING), "{found:?}");
}
