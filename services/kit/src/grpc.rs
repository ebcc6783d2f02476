//! How every service serves gRPC: its own routes plus the standard health service and
//! server reflection (both `v1` and `v1alpha`, because common tools such as grpcurl still
//! speak only the older one), a tracing span per call that continues the caller's trace,
//! and a graceful stop.

use std::future::Future;

use anyhow::Context;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

/// Serves `routes` on an already bound listener until `shutdown` completes; calls in flight
/// are allowed to finish.
pub async fn serve(
    service_name: &'static str,
    listener: TcpListener,
    routes: Routes,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter.set_service_status(service_name, ServingStatus::Serving).await;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(switchboard_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .context("building gRPC reflection v1")?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(switchboard_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .context("building gRPC reflection v1alpha")?;

    let routes = routes.add_service(health_service).add_service(reflection_v1).add_service(reflection_v1alpha);

    let address = listener.local_addr().ok();
    tracing::info!(service = service_name, ?address, "gRPC server listening");
    // The builder's `tcp_nodelay` only reaches listeners tonic binds itself: set it on ours,
    // or a reply larger than one segment waits out the peer's delayed ACK (about 40 ms).
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    Server::builder()
        .trace_fn(move |request| crate::telemetry::grpc_server_span(service_name, request))
        .add_routes(routes)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .with_context(|| format!("serving gRPC for {service_name}"))
}

/// Binds a gRPC listen address such as `0.0.0.0:50051` (`:0` picks a free port).
pub async fn bind(address: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(address).await.with_context(|| format!("binding {address}"))
}
