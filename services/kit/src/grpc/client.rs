//! Channels to other components. Every call made through one carries the service token and
//! is a client span (OpenTelemetry RPC conventions) whose trace context goes along, so that the
//! callee's span is its child, and carries the key of the write being answered, if any
//! (`write_keys`): callers write plain client calls.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use tokio::sync::Notify;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Endpoint;
use tracing::Instrument;
use tracing::instrument::Instrumented;

use super::discovery;
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

/// Runs each call in a client span and sends that span's trace context with it, and tells the
/// channel's replica follower when a call could not reach its replica (so that it checks the
/// replicas again at once instead of at its next round).
#[derive(Clone)]
pub struct Traced<S> {
    inner: S,
    unreachable: Arc<Notify>,
}

impl<S, B> tower::Service<http::Request<B>> for Traced<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let span = crate::telemetry::grpc_client_span(request.uri().path());
        crate::telemetry::inject_into(&span, request.headers_mut());
        if let Some(key) = crate::write_keys::WriteKey::current_header() {
            request.headers_mut().insert(crate::write_keys::METADATA, key);
        }
        let call: Instrumented<S::Future> = self.inner.call(request).instrument(span);
        let unreachable = Arc::clone(&self.unreachable);
        Box::pin(async move {
            // An error here is the transport's (a refused connection, a reset stream); what the
            // replica answered, errors included, is an `Ok` response with a gRPC status.
            let answer = call.await;
            if answer.is_err() {
                unreachable.notify_one();
            }
            answer
        })
    }
}

/// HTTP/2 connections to each replica: one connection serialises its streams through one
/// connection task, which caps throughput under many concurrent requests. (Before the channel
/// followed replicas, the same number of identical endpoints was given to `balance_list`,
/// which keys them by URI and so kept one.)
const CONNECTIONS_PER_REPLICA: usize = 4;

/// A lazily connecting, self-reconnecting channel to the replicas `urls` names (one URL, or
/// several separated by commas; each host resolved again every few seconds, see
/// [`super::discovery`]); calls time out after `timeout`. Spawns the task that follows the
/// replicas, so it must be called inside the tokio runtime that will drive the channel.
pub fn channel(urls: &str, access: &ServiceAccess, timeout: Duration) -> anyhow::Result<Channel> {
    let targets = discovery::targets(urls)?;
    let endpoint = move |uri: http::Uri| {
        Endpoint::from(uri)
            .connect_timeout(Duration::from_secs(2).min(timeout))
            .timeout(timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_while_idle(true)
    };
    let replicas = targets.len() * CONNECTIONS_PER_REPLICA;
    let (channel, changes) = tonic::transport::Channel::balance_channel(replicas.max(16) * 2);
    let unreachable = Arc::new(Notify::new());
    tokio::spawn(discovery::follow(targets, endpoint, CONNECTIONS_PER_REPLICA, changes, Arc::clone(&unreachable)));
    let inner = InterceptedService::new(channel, Outgoing { access: access.clone() });
    Ok(Traced { inner, unreachable })
}
