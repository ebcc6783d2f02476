//! Traces leave over OTLP/HTTP whatever the logs are set to: a receiver on loopback stands in
//! for the collector.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::common::Stack;

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
