//! Runs the gateway's pingora service: on event loops of its own, one per thread, or on the
//! caller's tokio runtime.
//!
//! The listening socket is bound here and handed to pingora as an inherited descriptor, so
//! that `:0` yields a known port with no bind race, and shutdown is ours: stop accepting,
//! let the requests in flight finish (up to `drain_timeout`), then return.

use std::net::SocketAddr;
use std::os::fd::IntoRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use pingora::server::configuration::ServerConf;
use pingora::server::{Fds, ListenFds};
use pingora::services::Service as _;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::app::App;
use crate::config::GatewayConfig;

pub struct RunningGateway {
    pub address: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
    /// The gateway's own event loops, when it has them (`GatewayConfig::threads`).
    loops: Option<pingora_runtime::Runtime>,
    in_flight: Arc<AtomicUsize>,
    ready: Arc<AtomicBool>,
    drain_timeout: Duration,
}

/// The bound address as a client on this machine reaches it (an unspecified address is loopback).
fn reachable(address: std::net::SocketAddr) -> std::net::SocketAddr {
    match address.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => (std::net::Ipv4Addr::LOCALHOST, address.port()).into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => (std::net::Ipv6Addr::LOCALHOST, address.port()).into(),
        _ => address,
    }
}

/// How long the gateway's event loops get to end their last tasks once drained.
const LOOPS_SHUTDOWN: Duration = Duration::from_secs(1);

/// Binds `config.listen` and starts serving. Must be called inside a tokio runtime.
pub async fn start(mut config: GatewayConfig) -> anyhow::Result<RunningGateway> {
    let listener = std::net::TcpListener::bind(&config.listen).with_context(|| format!("binding {}", config.listen))?;
    let address = listener.local_addr().context("reading the bound address")?;
    if config.public_url.is_none() {
        let url = format!("http://{}", reachable(address));
        if address.ip().is_unspecified() {
            tracing::warn!(%url, "SWITCHBOARD_PUBLIC_URL is not set: links the platform hands out point at {url}");
        }
        config.public_url = Some(url);
    }
    // pingora adopts the descriptor as is; a blocking one would stall a runtime worker in
    // accept().
    listener.set_nonblocking(true).context("making the listener non-blocking")?;
    let mut fds = Fds::new();
    fds.add(address.to_string(), listener.into_raw_fd());
    let fds: ListenFds = Arc::new(parking_lot::Mutex::new(fds));

    let in_flight = Arc::new(AtomicUsize::new(0));
    let (drain_timeout, threads) = (config.drain_timeout, config.threads);
    let ready = Arc::new(AtomicBool::new(true));
    let app = App::new(config, in_flight.clone(), ready.clone())?;
    let server_conf = Arc::new(ServerConf::default());
    let mut service = pingora::proxy::http_proxy_service_with_name(&server_conf, app, "switchboard-gateway");
    service.add_tcp(&address.to_string());

    let (shutdown, shutdown_watch) = watch::channel(false);
    let serve = async move { service.start_service(Some(fds), shutdown_watch, 1).await };
    let (task, loops) = if threads == 0 {
        (tokio::spawn(serve), None)
    } else {
        // pingora's no-steal runtime: one single-threaded tokio runtime per thread, and each
        // accepted connection spawned on one of them (pingora's `current_handle`), where it
        // stays. Measured against the shared work-stealing runtime (BENCHMARKS.md, issue 27):
        // 10 % more requests per second for `GET /v1/me`, less beside large bodies.
        let loops = pingora_runtime::Runtime::new_no_steal(threads, "gateway");
        (loops.get_handle().spawn(serve), Some(loops))
    };
    tracing::info!(%address, threads, "gateway listening");
    Ok(RunningGateway { address, shutdown, task, loops, in_flight, ready, drain_timeout })
}

impl RunningGateway {
    /// Answers `/readyz` 503 for `period` while still serving everything else, so that the
    /// load balancer in front stops sending here before [`RunningGateway::shutdown`] closes
    /// the listener.
    pub async fn drain(&self, period: Duration) {
        self.ready.store(false, Ordering::Release);
        if !period.is_zero() {
            tracing::info!(seconds = period.as_secs_f64(), "draining: /readyz answers 503, requests are still served");
            tokio::time::sleep(period).await;
        }
    }

    /// Stops accepting connections, then waits for the requests in flight.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        if let Err(error) = self.task.await {
            tracing::warn!(%error, "gateway listener ended abnormally");
        }
        let started = Instant::now();
        while self.in_flight.load(Ordering::Acquire) > 0 && started.elapsed() < self.drain_timeout {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left = self.in_flight.load(Ordering::Acquire);
        if left > 0 {
            tracing::warn!(left, "drain timeout reached with requests still in flight");
        } else {
            tracing::info!("gateway drained");
        }
        if let Some(loops) = self.loops {
            // Blocks until the loops' threads end; not on a runtime worker.
            let stopped = tokio::task::spawn_blocking(move || loops.shutdown_timeout(LOOPS_SHUTDOWN)).await;
            if let Err(error) = stopped {
                tracing::warn!(%error, "the gateway's event loops did not stop cleanly");
            }
        }
    }
}
