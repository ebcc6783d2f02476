//! Channels to other components. Every call made through one carries the service token and,
//! when traces are exported, the caller's trace context: callers write plain client calls.

use std::time::Duration;

use anyhow::Context;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Endpoint;

use super::token::ServiceAccess;

/// What generated clients are built on: `AgentsServiceClient<Channel>`.
pub type Channel = InterceptedService<tonic::transport::Channel, Outgoing>;

/// Signs and traces every outgoing call.
#[derive(Clone)]
pub struct Outgoing {
    access: ServiceAccess,
}

impl Interceptor for Outgoing {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        self.access.sign(request.metadata_mut());
        crate::telemetry::inject(request.metadata_mut());
        Ok(request)
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
    Ok(InterceptedService::new(channel, Outgoing { access: access.clone() }))
}
