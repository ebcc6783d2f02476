//! The shared service token: every gRPC call between Switchboard components carries
//! `authorization: Bearer <token>`, and every service refuses a call without it
//! (`UNAUTHENTICATED`). Only the standard health service is open, because Kubernetes gRPC
//! probes cannot send metadata. A deployment that keeps its service ports on a network it
//! trusts may say so instead ([`ServiceAccess::Trusted`]); it is never the default.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use sha2::{Digest, Sha256};
use tonic::metadata::{AsciiMetadataValue, MetadataMap};

/// The variable that holds the token in every component.
pub const TOKEN_VARIABLE: &str = "SWITCHBOARD_SERVICE_TOKEN";
/// Set to `true` to run without a token on a network that only trusted callers reach.
pub const TRUSTED_VARIABLE: &str = "SWITCHBOARD_TRUSTED_NETWORK";

/// Calls to this service need no token.
const OPEN_PREFIX: &str = "/grpc.health.v1.Health/";

/// Shortest token accepted: a guessable secret protects nothing.
const MIN_TOKEN_LEN: usize = 16;

/// How a component's gRPC calls are authenticated, in both directions.
#[derive(Clone)]
pub enum ServiceAccess {
    Token(ServiceToken),
    /// No token is sent or asked for: the operator said the network is trusted.
    Trusted,
}

#[derive(Clone)]
pub struct ServiceToken {
    /// What outgoing calls send.
    header: AsciiMetadataValue,
    /// SHA-256 of the token: incoming tokens are compared by digest, so the comparison's
    /// timing tells nothing about the secret.
    digest: Arc<[u8; 32]>,
}

impl std::fmt::Debug for ServiceAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServiceAccess::Token(_) => f.write_str("Token(..)"),
            ServiceAccess::Trusted => f.write_str("Trusted"),
        }
    }
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl ServiceToken {
    pub fn new(token: &str) -> anyhow::Result<Self> {
        let token = token.trim();
        anyhow::ensure!(
            token.len() >= MIN_TOKEN_LEN && token.chars().all(|c| c.is_ascii_graphic()),
            "{TOKEN_VARIABLE} must be at least {MIN_TOKEN_LEN} printable ASCII characters without spaces"
        );
        let header = format!("Bearer {token}").parse().map_err(|_| anyhow::anyhow!("{TOKEN_VARIABLE} is not ASCII"))?;
        Ok(Self { header, digest: Arc::new(digest(token.as_bytes())) })
    }

    /// A random token for one run of `switchboard dev`.
    pub fn generate() -> Self {
        let token = format!("sbt_{}", uuid::Uuid::new_v4().simple());
        // A fresh UUID is 32 hex digits: always a valid token.
        Self::new(&token).unwrap_or_else(|_| unreachable!("generated tokens are valid"))
    }

    /// The secret itself, to hand to a child process or print once.
    pub fn secret(&self) -> &str {
        self.header.to_str().unwrap_or_default().trim_start_matches("Bearer ")
    }

    fn admits(&self, metadata: &http::HeaderMap) -> bool {
        let presented = metadata
            .get(http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim);
        presented.is_some_and(|token| digest(token.as_bytes()) == *self.digest)
    }
}

impl ServiceAccess {
    /// From the environment: the token when `SWITCHBOARD_SERVICE_TOKEN` is set, no token when
    /// `SWITCHBOARD_TRUSTED_NETWORK=true`, else `None` (the caller decides whether that is an
    /// error or a reason to generate one).
    pub fn from_env() -> anyhow::Result<Option<Self>> {
        if let Some(token) = std::env::var(TOKEN_VARIABLE).ok().filter(|v| !v.trim().is_empty()) {
            return Ok(Some(ServiceAccess::Token(ServiceToken::new(&token)?)));
        }
        let trusted = std::env::var(TRUSTED_VARIABLE).unwrap_or_default();
        match trusted.trim() {
            "" | "false" | "0" => Ok(None),
            "true" | "1" => Ok(Some(ServiceAccess::Trusted)),
            other => anyhow::bail!("{TRUSTED_VARIABLE}={other}: expected true or false"),
        }
    }

    /// What `serve` insists on: a token, or the operator's word that the network is trusted.
    pub fn required_from_env() -> anyhow::Result<Self> {
        Self::from_env()?.ok_or_else(|| {
            anyhow::anyhow!(
                "no service token: set {TOKEN_VARIABLE} to the secret shared by the components \
                 (at least {MIN_TOKEN_LEN} characters), or {TRUSTED_VARIABLE}=true if only trusted \
                 callers can reach the gRPC ports"
            )
        })
    }

    /// Adds the token to an outgoing call's metadata.
    pub fn sign(&self, metadata: &mut MetadataMap) {
        if let ServiceAccess::Token(token) = self {
            metadata.insert("authorization", token.header.clone());
        }
    }

    fn admits<B>(&self, request: &http::Request<B>) -> bool {
        match self {
            ServiceAccess::Trusted => true,
            ServiceAccess::Token(token) => {
                request.uri().path().starts_with(OPEN_PREFIX) || token.admits(request.headers())
            }
        }
    }
}

/// The server side: wraps a component's whole gRPC router.
#[derive(Clone)]
pub struct RequireToken {
    access: ServiceAccess,
}

impl RequireToken {
    pub fn new(access: ServiceAccess) -> Self {
        Self { access }
    }
}

impl<S> tower::Layer<S> for RequireToken {
    type Service = Guarded<S>;

    fn layer(&self, inner: S) -> Guarded<S> {
        Guarded { inner, access: self.access.clone() }
    }
}

#[derive(Clone)]
pub struct Guarded<S> {
    inner: S,
    access: ServiceAccess,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, R> tower::Service<http::Request<B>> for Guarded<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Result<http::Response<R>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if self.access.admits(&request) {
            return Box::pin(self.inner.call(request));
        }
        let status = tonic::Status::unauthenticated(
            "this service needs the shared service token: metadata `authorization: Bearer <token>`",
        );
        let response = status.into_http();
        Box::pin(async move { Ok(response) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(path: &str, authorization: Option<&str>) -> http::Request<()> {
        let mut builder = http::Request::builder().uri(format!("http://service{path}"));
        if let Some(value) = authorization {
            builder = builder.header("authorization", value);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn only_the_right_token_passes_and_health_is_open() {
        let token = ServiceToken::new("a-long-enough-shared-secret").unwrap();
        let access = ServiceAccess::Token(token.clone());
        let method = "/switchboard.v1.AgentsService/ListAgents";
        assert!(access.admits(&request(method, Some("Bearer a-long-enough-shared-secret"))));
        assert!(!access.admits(&request(method, Some("Bearer another-long-enough-secret"))));
        assert!(!access.admits(&request(method, Some("a-long-enough-shared-secret"))));
        assert!(!access.admits(&request(method, None)));
        assert!(access.admits(&request("/grpc.health.v1.Health/Check", None)));
        assert!(!access.admits(&request("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", None)));
        assert!(ServiceAccess::Trusted.admits(&request(method, None)));
        assert_eq!(token.secret(), "a-long-enough-shared-secret");
    }

    #[test]
    fn short_or_spaced_tokens_are_refused_and_generated_ones_are_valid() {
        assert!(ServiceToken::new("short").is_err());
        assert!(ServiceToken::new("has a space in the middle").is_err());
        let generated = ServiceToken::generate();
        assert!(ServiceToken::new(generated.secret()).is_ok());
        assert_ne!(generated.secret(), ServiceToken::generate().secret());
    }
}
