//! Logs through `tracing` everywhere; traces exported over OTLP/HTTP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set; W3C trace context carried from the gateway to the
//! services in gRPC metadata so that one request is one trace.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// True once traces are exported. Without an exporter there is no trace to continue, so the
/// per-call work of carrying context (a map of every header, a propagator) is skipped.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Keeps the trace exporter alive; dropping it flushes the spans not yet sent.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(error) = provider.shutdown()
        {
            eprintln!("flushing traces failed: {error}");
        }
    }
}

/// Installs the global subscriber. `RUST_LOG` filters the logs (default `info`);
/// `SWITCHBOARD_LOG_FORMAT=json` switches to one JSON object a line. Exported spans have a
/// filter of their own, `SWITCHBOARD_TRACE_FILTER` (same syntax, default `info`), so that quiet
/// logs (`RUST_LOG=warn`) still export every request's trace. Safe to call twice (the second
/// call keeps the first subscriber), which tests rely on.
pub fn init(service_name: &str) -> Telemetry {
    let log_filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let trace_filter =
        EnvFilter::try_from_env("SWITCHBOARD_TRACE_FILTER").unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let json = std::env::var("SWITCHBOARD_LOG_FORMAT").is_ok_and(|v| v == "json");
    let logs: Box<dyn Layer<Registry> + Send + Sync> = if json {
        Box::new(tracing_subscriber::fmt::layer().json().with_writer(std::io::stderr))
    } else {
        Box::new(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
    };
    let provider = otlp_provider(service_name);
    let traces = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer().with_tracer(provider.tracer(service_name.to_owned())).with_filter(trace_filter)
    });
    let installed = tracing_subscriber::registry().with(logs.with_filter(log_filter)).with(traces).try_init().is_ok();
    if installed && provider.is_some() {
        EXPORTING.store(true, Ordering::Relaxed);
    }
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    Telemetry { provider }
}

/// What logs and traces keep unless told otherwise. qdrant-edge reads two settings that only a
/// Qdrant server initialises (feature flags, the multi-mmap check; their setters are private)
/// and warns at every shard load; the defaults it falls back to are the ones wanted.
const DEFAULT_FILTER: &str = "info,pingora_core=warn,pingora_proxy=warn,sqlx=warn,\
     qdrant_edge::common::flags=error,qdrant_edge::common::mmap::ops=error";

fn otlp_provider(service_name: &str) -> Option<SdkTracerProvider> {
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok()?;
    use opentelemetry_otlp::WithExportConfig;
    // The HTTP exporter wants the full traces URL; the variable holds the collector's base.
    let traces_url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let exporter = match opentelemetry_otlp::SpanExporter::builder().with_http().with_endpoint(traces_url).build() {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("OTLP exporter disabled: {error}");
            return None;
        }
    };
    let resource = opentelemetry_sdk::Resource::builder().with_service_name(service_name.to_owned()).build();
    Some(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}

/// The span of one incoming gRPC call, child of the caller's span when the call carries a
/// `traceparent`.
pub fn grpc_server_span(service: &'static str, request: &http::Request<()>) -> tracing::Span {
    let span = tracing::info_span!("grpc", service, path = %request.uri().path());
    if !EXPORTING.load(Ordering::Relaxed) {
        return span;
    }
    let carrier: HashMap<String, String> = request
        .headers()
        .iter()
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
        .collect();
    let parent = TraceContextPropagator::new().extract(&carrier);
    // Fails only when the span is disabled by the filter, and then there is nothing to link.
    let _ = span.set_parent(parent);
    span
}

/// The `traceparent` (and `tracestate`) of the current span, to send along with a call.
pub fn current_trace_headers() -> HashMap<String, String> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&tracing::Span::current().context(), &mut carrier);
    carrier
}

/// Copies the current trace context into the metadata of an outgoing gRPC call.
pub fn inject(metadata: &mut tonic::metadata::MetadataMap) {
    if !EXPORTING.load(Ordering::Relaxed) {
        return;
    }
    for (name, value) in current_trace_headers() {
        if let (Ok(key), Ok(value)) = (tonic::metadata::MetadataKey::from_bytes(name.as_bytes()), value.parse()) {
            metadata.insert(key, value);
        }
    }
}
