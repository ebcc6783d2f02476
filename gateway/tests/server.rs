//! The gateway started in process, both ways it can serve: on event loops of its own (what the
//! binary does by default) and on the caller's runtime (`threads = 0`). Each answers over real
//! HTTP and stops within a bound.

use std::time::Duration;

use switchboard_gateway::GatewayConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BOUND: Duration = Duration::from_secs(10);

/// The whole answer to `GET path` on a connection the server closes after it.
async fn get(address: std::net::SocketAddr, path: &str) -> String {
    let exchange = async {
        let mut stream = TcpStream::connect(address).await.expect("connecting to the gateway");
        let request = format!("GET {path} HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("sending the request");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.expect("reading the answer");
        String::from_utf8(answer).expect("a text answer")
    };
    tokio::time::timeout(BOUND, exchange).await.unwrap_or_else(|_| panic!("no answer to GET {path} within {BOUND:?}"))
}

#[tokio::test]
async fn the_gateway_serves_and_stops_on_its_own_event_loops_and_on_the_callers_runtime() {
    for threads in [2, 0] {
        let config = GatewayConfig { listen: "127.0.0.1:0".to_owned(), threads, ..GatewayConfig::default() };
        let gateway = switchboard_gateway::start(config).await.expect("starting the gateway");
        let address = gateway.address;
        for _ in 0..4 {
            let answer = get(address, "/healthz").await;
            let (head, body) = answer.split_once("\r\n\r\n").expect("a header block");
            assert!(head.starts_with("HTTP/1.1 200"), "threads {threads}: {head}");
            assert_eq!(body, r#"{"status":"ok"}"#, "threads {threads}");
            // docs/api-decisions.md: standard fields keep their spelling, ours are lower case.
            assert!(head.contains("\r\nContent-Type: application/json\r\n"), "threads {threads}: {head}");
            assert!(head.contains("\r\nx-request-id: "), "threads {threads}: {head}");
        }
        tokio::time::timeout(BOUND, gateway.shutdown())
            .await
            .unwrap_or_else(|_| panic!("threads {threads}: the gateway did not stop within {BOUND:?}"));
        assert!(
            tokio::time::timeout(BOUND, TcpStream::connect(address)).await.is_ok_and(|connected| connected.is_err()),
            "threads {threads}: still accepting after shutdown"
        );
    }
}
