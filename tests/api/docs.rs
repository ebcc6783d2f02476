//! The OpenAPI description and the skill file, as a client fetches them.

use serde_json::{Value, json};

use crate::common::{Api, Stack};

#[tokio::test]
async fn the_openapi_description_is_public_and_lists_exactly_the_served_operations() {
    let stack = Stack::start().await;
    let anonymous = Api::new(&stack.base, None);
    let answer = anonymous.get("/openapi.json").await;
    let document = answer.expect(200).clone();
    assert!(answer.header("content-type").unwrap().starts_with("application/json"));
    assert_eq!(document["openapi"], "3.1.0");
    assert_eq!(document["servers"][0]["url"], "/v1");
    assert_eq!(document["components"]["securitySchemes"]["ApiKey"]["name"], "X-API-Key");
    // The root alias serves the same bytes.
    let root = stack.base.trim_end_matches("/v1");
    let alias = Api::new(root, None).get("/openapi.json").await;
    assert_eq!(alias.text, answer.text);

    let client = stack.client(&stack.demo_key);
    let mut operations = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if operation["tags"][0] == "Meta" {
                continue;
            }
            operations += 1;
            if operation["security"] == json!([]) && path.starts_with("/auth/") {
                // Sign-in and what comes before it: tests/api/accounts.rs.
                continue;
            }
            if operation["security"] == json!([]) {
                // Public but signed (recording playback): unsigned, it is refused, not unrouted.
                let answer = client.get(&fill_parameters(path)).await;
                assert_eq!(answer.error_code(403), "FORBIDDEN", "{method} {path}");
                continue;
            }
            assert!(operation["responses"]["401"].is_object(), "{method} {path} documents no 401");
            // Unknown ids and empty bodies: the gateway must know the route, whatever it answers.
            let concrete = fill_parameters(path);
            let request = client.request(method.to_uppercase().parse().unwrap(), &concrete).body("{}");
            let answer = client.send(request.header("Content-Type", "application/json")).await;
            assert_ne!(answer.status, 405, "{method} {path}: {}", answer.text);
            assert_ne!(answer.body["error"], "Route not found", "{method} {path}");
            assert!(answer.status < 500, "{method} {path}: {}", answer.text);
        }
    }
    assert!(operations >= 40, "only {operations} operations described");
    let search = &document["paths"]["/knowledgebase/{knowledgebaseId}/search"]["get"];
    assert_eq!(search["x-rate-class"], "search");
    let names: Vec<&str> = search["parameters"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    for name in ["knowledgebaseId", "teamId", "query", "limit", "threshold"] {
        assert!(names.contains(&name), "search lacks {name}: {names:?}");
    }
}

fn fill_parameters(path: &str) -> String {
    path.split('/')
        .map(|segment| match segment.strip_prefix('{') {
            Some(name) if name.ends_with("Id}") => uuid::Uuid::new_v4().to_string(),
            Some(_) => "1".to_owned(),
            None => segment.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The portal reads the description for the platform's vocabularies (issue 54): a browser
/// gets it gzip-compressed, the same document in a tenth of the bytes.
#[tokio::test]
async fn the_description_is_sent_compressed_to_a_client_that_accepts_gzip() {
    use std::io::Read;
    let stack = Stack::start().await;
    let http = reqwest::Client::new();
    let url = format!("{}/openapi.json", stack.base);
    let plain = http.get(&url).send().await.unwrap();
    assert_eq!(plain.status(), 200);
    assert!(plain.headers().get("content-encoding").is_none(), "no Accept-Encoding, no compression");
    let plain = plain.bytes().await.unwrap();
    let compressed = http.get(&url).header("Accept-Encoding", "gzip, deflate, br").send().await.unwrap();
    assert_eq!(compressed.status(), 200);
    assert_eq!(compressed.headers()["content-encoding"], "gzip");
    assert_eq!(compressed.headers()["vary"], "Accept-Encoding");
    let compressed = compressed.bytes().await.unwrap();
    let mut unpacked = Vec::new();
    flate2::read::GzDecoder::new(&compressed[..]).read_to_end(&mut unpacked).unwrap();
    assert_eq!(unpacked, plain, "the compressed description is the same document");
    assert!(compressed.len() * 5 < plain.len(), "{} bytes compressed of {}", compressed.len(), plain.len());
}

#[tokio::test]
async fn the_skill_file_is_public_markdown_with_front_matter() {
    let stack = Stack::start().await;
    let answer = Api::new(&stack.base, None).get("/skill.md").await;
    assert_eq!(answer.status, 200);
    assert!(answer.header("content-type").unwrap().starts_with("text/markdown"));
    let front = answer.text.strip_prefix("---\n").unwrap().split("\n---\n").next().unwrap();
    let fields: Vec<&str> = front.lines().filter_map(|line| line.split(':').next()).collect();
    assert_eq!(fields, ["name", "description", "version", "last_updated"]);
    assert!(answer.text.contains("GET /v1/openapi.json"));
    assert_eq!(answer.body, Value::Null, "markdown, not JSON");
}

#[tokio::test]
async fn public_resources_answer_under_v1_and_at_the_root_and_only_to_get() {
    let stack = Stack::start().await;
    let root = stack.base.trim_end_matches("/v1").to_owned();
    for base in [stack.base.as_str(), root.as_str()] {
        let anonymous = Api::new(base, None);
        assert_eq!(anonymous.get("/healthz").await.expect(200)["status"], "ok", "{base}/healthz");
        for path in ["/healthz", "/skill.md", "/openapi.json"] {
            for method in ["TRACE", "POST", "DELETE"] {
                let answer = anonymous.raw(method, path, None, Vec::new()).await;
                assert_eq!(answer.error_code(405), "METHOD_NOT_ALLOWED", "{method} {base}{path}");
                assert_eq!(answer.header("allow"), Some("GET, HEAD"), "{method} {base}{path}");
            }
        }
    }
}

/// What a banner line says, without its value: `  identity gRPC:   http://...` is
/// `identity gRPC`; a line without a label is its first three words.
fn banner_label(line: &str) -> String {
    let line = line.trim();
    match line.split_once(": ").or_else(|| line.strip_suffix(':').map(|label| (label, ""))) {
        Some((label, _)) if !label.contains('(') || label.ends_with(')') => label.trim().to_owned(),
        _ => line.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    }
}

/// The README shows the banner a first `switchboard dev` prints: the same lines, in order.
#[tokio::test]
async fn the_readme_shows_every_line_of_the_dev_banner() {
    let stack = Stack::start().await;
    let printed: Vec<String> = stack.process.banner.iter().map(|line| banner_label(line)).collect();
    let readme = include_str!("../../README.md");
    let block = readme
        .split("```text\n")
        .find(|block| block.starts_with("Switchboard dev is running."))
        .and_then(|block| block.split("```").next())
        .expect("the README shows the banner in a ```text block");
    let shown: Vec<String> = block.lines().map(banner_label).collect();
    assert_eq!(shown, printed, "README banner vs. what `switchboard dev` printed: {:#?}", stack.process.banner);
}

/// Issue 55: with a public URL, the banner sends people to the portal there (passkeys work at
/// its host only), not to the address the gateway listens on.
#[tokio::test]
async fn the_banner_names_the_portal_at_the_public_url() {
    let stack = Stack::start_with(&[("SWITCHBOARD_PUBLIC_URL", "http://localhost:8080")]).await;
    let portal = stack.process.line_after("portal:").expect("a portal line");
    assert!(portal.starts_with("http://localhost:8080/"), "{portal}");
    assert!(portal.contains("passkeys"), "{portal}");
}
