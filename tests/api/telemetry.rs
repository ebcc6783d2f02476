//! Traces leave over OTLP/HTTP whatever the logs are set to: a receiver on loopback stands in
//! for the collector.

use std::collections::HashMap;
use std::time::Duration;

use prost::Message;
use serde_json::json;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::agents::{create_agent, id};
use crate::common::Stack;
use crate::knowledgebase::create_knowledgebase;

/// Accepts OTLP/HTTP posts and hands on (path, body); answers 200 to each.
async fn receiver() -> (String, mpsc::UnboundedReceiver<(String, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (sender, received) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let sender = sender.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut chunk = [0u8; 64 * 1024];
                loop {
                    let Ok(read) = socket.read(&mut chunk).await else { return };
                    if read == 0 {
                        return;
                    }
                    request.extend_from_slice(&chunk[..read]);
                    let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                    let head = String::from_utf8_lossy(&request[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|line| line.strip_prefix("content-length:"))
                        .and_then(|value| value.trim().parse().ok())
                        .unwrap_or(0);
                    if request.len() < end + 4 + length {
                        continue;
                    }
                    let path = head.split_whitespace().nth(1).unwrap_or_default().to_owned();
                    let _ = sender.send((path, request[end + 4..end + 4 + length].to_vec()));
                    let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await;
                    request.clear();
                }
            });
        }
    });
    (endpoint, received)
}

#[tokio::test]
async fn requests_are_exported_as_traces_even_with_quiet_logs() {
    let (endpoint, mut received) = receiver().await;
    let env =
        [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("RUST_LOG", "warn"), ("OTEL_BSP_SCHEDULE_DELAY", "200")];
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
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ("SWITCHBOARD_RATE_LIMIT_SEARCH", "1000"),
    ];
    let stack = Stack::start_with(&env).await;
    let team = stack.team("Traced", false, 10).await;
    let api = stack.client(&team.key);
    let kb = create_knowledgebase(&api, "Support").await;
    let reference = json!({ "question": "Can I bring my dog?", "answer": "Dogs on a lead are welcome." });
    api.post(&format!("/knowledgebase/{}/references", id(&kb)), reference).await.expect(201);
    let agent = create_agent(&api, "Ava", json!({ "knowledgebaseId": kb["id"] })).await;
    let path = format!("/agents/{}/knowledgebase/search?query=pets", id(&agent));
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
            if ["IdentityService", "AgentsService", "KnowledgebaseService"]
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
        panic!("no trace with gateway, identity, agents and knowledgebase spans within 30 s; spans: {seen:#?}");
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
}
