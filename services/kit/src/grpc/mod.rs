//! How every service serves gRPC: its own services plus the standard health service and
//! server reflection (both `v1` and `v1alpha`, because common tools such as grpcurl still
//! speak only the older one) listing exactly what it serves, the service token on every call,
//! a tracing span per call that continues the caller's trace, and a graceful stop.

pub mod client;
pub mod discovery;
pub mod token;

use std::future::Future;

use anyhow::Context;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

pub use client::{Channel, channel};
pub use token::{ServiceAccess, ServiceToken};

const HEALTH: &str = "grpc.health.v1.Health";
const REFLECTION_V1: &str = "grpc.reflection.v1.ServerReflection";
const REFLECTION_V1ALPHA: &str = "grpc.reflection.v1alpha.ServerReflection";

fn reflection(services: &[&'static str]) -> tonic_reflection::server::Builder<'static> {
    let mut builder = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(switchboard_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        // google.rpc.Status and its details (ErrorInfo, BadRequest, RetryInfo): what every error
        // carries, so that a client using reflection (grpcurl) can print them.
        .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET);
    for name in services.iter().copied().chain([HEALTH, REFLECTION_V1, REFLECTION_V1ALPHA]) {
        builder = builder.with_service_name(name);
    }
    builder
}

/// Serves `routes`, which implement the gRPC `services` (full names, as health checks and
/// reflection show them), on an already bound listener until `shutdown` completes. The health
/// service answers SERVING while `ready` is true (a service whose database does not answer is
/// not ready). After `shutdown` it answers NOT_SERVING for `drain` while calls keep being
/// served (so that balanced channels, which check every replica's health, move away: see
/// [`discovery`]), and the server stops taking calls and lets those in flight finish.
pub async fn serve(
    services: &[&'static str],
    listener: TcpListener,
    routes: Routes,
    access: ServiceAccess,
    shutdown: impl Future<Output = ()> + Send,
    drain: std::time::Duration,
    mut ready: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    // One list for the readiness task and the shutdown, which both outlive `services`' borrow.
    let names: std::sync::Arc<[&'static str]> = services.into();
    let reporter = health_reporter.clone();
    let names_on_shutdown = names.clone();
    // The first statuses before the server takes a call: a health check right after start
    // finds every service.
    let serving = *ready.borrow_and_update();
    report(&reporter, &names, serving).await;
    let readiness = tokio::spawn(async move {
        while ready.changed().await.is_ok() {
            let now = *ready.borrow_and_update();
            report(&reporter, &names, now).await;
        }
    });
    let reflection_v1 = reflection(services).build_v1().context("building gRPC reflection v1")?;
    let reflection_v1alpha = reflection(services).build_v1alpha().context("building gRPC reflection v1alpha")?;
    let routes = routes.add_service(health_service).add_service(reflection_v1).add_service(reflection_v1alpha);

    let (drained, stop_waiting) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        shutdown.await;
        readiness.abort();
        report(&health_reporter, &names_on_shutdown, false).await;
        if !drain.is_zero() {
            tracing::info!(seconds = drain.as_secs_f64(), "draining: health is NOT_SERVING, calls are still served");
            tokio::time::sleep(drain).await;
        }
        let _ = drained.send(());
    };
    // Calls in flight get STOP_GRACE to finish once the server stops taking new ones; a call
    // that waits on something that never comes must not keep the process from exiting.
    let out_of_grace = async move {
        if stop_waiting.await.is_ok() {
            tokio::time::sleep(STOP_GRACE).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let name = services.first().copied().unwrap_or("grpc");
    let address = listener.local_addr().ok();
    tracing::info!(services = ?services, ?address, "gRPC server listening");
    // The builder's `tcp_nodelay` only reaches listeners tonic binds itself: set it on ours,
    // or a reply larger than one segment waits out the peer's delayed ACK (about 40 ms).
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let server = Server::builder()
        .trace_fn(move |request| crate::telemetry::grpc_server_span(name, request))
        .layer(token::RequireToken::new(access))
        .add_routes(routes)
        .serve_with_incoming_shutdown(incoming, shutdown);
    tokio::select! {
        served = server => served.with_context(|| format!("serving gRPC for {name}")),
        () = out_of_grace => {
            tracing::warn!(seconds = STOP_GRACE.as_secs(), "calls were still in flight after the stop's grace; stopping anyway");
            Ok(())
        }
    }
}

/// How long a stopping server waits for the calls in flight (after the drain).
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Sets every service's health (and the server's, the empty name) to SERVING or NOT_SERVING.
async fn report(reporter: &tonic_health::server::HealthReporter, services: &[&'static str], serving: bool) {
    let status = if serving { ServingStatus::Serving } else { ServingStatus::NotServing };
    for service in services.iter().copied().chain([""]) {
        reporter.set_service_status(service, status).await;
    }
}

/// What a gRPC method answers.
pub type Reply<T> = Result<tonic::Response<T>, tonic::Status>;

/// A store's result as a gRPC answer: its error becomes a status that carries the public code,
/// hint and field violations (see `crate::error`).
pub fn reply<T>(result: crate::ServiceResult<T>) -> Reply<T> {
    result.map(tonic::Response::new).map_err(tonic::Status::from)
}

/// Binds a gRPC listen address such as `0.0.0.0:50051` (`:0` picks a free port).
pub async fn bind(address: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(address).await.with_context(|| format!("binding {address}"))
}
