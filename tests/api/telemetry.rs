//! Traces leave over OTLP/HTTP whatever the logs are set to: a receiver on loopback stands in
//! for the collector.

use std::collections::HashMap;
use std::time::Duration;

use prost::Message;
use serde_json::json;
use tokio::sync::mpsc;

use crate::agents::{create_agent, id};
use crate::common::web::{Reply, WebServer};
use crate::common::{Api, Stack};
use crate::knowledgebase::create_knowledgebase;

/// Accepts OTLP/HTTP posts and hands on (path, body); answers 200 to each, keeping the
/// connection open for the next export as a collector does.
async fn receiver() -> (WebServer, mpsc::UnboundedReceiver<(String, Vec<u8>)>) {
    let (sender, received) = mpsc::unbounded_channel();
    let server = WebServer::start(move |request| {
        let _ = sender.send((request.target.to_lowercase(), request.body));
        std::future::ready(Reply::new(200).keep_alive())
    })
    .await;
    (server, received)
}

#[tokio::test]
async fn requests_are_exported_as_traces_even_with_quiet_logs() {
    let (endpoint, mut received) = receiver().await;
    let env =
        [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.origin()), ("RUST_LOG", "warn"), ("OTEL_BSP_SCHEDULE_DELAY", "200")];
    let stack = Stack::start_with(&env).await;
    let team = stack.team("Traced", false, 0).await;
    stack.client(&team.key).get("/me").await.expect(200);
    // The gateway's request span, exported by the batch processor within its delay: named
    // `GET /v1/me` (OpenTelemetry HTTP server conventions) with its route and status.
    let wait = async {
        loop {
            let (path, body) = received.recv().await.expect("the receiver runs");
            let has = |needle: &[u8]| body.windows(needle.len()).any(|window| window == needle);
            // Named by the route, with the conventions' attributes.
            if path == "/v1/traces" && has(b"GET /v1/me") && has(b"http.route") && has(b"http.response.status_code") {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait).await.expect("a trace of the request arrived within 30 s");
}

/// A stack with a team whose agent has a knowledge base with one reference; the agent's search
/// path.
async fn searchable(env: &[(&str, &str)]) -> (Stack, Api, String) {
    let stack = Stack::start_with(env).await;
    let team = stack.team("Traced", false, 10).await;
    let api = stack.client(&team.key);
    let kb = create_knowledgebase(&api, "Support").await;
    let reference = json!({ "question": "Can I bring my dog?", "answer": "Dogs on a lead are welcome." });
    api.post(&format!("/knowledgebase/{}/references", id(&kb)), reference).await.expect(201);
    let agent = create_agent(&api, "Ava", json!({ "knowledgebaseId": kb["id"] })).await;
    let path = format!("/agents/{}/knowledgebase/search?query=pets", id(&agent));
    (stack, api, path)
}

/// The parts of an OTLP `ExportTraceServiceRequest` the test reads (prost skips the rest).
#[derive(Clone, PartialEq, Message)]
struct ExportTraceServiceRequest {
    #[prost(message, repeated, tag = "1")]
    resource_spans: Vec<ResourceSpans>,
}

#[derive(Clone, PartialEq, Message)]
struct ResourceSpans {
    #[prost(message, repeated, tag = "2")]
    scope_spans: Vec<ScopeSpans>,
}

#[derive(Clone, PartialEq, Message)]
struct ScopeSpans {
    #[prost(message, repeated, tag = "2")]
    spans: Vec<Span>,
}

#[derive(Clone, PartialEq, Message)]
struct Span {
    #[prost(bytes = "vec", tag = "1")]
    trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    span_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    parent_span_id: Vec<u8>,
    #[prost(string, tag = "5")]
    name: String,
    /// 2 server, 3 client.
    #[prost(int32, tag = "6")]
    kind: i32,
    #[prost(fixed64, tag = "7")]
    start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
struct KeyValue {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(message, optional, tag = "2")]
    value: Option<AnyValue>,
}

/// `AnyValue`'s string member (a oneof on the wire; the others are skipped).
#[derive(Clone, PartialEq, Message)]
struct AnyValue {
    #[prost(string, tag = "1")]
    string_value: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Span {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref())
            .map(|v| v.string_value.as_str())
    }
}

#[tokio::test]
async fn a_knowledge_search_is_one_trace_across_gateway_identity_agents_and_knowledgebase() {
    let (endpoint, mut received) = receiver().await;
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.origin()),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ("SWITCHBOARD_RATE_LIMIT_SEARCH", "1000"),
    ];
    let (_stack, api, path) = searchable(&env).await;
    // After the auth cache of the setup requests expired, so that this request asks identity.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    api.get(&path).await.expect(200);

    let route = "GET /v1/agents/{agentId}/knowledgebase/search";
    let mut spans: Vec<Span> = Vec::new();
    let wait = async {
        loop {
            let (path, body) = received.recv().await.expect("the receiver runs");
            if path != "/v1/traces" {
                continue;
            }
            let request = ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP trace export");
            spans.extend(request.resource_spans.into_iter().flat_map(|r| r.scope_spans).flat_map(|s| s.spans));
            let Some(root) = spans.iter().find(|span| span.name == route) else { continue };
            let trace: Vec<&Span> = spans.iter().filter(|span| span.trace_id == root.trace_id).collect();
            let served = |service: &str| {
                trace.iter().any(|span| span.kind == 2 && span.attribute("rpc.service") == Some(service))
            };
            let queried = trace.iter().any(|span| span.kind == 3 && span.attribute("db.system.name").is_some());
            if queried
                && ["IdentityService", "AgentsService", "KnowledgebaseService"]
                    .iter()
                    .all(|service| served(&format!("switchboard.v1.{service}")))
            {
                return (root.clone(), trace.into_iter().cloned().collect::<Vec<_>>());
            }
        }
    };
    let Ok((root, trace)) = tokio::time::timeout(Duration::from_secs(30), wait).await else {
        let seen: Vec<String> = spans
            .iter()
            .map(|s| {
                let keys: Vec<&str> = s.attributes.iter().map(|kv| kv.key.as_str()).collect();
                format!("{} kind={} trace={} {keys:?}", s.name, s.kind, hex(&s.trace_id))
            })
            .collect();
        panic!("no trace with gateway, identity, agents, knowledgebase and query spans within 30 s; spans: {seen:#?}");
    };

    assert_eq!(root.kind, 2, "the gateway's span is a server span");
    assert_eq!(root.attribute("http.route"), Some("/v1/agents/{agentId}/knowledgebase/search"));
    let by_id: HashMap<&[u8], &Span> = trace.iter().map(|span| (span.span_id.as_slice(), span)).collect();
    for span in trace.iter().filter(|span| span.kind == 2 && span.attribute("rpc.system") == Some("grpc")) {
        // A service's span is the child of the client span of the call that reached it.
        let parent = by_id.get(span.parent_span_id.as_slice()).unwrap_or_else(|| panic!("{} has no parent", span.name));
        assert_eq!(parent.kind, 3, "{} is called by a client span", span.name);
        assert_eq!(parent.name, span.name, "client and server spans are both named service/method");
        let method = span.attribute("rpc.method").unwrap_or_default();
        assert!(span.name.ends_with(&format!("/{method}")) && !method.is_empty(), "{}", span.name);
    }
    // Database queries are client spans inside the gRPC call that ran them.
    let queries: Vec<&Span> = trace.iter().filter(|span| span.attribute("db.system.name").is_some()).collect();
    for query in &queries {
        let parent =
            by_id.get(query.parent_span_id.as_slice()).unwrap_or_else(|| panic!("{} has no parent", query.name));
        assert_eq!(
            (query.kind, parent.kind),
            (3, 2),
            "{} is a client span in a served call ({})",
            query.name,
            parent.name
        );
        assert_eq!(parent.attribute("rpc.system"), Some("grpc"), "{} ran inside a gRPC call", query.name);
        let text = query.attribute("db.query.text").unwrap_or_default();
        assert!(text.to_ascii_uppercase().starts_with(&query.name), "{} is named by its operation: {text}", query.name);
        assert!(0 < query.start_time_unix_nano && query.start_time_unix_nano <= query.end_time_unix_nano);
    }
}

/// The value of the first sample of `name` whose labels include every one of `labels`.
pub fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
        (metric == name && labels.iter().all(|label| rest.contains(label))).then(|| value.parse().ok()).flatten()
    })
}

#[tokio::test]
async fn metrics_are_served_on_the_admin_port_and_exported_over_otlp() {
    let (endpoint, mut received) = receiver().await;
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.origin()), ("OTEL_METRIC_EXPORT_INTERVAL", "300")];
    let (stack, api, path) = searchable(&env).await;
    api.get("/me").await.expect(200);
    api.get(&path).await.expect(200);

    let admin = stack.process.line_after("metrics:").expect("dev prints the admin port's metrics URL");
    let scrape = reqwest::get(&admin).await.unwrap();
    assert_eq!(scrape.status(), 200);
    assert!(scrape.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    let text = scrape.text().await.unwrap();
    let me = ["http_route=\"/v1/me\"", "http_request_method=\"GET\"", "http_response_status_code=\"200\""];
    assert_eq!(sample(&text, "http_server_request_duration_seconds_count", &me), Some(1.0), "{text}");
    assert!(text.contains("# TYPE http_server_request_duration_seconds histogram"), "{text}");
    for class in ["standard", "search"] {
        let allowed = [format!("class=\"{class}\""), "decision=\"allowed\"".to_owned()];
        let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
        assert_eq!(sample(&text, "switchboard_rate_limit_decisions_total", &allowed), Some(1.0), "{text}");
    }
    assert_eq!(sample(&text, "switchboard_credits_debited_total", &[]), Some(1.0), "{text}");
    // The reference's passages (a single write's) and the search's query, each counted under
    // its kind of work.
    for work in ["write", "query"] {
        let labels = ["outcome=\"ok\"".to_owned(), format!("switchboard_embedding_work=\"{work}\"")];
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let embedded = sample(&text, "switchboard_embedding_duration_seconds_count", &labels);
        assert!(embedded >= Some(1.0), "{work} embedded: {text}");
    }
    for state in ["idle", "used"] {
        let labels =
            ["db_client_connection_pool_name=\"identity\"", &format!("db_client_connection_state=\"{state}\"")];
        assert!(sample(&text, "db_client_connection_count", &labels).is_some(), "{text}");
    }

    // Not on the public port.
    let public = api.get("/metrics").await;
    assert_eq!(public.status, 404, "{}", public.text);

    let wait = async {
        loop {
            let (path, body) = received.recv().await.expect("the receiver runs");
            let has = |needle: &[u8]| body.windows(needle.len()).any(|window| window == needle);
            if path == "/v1/metrics" && has(b"http.server.request.duration") && has(b"switchboard.credits.debited") {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait).await.expect("OTLP metrics arrived within 30 s");
}
