//! The one small HTTP/1.1 server the tests use wherever the platform needs a peer on the web:
//! a website to scrape, a webhook receiver, an OTLP collector, a chat model. Each test says
//! only how to answer and keeps what it was asked, so that reading requests off the wire is
//! written (and fixed) once. It listens on loopback (127.0.0.1 unless told another 127.x address)
//! and a port of its own, never elsewhere.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long the rest of a request may take once its first bytes came: a peer that stalls
/// half-way loses its connection rather than keeping a task for ever. The wait for a request
/// to begin is not bounded, as a kept-alive connection idles between requests.
const REST_OF_REQUEST: Duration = Duration::from_secs(10);
/// The longest request head read; a longer one closes the connection.
const MAX_HEAD: usize = 64 * 1024;

/// A request as the server read it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The request target, with its query.
    pub target: String,
    /// The request line and the headers as sent.
    pub head: String,
    /// By lowercased name.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Request {
    /// The target without its query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("/")
    }
}

/// An answer. `Connection: close` and a `Content-Length` unless told otherwise.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    until_close: bool,
    keep_alive: bool,
}

impl Reply {
    pub fn new(status: u16) -> Reply {
        Reply { status, headers: Vec::new(), body: Vec::new(), until_close: false, keep_alive: false }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Reply {
        self.body = body.into();
        self
    }

    /// Without `Content-Length`: the body ends when the connection closes, as a server that
    /// streams a page of unknown length sends it.
    pub fn until_close(mut self) -> Reply {
        self.until_close = true;
        self
    }

    /// The connection stays open for the client's next request, as a collector's does.
    pub fn keep_alive(mut self) -> Reply {
        self.keep_alive = true;
        self
    }
}

/// A server on 127.0.0.1, stopped (no longer accepting) when dropped.
pub struct WebServer {
    origin: String,
    task: tokio::task::JoinHandle<()>,
}

impl WebServer {
    /// Starts answering every request with what `answer` gives for it.
    pub async fn start<F, Fut>(answer: F) -> WebServer
    where
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Reply> + Send + 'static,
    {
        Self::start_at("127.0.0.1", answer).await
    }

    /// [`WebServer::start`] on another loopback address, e.g. `127.0.0.2`: a peer the platform
    /// must not reach although 127.0.0.1 is allowed.
    pub async fn start_at<F, Fut>(ip: &str, answer: F) -> WebServer
    where
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Reply> + Send + 'static,
    {
        assert!(ip.starts_with("127."), "test servers listen on loopback only, not {ip}");
        let listener = TcpListener::bind((ip, 0)).await.unwrap_or_else(|_| panic!("a port on {ip}"));
        let origin = format!("http://{}", listener.local_addr().expect("the listener's address"));
        let answer = Arc::new(answer);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, answer.clone()));
            }
        });
        WebServer { origin, task }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin)
    }
}

/// The origin, so that `format!("{server}/path")` names a page of it.
impl fmt::Display for WebServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers the requests of one connection in turn until a reply closes it.
async fn serve<F, Fut>(mut stream: TcpStream, answer: Arc<F>)
where
    F: Fn(Request) -> Fut,
    Fut: Future<Output = Reply>,
{
    while let Some(request) = read_request(&mut stream).await {
        let reply = answer(request).await;
        if write_reply(&mut stream, &reply).await.is_err() || !reply.keep_alive {
            break;
        }
    }
    let _ = stream.shutdown().await;
}

/// The next request of the connection; `None` when it closes, stalls or sends nonsense.
async fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut data = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let head_end = loop {
        let read = if data.is_empty() {
            stream.read(&mut buffer).await.ok()?
        } else {
            tokio::time::timeout(REST_OF_REQUEST, stream.read(&mut buffer)).await.ok()?.ok()?
        };
        if read == 0 {
            return None;
        }
        data.extend_from_slice(&buffer[..read]);
        if let Some(at) = data.windows(4).position(|window| window == b"\r\n\r\n") {
            break at;
        }
        if data.len() > MAX_HEAD {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, target) = (request_line.next()?.to_owned(), request_line.next()?.to_owned());
    let headers: HashMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length").and_then(|value| value.parse().ok()).unwrap_or(0);
    let mut body = data[head_end + 4..].to_vec();
    while body.len() < length {
        let read = tokio::time::timeout(REST_OF_REQUEST, stream.read(&mut buffer)).await.ok()?.ok()?;
        if read == 0 {
            return None;
        }
        body.extend_from_slice(&buffer[..read]);
    }
    // No client of these tests pipelines requests: nothing past the body is another one.
    body.truncate(length);
    Some(Request { method, target, head, headers, body })
}

async fn write_reply(stream: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
    let reason = reqwest::StatusCode::from_u16(reply.status).ok().and_then(|status| status.canonical_reason());
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason.unwrap_or("Status"));
    if !reply.keep_alive {
        head.push_str("Connection: close\r\n");
    }
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !reply.until_close {
        head.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&reply.body).await
}
