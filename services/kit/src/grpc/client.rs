//! Channels to other components. Every call made through one carries the service token and
//! is a client span (OpenTelemetry RPC conventions) whose trace context goes along, so that the
//! callee's span is its child: callers write plain client calls.

use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::Context;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Endpoint;
use tracing::Instrument;
use tracing::instrument::Instrumented;

use super::token::ServiceAccess;

/// What generated clients are built on: `AgentsServiceClient<Channel>`.
pub type Channel = Traced<InterceptedService<tonic::transport::Channel, Outgoing>>;

/// Signs every outgoing call.
#[derive(Clone)]
pub struct Outgoing {
    access: ServiceAccess,
}

impl Interceptor for Outgoing {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        self.access.sign(request.metadata_mut());
        Ok(request)
    }
}

/// Runs each call in a client span and sends that span's trace context with it.
#[derive(Clone)]
pub struct Traced<S> {
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for Traced<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Instrumented<S::Future>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let span = crate::telemetry::grpc_client_span(request.uri().path());
        crate::telemetry::inject_into(&span, request.headers_mut());
        self.inner.call(request).instrument(span)
    }
}

/// HTTP/2 connections per peer: one connection serialises its streams through one connection
/// task, which caps throughput under many concurrent requests.
const CONNECTIONS_PER_PEER: usize = 4;

/// A lazily connecting, self-reconnecting channel to `url`; calls time out after `timeout`.
pub fn channel(url: &str, access: &ServiceAccess, timeout: Duration) -> anyhow::Result<Channel> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .with_context(|| format!("invalid service URL {url}"))?
        .connect_timeout(Duration::from_secs(2).min(timeout))
        .timeout(timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true);
    let channel = tonic::transport::Channel::balance_list(std::iter::repeat_n(endpoint, CONNECTIONS_PER_PEER));
    Ok(Traced { inner: InterceptedService::new(channel, Outgoing { access: access.clone() }) })
}
