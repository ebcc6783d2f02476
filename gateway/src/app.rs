//! The REST transport: pingora glue. pingora calls `request_filter` for every request; it is
//! routed, its body read and its operation handed to the admission pipeline (`pipeline.rs`),
//! which MCP (`mcp/`) shares. Every answer, error or not, leaves through [`App::write`] with
//! the same headers.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use http::HeaderValue;
use pingora::http::ResponseHeader;
use pingora::modules::http::HttpModules;
use pingora::prelude::HttpPeer;
use pingora::proxy::{ProxyHttp, Session};
use serde_json::Value;
use switchboard_kit::{ErrorKind, ServiceError};

use crate::compression::Compressed;
use crate::config::GatewayConfig;
use crate::endpoint::{BodyKind, Endpoint, Method, RawInput};
use crate::idempotency;
use crate::limits::Decision;
use crate::pipeline::{Admission, Admit, Once, Pipeline};
use crate::reply::{HandlerResult, Reply, Streamed};
use crate::router::{Match, Router};
use crate::sessions;
use crate::{mcp, openapi, playback, portal};

/// Liveness, at the root (where probes look) and under `/v1` (where the description puts it).
const HEALTH_PATH: &str = "/healthz";

/// Readiness: 503 while the gateway drains before it stops, so that a load balancer's health
/// checks take it out of rotation while it still serves what it is sent.
const READY_PATH: &str = "/readyz";

/// What a multipart body may carry beyond its file: boundaries, part headers, name, notes.
const UPLOAD_ENVELOPE_BYTES: usize = 64 * 1024;

pub struct App {
    config: GatewayConfig,
    router: Router,
    pipeline: Pipeline,
    metrics: crate::metrics::GatewayMetrics,
    in_flight: Arc<AtomicUsize>,
    /// False from the start of a drain (`RunningGateway::drain`).
    ready: Arc<AtomicBool>,
    /// The OpenAPI description and the skill file, built from the endpoints at start.
    openapi: Compressed,
    skill: Compressed,
    mcp: mcp::Server,
}

/// Per-request state.
pub struct RequestCtx {
    request_id: String,
    decision: Option<Decision>,
    /// Close the connection after answering (the body was not read to its end).
    close: bool,
    _in_flight: InFlight,
}

/// Counts a request as in flight for as long as its context lives.
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl App {
    pub fn new(config: GatewayConfig, in_flight: Arc<AtomicUsize>, ready: Arc<AtomicBool>) -> anyhow::Result<Self> {
        let endpoints = crate::api::endpoints();
        Ok(Self {
            openapi: Compressed::new(openapi::document_bytes()?),
            skill: Compressed::new(Bytes::from(openapi::skill(&endpoints))),
            mcp: mcp::Server::new(mcp::Tools::build(&endpoints)?, config.max_body_bytes),
            router: Router::new(endpoints),
            pipeline: Pipeline::new(&config)?,
            metrics: crate::metrics::GatewayMetrics::new(),
            in_flight,
            ready,
            config,
        })
    }

    /// Answers a request; `found` is the router's answer for its method and path.
    async fn pipeline(&self, session: &mut Session, ctx: &mut RequestCtx, found: Match<'_>) -> HandlerResult {
        let header = session.req_header();
        let path = header.uri.path().to_owned();
        if let Some(reply) = self.public_resource(header, &path) {
            return Ok(reply);
        }
        // The rarer branches are boxed: inline, their futures would make every request's
        // future (moved several times per request) as large as the largest of them.
        if mcp::PATHS.contains(&path.as_str()) {
            return Box::pin(self.mcp.serve(&self.pipeline, session, &mut ctx.decision)).await;
        }
        if let Some(answer) = portal::serve(header.method.as_str(), header) {
            return answer;
        }
        if let Some(call_id) = playback::call_of(&path)
            && matches!(header.method.as_str(), "GET" | "HEAD")
        {
            let query: Vec<(String, String)> = header
                .uri
                .query()
                .map(|q| url::form_urlencoded::parse(q.as_bytes()).into_owned().collect())
                .unwrap_or_default();
            let services = self.pipeline.services().await?;
            return Box::pin(playback::serve(&self.config.url_key, &services, session.req_header(), call_id, &query))
                .await;
        }
        let (route, params) = match found {
            Match::Found(route, params) => (route, params),
            Match::MethodNotAllowed(allowed) => {
                let allowed: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
                let error = ServiceError::new(ErrorKind::MethodNotAllowed, "Method not allowed")
                    .with_hint(format!("This path accepts {}.", allowed.join(", ")));
                return Ok(Reply::error(&error).with_header("Allow", allowed.join(", ")));
            }
            Match::NotFound => {
                return Err(ServiceError::not_found("Route not found"));
            }
        };
        let mut raw = RawInput::with_query(header.uri.query());
        raw.path = params.into_iter().map(|(name, value)| (name.to_owned(), Value::String(value))).collect();
        let team_id = raw.query.get("teamId").and_then(Value::as_str).map(str::to_owned);

        let services = self.pipeline.services().await?;
        let client = self.pipeline.origins.client(session);
        let session_token = sessions::token(session.req_header(), client.https);
        let principal =
            self.pipeline.principal(session.req_header(), route, &services, session_token.as_deref()).await?;
        tracing::Span::current().record("switchboard.team_id", principal.team.id.as_str());
        let request = Admit {
            route,
            services,
            principal,
            team_id,
            client,
            session_token,
            sso_binding: sessions::sso_binding(session.req_header()),
        };
        let Some(key) = idempotency_key(route, session.req_header())? else {
            // Admitted before the body is read: a client over its limit is not read a large upload.
            let call = match self.pipeline.admit(request, &mut ctx.decision).await? {
                Admission::Continue(call) => call,
                Admission::Respond(reply) => return Ok(reply),
            };
            self.read_body(route, session, ctx, &mut raw).await?;
            return self.pipeline.run(route, *call, raw).await;
        };
        self.read_body(route, session, ctx, &mut raw).await?;
        let path_and_query = session.req_header().uri.path_and_query().map_or(path.as_str(), |p| p.as_str());
        let fingerprint = idempotency::fingerprint(route.method.as_str(), path_and_query, &body_identity(&raw));
        let once = Once { key: &key, fingerprint: &fingerprint, request_id: &ctx.request_id };
        Box::pin(self.pipeline.run_once(request, raw, once, &mut ctx.decision)).await
    }

    /// Reads the body the route takes into `raw`.
    async fn read_body(
        &self,
        route: &Endpoint,
        session: &mut Session,
        ctx: &mut RequestCtx,
        raw: &mut RawInput,
    ) -> Result<(), ServiceError> {
        match route.body {
            BodyKind::Json => {
                let limit =
                    route.body_limit.map_or(self.config.max_body_bytes, |own| own.max(self.config.max_body_bytes));
                raw.body = self.read_json(session, ctx, limit).await?;
            }
            // A body an operation does not take is still read: a non-JSON one is refused as
            // anywhere else, and the connection stays usable.
            BodyKind::None if route.method != Method::Get && route.method != Method::Delete => {
                self.read_json(session, ctx, self.config.max_body_bytes).await?;
            }
            BodyKind::None => {}
            BodyKind::Multipart => {
                let limit = self.config.max_upload_bytes.saturating_add(UPLOAD_ENVELOPE_BYTES);
                let read = crate::body::read_upload(session, limit).await;
                if read.is_err() {
                    ctx.close = true;
                }
                raw.upload = Some(read?);
            }
        }
        Ok(())
    }

    async fn read_json(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
        limit: usize,
    ) -> Result<Option<Value>, ServiceError> {
        let read = crate::body::read_json(session, limit).await;
        if read.as_ref().is_err_and(|e| e.kind == ErrorKind::PayloadTooLarge) {
            ctx.close = true;
        }
        read
    }

    /// The resources served without a key (health, the OpenAPI description, the skill file),
    /// each at the root and under `/v1`; they answer GET and HEAD only.
    fn public_resource(&self, header: &pingora::http::RequestHeader, path: &str) -> Option<Reply> {
        let method = header.method.as_str();
        let path = path.strip_prefix("/v1").filter(|rest| rest.starts_with('/')).unwrap_or(path);
        let reply = match path {
            HEALTH_PATH => Reply::json(200, serde_json::json!({ "status": "ok" })),
            READY_PATH if self.ready.load(Ordering::Acquire) => Reply::json(200, serde_json::json!({ "status": "ok" })),
            READY_PATH => Reply::error(
                &ServiceError::new(ErrorKind::Unavailable, "This gateway is stopping")
                    .with_hint("Send requests to another gateway; this one finishes what it has."),
            ),
            openapi::DOCUMENT_PATH => Reply::document("application/json", &self.openapi, header),
            openapi::SKILL_PATH => Reply::document("text/markdown; charset=utf-8", &self.skill, header),
            _ => return None,
        };
        if matches!(method, "GET" | "HEAD") {
            return Some(reply);
        }
        let error = ServiceError::new(ErrorKind::MethodNotAllowed, "Method not allowed")
            .with_hint("This path accepts GET, HEAD.");
        Some(Reply::error(&error).with_header("Allow", "GET, HEAD".to_owned()))
    }

    async fn write(&self, session: &mut Session, ctx: &RequestCtx, reply: Reply) -> pingora::Result<()> {
        let head_only = session.req_header().method == http::Method::HEAD;
        let (content_type, length, body) = match (reply.streamed, reply.raw) {
            (Some(streamed), _) => {
                let Streamed { content_type, length, body } = *streamed;
                (Cow::Owned(content_type), length, Body::Stream(body))
            }
            (None, Some((content_type, bytes))) => (content_type, Some(bytes.len() as u64), Body::Whole(bytes)),
            (None, None) => {
                let bytes = Bytes::from(serde_json::to_vec(&reply.body).unwrap_or_default());
                (Cow::Borrowed("application/json"), Some(bytes.len() as u64), Body::Whole(bytes))
            }
        };
        // Static values are not copied: this runs for every response.
        let content_type = match content_type {
            Cow::Borrowed(text) if text.bytes().all(|byte| (b' '..=b'~').contains(&byte)) => {
                HeaderValue::from_static(text)
            }
            other => header_value(other.into_owned())?,
        };
        // Built as `http` parts, not with pingora's case-keeping builder, which parses every name
        // from text and keeps a second map of their spellings (docs/api-decisions.md: names of
        // our own fields go out in lower case).
        let (mut parts, ()) = http::Response::new(()).into_parts();
        parts.status = http::StatusCode::from_u16(reply.status)
            .map_err(|_| pingora::Error::new_str("a status that is not an HTTP status"))?;
        let headers = &mut parts.headers;
        headers.reserve(12 + reply.headers.len());
        headers.insert(http::header::CONTENT_TYPE, content_type);
        match length {
            Some(length) => headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(length)),
            // A body whose length is known only at its end (an export): pingora frames it in
            // chunks when the header says so.
            None => headers.insert(http::header::TRANSFER_ENCODING, HeaderValue::from_static("chunked")),
        };
        headers.insert(X_REQUEST_ID, header_value(ctx.request_id.as_str())?);
        headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(decision) = &ctx.decision {
            for (name, value) in self.pipeline.limiter.headers(decision) {
                headers.insert(name, value);
            }
        }
        for (name, value) in reply.headers {
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| pingora::Error::new_str("a field name that is not a header name"))?;
            headers.insert(name, header_value(value)?);
        }
        let header = ResponseHeader::from(parts);
        if ctx.close {
            session.set_keepalive(None);
        }
        if head_only {
            return session.write_response_header(Box::new(header), true).await;
        }
        session.write_response_header(Box::new(header), false).await?;
        match body {
            Body::Whole(bytes) => session.write_response_body(Some(bytes), true).await,
            Body::Stream(mut stream) => {
                while let Some(chunk) = stream.next().await {
                    match chunk {
                        Ok(bytes) => session.write_response_body(Some(bytes), false).await?,
                        // The status is sent already: the client sees the body end early.
                        Err(error) => {
                            tracing::warn!(request_id = %ctx.request_id, %error, "a streamed body failed");
                            return Err(pingora::Error::new_str("streamed body failed"));
                        }
                    }
                }
                session.write_response_body(Some(Bytes::new()), true).await
            }
        }
    }
}

const X_REQUEST_ID: http::HeaderName = http::HeaderName::from_static("x-request-id");

/// A field value from text; an owned `String` is taken over, not copied.
fn header_value<T>(text: T) -> pingora::Result<HeaderValue>
where
    HeaderValue: TryFrom<T>,
{
    HeaderValue::try_from(text).map_err(|_| pingora::Error::new_str("a field value that is not a header value"))
}

/// What a response carries after its header.
enum Body {
    Whole(Bytes),
    Stream(crate::reply::BodyStream),
}

/// The bytes that tell a request's body apart from another for an `Idempotency-Key`: the JSON
/// as parsed, or the upload without its boundary. Only computed for requests with a key.
fn body_identity(raw: &RawInput) -> Vec<u8> {
    match (&raw.body, &raw.upload) {
        (Some(body), _) => serde_json::to_vec(body).unwrap_or_default(),
        (None, Some(upload)) => idempotency::without_boundary(&upload.body, &upload.boundary),
        (None, None) => Vec::new(),
    }
}

/// The checked `Idempotency-Key` of a write, if it has one (reads need none: they are
/// idempotent as they are).
fn idempotency_key(route: &Endpoint, header: &pingora::http::RequestHeader) -> Result<Option<String>, ServiceError> {
    if !route.keeps_idempotent_answers() {
        return Ok(None);
    }
    header.headers.get(idempotency::HEADER).map(|value| idempotency::parse_key(value.as_bytes())).transpose()
}

/// A request id from the client is kept when it is short and printable, so that callers
/// can correlate; otherwise a new one is made.
fn request_id(session: &Session) -> String {
    session
        .req_header()
        .headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.chars().all(|c| c.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

#[async_trait]
impl ProxyHttp for App {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        RequestCtx {
            request_id: String::new(),
            decision: None,
            close: false,
            _in_flight: InFlight(self.in_flight.clone()),
        }
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> pingora::Result<bool> {
        ctx.request_id = request_id(session);
        // Named and described by the OpenTelemetry HTTP server conventions: `GET
        // /v1/agents/{agentId}` with the route's template; requests of no route stay "request".
        // The exporter takes the name when the span starts, so the route is found here, once.
        let header = session.req_header();
        let found = self.router.find(Method::parse(header.method.as_str()), header.uri.path());
        let route = match &found {
            Match::Found(route, _) => Some(route.path),
            Match::MethodNotAllowed(_) | Match::NotFound => None,
        };
        // The span's name is only built when spans of requests are recorded at all.
        let span = if tracing::enabled!(target: switchboard_kit::telemetry::TRACE_TARGET, tracing::Level::INFO) {
            let name = route.map_or_else(|| "request".to_owned(), |route| format!("{} {route}", header.method));
            tracing::info_span!(
                target: switchboard_kit::telemetry::TRACE_TARGET,
                "request",
                id = %ctx.request_id,
                otel.kind = "server",
                otel.name = name.as_str(),
                http.request.method = %header.method,
                url.path = %header.uri.path(),
                http.route = route,
                http.response.status_code = tracing::field::Empty,
                switchboard.team_id = tracing::field::Empty,
            )
        } else {
            tracing::Span::none()
        };
        // Cloning a standard method allocates nothing.
        let (started, method) = (std::time::Instant::now(), header.method.clone());
        let pipeline = tracing::Instrument::instrument(self.pipeline(session, ctx, found), span.clone());
        let reply = Reply::of(pipeline.await, &ctx.request_id);
        span.record("http.response.status_code", reply.status);
        self.metrics.request(method.as_str(), route, reply.status, started.elapsed());
        self.write(session, ctx, reply).await?;
        Ok(true)
    }

    /// None: pingora's default is a response compression module, disabled, that is still set up
    /// for every request and sees every response. Nothing here compresses.
    fn init_downstream_modules(&self, _modules: &mut HttpModules) {}

    /// Every request is answered in `request_filter`; nothing is proxied.
    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut RequestCtx) -> pingora::Result<Box<HttpPeer>> {
        Err(pingora::Error::new_str("no upstream"))
    }

    async fn logging(&self, session: &mut Session, _error: Option<&pingora::Error>, ctx: &mut RequestCtx) {
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        tracing::debug!(
            request_id = %ctx.request_id,
            method = %session.req_header().method,
            path = %session.req_header().uri.path(),
            status,
            "request"
        );
    }
}
