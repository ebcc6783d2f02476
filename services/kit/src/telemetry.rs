//! Logs through `tracing` everywhere; traces exported over OTLP/HTTP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set; W3C trace context carried from the gateway to the
//! services in gRPC metadata so that one request is one trace.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
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

/// Keeps the trace and metric exporters alive; dropping it flushes what is not yet sent.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    meters: Option<opentelemetry_sdk::metrics::SdkMeterProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(error) = provider.shutdown()
        {
            eprintln!("flushing traces failed: {error}");
        }
        if let Some(meters) = self.meters.take()
            && let Err(error) = meters.shutdown()
        {
            eprintln!("flushing metrics failed: {error}");
        }
    }
}

/// Installs the global subscriber. `RUST_LOG` filters the logs (default `info`);
/// `SWITCHBOARD_LOG_FORMAT=json` switches to one JSON object a line. Exported spans have a
/// filter of their own, `SWITCHBOARD_TRACE_FILTER` (same syntax, default `info`), so that quiet
/// logs (`RUST_LOG=warn`) still export every request's trace. Safe to call twice (the second
/// call keeps the first subscriber), which tests rely on.
pub fn init(service_name: &str) -> Telemetry {
    let log_filter = log_filter(std::env::var("RUST_LOG").ok().as_deref());
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
    let queries = provider.as_ref().map(crate::query_spans::layer);
    let installed =
        tracing_subscriber::registry().with(logs.with_filter(log_filter)).with(traces).with(queries).try_init().is_ok();
    if installed && provider.is_some() {
        EXPORTING.store(true, Ordering::Relaxed);
    }
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let meters = crate::metrics::install(resource(service_name));
    Telemetry { provider, meters }
}

/// Target of the spans made for traces: a request, an incoming or outgoing gRPC call, a Redis
/// call, a webhook delivery. Logs leave them out unless `RUST_LOG` names this target (e.g.
/// `info,switchboard::trace=info`): the log layer formats every field of every span it keeps, on
/// every request, and that cost the gateway about 10 % of its throughput at `info`
/// (bench/gateway-me.sh) for a prefix on the rare log line written inside a request.
pub const TRACE_TARGET: &str = "switchboard::trace";

/// The log filter of `RUST_LOG` (`DEFAULT_FILTER` when unset or invalid), with the targets of
/// [`QUIET`] held to their level unless it names them.
fn log_filter(rust_log: Option<&str>) -> EnvFilter {
    let mut filter =
        rust_log.and_then(|spec| EnvFilter::try_new(spec).ok()).unwrap_or_else(|| EnvFilter::new(DEFAULT_FILTER));
    for (target, level) in QUIET {
        if rust_log.is_some_and(|spec| spec.contains(target)) {
            continue;
        }
        if let Ok(directive) = format!("{target}={level}").parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

/// Targets kept at a level of their own whatever `RUST_LOG` says, unless it names them: the
/// trace spans ([`TRACE_TARGET`]), and two settings of qdrant-edge that only a Qdrant server
/// initialises (feature flags, the multi-mmap check; their setters are private), which warn at
/// every shard load although the defaults they fall back to are the ones wanted.
const QUIET: [(&str, &str); 3] =
    [(TRACE_TARGET, "warn"), ("qdrant_edge::common::flags", "error"), ("qdrant_edge::common::mmap::ops", "error")];

/// What logs and traces keep unless told otherwise.
const DEFAULT_FILTER: &str = "info,pingora_core=warn,pingora_proxy=warn,sqlx=warn";

fn resource(service_name: &str) -> opentelemetry_sdk::Resource {
    opentelemetry_sdk::Resource::builder().with_service_name(service_name.to_owned()).build()
}

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
    Some(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource(service_name)).build())
}

/// `rpc.service` and `rpc.method` of a gRPC path (`/switchboard.v1.Agents/GetAgent`).
fn rpc_parts(path: &str) -> (&str, &str) {
    path.trim_start_matches('/').split_once('/').unwrap_or((path, ""))
}

/// The span of one incoming gRPC call, named and described by the OpenTelemetry RPC
/// conventions (`switchboard.v1.Agents/GetAgent`, `rpc.system`, `rpc.service`, `rpc.method`),
/// child of the caller's span when the call carries a `traceparent`.
pub fn grpc_server_span(component: &'static str, request: &http::Request<()>) -> tracing::Span {
    let path = request.uri().path();
    let (service, method) = rpc_parts(path);
    let span = tracing::info_span!(
        target: TRACE_TARGET,
        "grpc",
        component,
        otel.kind = "server",
        otel.name = %path.trim_start_matches('/'),
        rpc.system = "grpc",
        rpc.service = service,
        rpc.method = method,
    );
    if !EXPORTING.load(Ordering::Relaxed) {
        return span;
    }
    let parent = TraceContextPropagator::new().extract(&HeaderCarrier(request.headers()));
    // Fails only when the span is disabled by the filter, and then there is nothing to link.
    let _ = span.set_parent(parent);
    span
}

/// The span of one outgoing gRPC call, by the same conventions.
pub fn grpc_client_span(path: &str) -> tracing::Span {
    let (service, method) = rpc_parts(path);
    tracing::info_span!(
        target: TRACE_TARGET,
        "grpc client",
        otel.kind = "client",
        otel.name = %path.trim_start_matches('/'),
        rpc.system = "grpc",
        rpc.service = service,
        rpc.method = method,
    )
}

/// The span of one Redis call (`operation` as Redis names it, e.g. `EVALSHA`).
pub fn redis_span(operation: &'static str) -> tracing::Span {
    tracing::info_span!(
        target: TRACE_TARGET,
        "redis",
        otel.kind = "client",
        otel.name = operation,
        db.system.name = "redis",
        db.operation.name = operation,
    )
}

/// Puts the trace context of `span` into the headers of an outgoing call, so that the callee's
/// spans are its children.
pub fn inject_into(span: &tracing::Span, headers: &mut http::HeaderMap) {
    if !EXPORTING.load(Ordering::Relaxed) {
        return;
    }
    TraceContextPropagator::new().inject_context(&span.context(), &mut HeaderCarrier(headers));
}

/// HTTP headers as the propagator reads and writes them.
struct HeaderCarrier<H>(H);

impl Extractor for HeaderCarrier<&http::HeaderMap> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

impl Injector for HeaderCarrier<&mut http::HeaderMap> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (http::HeaderName::from_bytes(key.as_bytes()), value.parse()) {
            self.0.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the log layer writes, under `RUST_LOG=rust_log`, for an event inside a trace span.
    fn logged_in_a_trace_span(rust_log: &str) -> String {
        #[derive(Clone, Default)]
        struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let logs = tracing_subscriber::fmt::layer().with_ansi(false).with_writer(move || writer.clone());
        let subscriber = tracing_subscriber::registry().with(logs.with_filter(log_filter(Some(rust_log))));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: TRACE_TARGET, "request", id = "r-1");
            span.in_scope(|| tracing::warn!("inside"));
        });
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn qdrant_edge_settings_warnings_stay_quiet_under_any_rust_log() {
        for rust_log in ["warn", "info", "debug", "qdrant_edge=warn"] {
            let filter = log_filter(Some(rust_log)).to_string();
            assert!(filter.contains("qdrant_edge::common::flags=error"), "{rust_log}: {filter}");
        }
        let named = log_filter(Some("warn,qdrant_edge::common::flags=warn")).to_string();
        assert!(!named.contains("qdrant_edge::common::flags=error"), "{named}");
    }

    #[test]
    fn logs_leave_trace_spans_out_unless_rust_log_names_them() {
        let quiet = logged_in_a_trace_span("info");
        assert!(quiet.contains("inside") && !quiet.contains("request{"), "{quiet}");
        let debug = logged_in_a_trace_span("debug");
        assert!(debug.contains("inside") && !debug.contains("request{"), "{debug}");
        let named = logged_in_a_trace_span("info,switchboard::trace=info");
        assert!(named.contains("request{id=\"r-1\"}") && named.contains("inside"), "{named}");
    }

    #[test]
    fn rpc_parts_are_service_and_method() {
        assert_eq!(rpc_parts("/switchboard.v1.Agents/GetAgent"), ("switchboard.v1.Agents", "GetAgent"));
        assert_eq!(rpc_parts("/odd"), ("/odd", ""));
    }
}
