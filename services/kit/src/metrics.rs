//! Metrics through the OpenTelemetry API: each component records into the global meter; the
//! SDK keeps the values, exports them over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set,
//! and renders them in the Prometheus text format for `GET /metrics` on the admin port
//! (`SWITCHBOARD_ADMIN_LISTEN`), never the public one.
//!
//! Prometheus names follow the OpenTelemetry compatibility rules: dots become underscores, a
//! unit of seconds adds `_seconds`, a monotonic sum adds `_total`; attributes become labels.

use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opentelemetry::metrics::Meter;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality};

/// The instrument types, so that components record without a dependency of their own.
pub use opentelemetry::KeyValue;
pub use opentelemetry::metrics::{Counter, Histogram};

/// The reader `GET /metrics` collects through.
static SCRAPED: OnceLock<SharedReader> = OnceLock::new();

/// A reader the meter provider owns and `/metrics` can still reach.
#[derive(Debug, Clone)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: std::sync::Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }

    fn collect(&self, metrics: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(metrics)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

/// Installs the global meter provider: the scrape reader, and the OTLP exporter when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set (every `OTEL_METRIC_EXPORT_INTERVAL` ms, default 60 s).
/// The first call wins; later ones return `None`.
pub(crate) fn install(resource: opentelemetry_sdk::Resource) -> Option<SdkMeterProvider> {
    let reader = SharedReader(Arc::new(ManualReader::builder().build()));
    SCRAPED.set(reader.clone()).ok()?;
    let mut builder = SdkMeterProvider::builder().with_resource(resource).with_reader(reader);
    if let Ok(endpoint) = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        use opentelemetry_otlp::WithExportConfig;
        let url = format!("{}/v1/metrics", endpoint.trim_end_matches('/'));
        match opentelemetry_otlp::MetricExporter::builder().with_http().with_endpoint(url).build() {
            Ok(exporter) => {
                builder = builder.with_reader(opentelemetry_sdk::metrics::PeriodicReader::builder(exporter).build());
            }
            Err(error) => eprintln!("OTLP metrics exporter disabled: {error}"),
        }
    }
    let provider = builder.build();
    opentelemetry::global::set_meter_provider(provider.clone());
    Some(provider)
}

/// The meter every component records with.
pub fn meter() -> Meter {
    opentelemetry::global::meter("switchboard")
}

/// The database pools and job queues of the running components, read when metrics are
/// collected.
#[derive(Default)]
struct Observed {
    /// (component, pool)
    pools: Vec<(&'static str, sqlx::AnyPool)>,
    /// (component, kind) -> (jobs queued or running, age of the oldest in seconds)
    queues: std::collections::BTreeMap<(&'static str, String), (u64, f64)>,
}

static OBSERVED: std::sync::Mutex<Option<Observed>> = std::sync::Mutex::new(None);
static GAUGES: OnceLock<()> = OnceLock::new();

fn with_observed<T>(f: impl FnOnce(&mut Observed) -> T) -> T {
    let mut guard = OBSERVED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    f(guard.get_or_insert_with(Observed::default))
}

/// Registers, once, the gauges read from [`OBSERVED`]: `db.client.connection.count` (by
/// pool and state) and `switchboard.jobs.queued` / `switchboard.jobs.oldest_age` (by kind).
fn register_gauges() {
    GAUGES.get_or_init(|| {
        use opentelemetry::KeyValue;
        let meter = meter();
        meter
            .u64_observable_gauge("db.client.connection.count")
            .with_description("Connections of a component's database pool, by state (idle or used).")
            .with_unit("{connection}")
            .with_callback(|observer| {
                with_observed(|observed| {
                    observed.pools.retain(|(_, pool)| !pool.is_closed());
                    for (component, pool) in &observed.pools {
                        let (size, idle) = (u64::from(pool.size()), pool.num_idle() as u64);
                        let name = KeyValue::new("db.client.connection.pool.name", *component);
                        let state =
                            |state: &'static str| [name.clone(), KeyValue::new("db.client.connection.state", state)];
                        observer.observe(idle, &state("idle"));
                        observer.observe(size.saturating_sub(idle), &state("used"));
                    }
                });
            })
            .build();
        meter
            .u64_observable_gauge("switchboard.jobs.queued")
            .with_description("Background jobs waiting or running, by component and kind (sampled every 15 s).")
            .with_unit("{job}")
            .with_callback(|observer| each_queue(|labels, count, _| observer.observe(count, labels)))
            .build();
        meter
            .f64_observable_gauge("switchboard.jobs.oldest_age")
            .with_description("Age of the oldest waiting or running job, by component and kind (sampled every 15 s).")
            .with_unit("s")
            .with_callback(|observer| each_queue(|labels, _, age| observer.observe(age, labels)))
            .build();
    });
}

/// Calls `f` with the labels (component, kind), job count and oldest age of every sampled queue.
fn each_queue(mut f: impl FnMut(&[KeyValue], u64, f64)) {
    with_observed(|observed| {
        for ((component, kind), (count, age)) in &observed.queues {
            f(&[KeyValue::new("component", *component), KeyValue::new("kind", kind.clone())], *count, *age);
        }
    });
}

/// Reports the pool of `component`'s database as `db.client.connection.count` from now on
/// (until it is closed).
pub fn observe_pool(component: &'static str, pool: &sqlx::AnyPool) {
    register_gauges();
    with_observed(|observed| observed.pools.push((component, pool.clone())));
}

/// Replaces the job queue figures of `component` (kind, jobs waiting or running, age of the
/// oldest in seconds).
pub fn record_queues(component: &'static str, queues: Vec<(String, u64, f64)>) {
    register_gauges();
    with_observed(|observed| {
        observed.queues.retain(|(owner, _), _| *owner != component);
        for (kind, count, age) in queues {
            observed.queues.insert((component, kind), (count, age));
        }
    });
}

/// Every metric now, in the Prometheus text exposition format (0.0.4).
pub fn prometheus() -> String {
    let mut metrics = ResourceMetrics::default();
    if let Some(reader) = SCRAPED.get()
        && let Err(error) = reader.collect(&mut metrics)
    {
        tracing::warn!(%error, "collecting metrics failed");
    }
    let mut out = String::new();
    for scope in metrics.scope_metrics() {
        for metric in scope.metrics() {
            let base = prometheus_name(metric.name(), metric.unit());
            let help = metric.description().replace('\\', "\\\\").replace('\n', "\\n");
            match metric.data() {
                AggregatedMetrics::F64(data) => render(&mut out, &base, &help, data, |v| v),
                AggregatedMetrics::U64(data) => render(&mut out, &base, &help, data, |v| v as f64),
                AggregatedMetrics::I64(data) => render(&mut out, &base, &help, data, |v| v as f64),
            }
        }
    }
    out
}

fn render<T: Copy>(out: &mut String, base: &str, help: &str, data: &MetricData<T>, value: impl Fn(T) -> f64) {
    match data {
        MetricData::Gauge(gauge) => {
            header(out, base, help, "gauge");
            for point in gauge.data_points() {
                sample(out, base, &labels(point.attributes(), None), value(point.value()));
            }
        }
        MetricData::Sum(sum) => {
            let (name, kind) =
                if sum.is_monotonic() { (format!("{base}_total"), "counter") } else { (base.to_owned(), "gauge") };
            header(out, &name, help, kind);
            for point in sum.data_points() {
                sample(out, &name, &labels(point.attributes(), None), value(point.value()));
            }
        }
        MetricData::Histogram(histogram) => {
            header(out, base, help, "histogram");
            for point in histogram.data_points() {
                let mut cumulative = 0;
                let counts: Vec<u64> = point.bucket_counts().collect();
                for (bound, count) in point.bounds().zip(&counts) {
                    cumulative += count;
                    let le = labels(point.attributes(), Some(&bound.to_string()));
                    sample(out, &format!("{base}_bucket"), &le, cumulative as f64);
                }
                let all = labels(point.attributes(), Some("+Inf"));
                sample(out, &format!("{base}_bucket"), &all, point.count() as f64);
                let plain = labels(point.attributes(), None);
                sample(out, &format!("{base}_sum"), &plain, value(point.sum()));
                sample(out, &format!("{base}_count"), &plain, point.count() as f64);
            }
        }
        // Not used by Switchboard's instruments.
        MetricData::ExponentialHistogram(_) => {}
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &str, value: f64) {
    let _ = writeln!(out, "{name}{labels} {value}");
}

/// `{key="value",...}` (empty without labels); `le` last, for a histogram bucket.
fn labels<'a>(attributes: impl Iterator<Item = &'a opentelemetry::KeyValue>, le: Option<&str>) -> String {
    let mut pairs: Vec<String> =
        attributes.map(|kv| format!("{}=\"{}\"", sanitize(kv.key.as_str()), escape(&kv.value.as_str()))).collect();
    if let Some(le) = le {
        pairs.push(format!("le=\"{le}\""));
    }
    if pairs.is_empty() { String::new() } else { format!("{{{}}}", pairs.join(",")) }
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' }).collect()
}

fn prometheus_name(name: &str, unit: &str) -> String {
    let name = sanitize(name);
    match unit {
        "s" => format!("{name}_seconds"),
        "By" => format!("{name}_bytes"),
        _ => name,
    }
}

/// Binds the admin port (`SWITCHBOARD_ADMIN_LISTEN`, else `default`; no port when neither is
/// set) and serves it in the background until `stop` turns true. Answers the bound address.
pub async fn start_admin(
    default: Option<&str>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Option<std::net::SocketAddr>> {
    use anyhow::Context as _;
    let Some(listen) = std::env::var("SWITCHBOARD_ADMIN_LISTEN").ok().or_else(|| default.map(str::to_owned)) else {
        return Ok(None);
    };
    let listener =
        tokio::net::TcpListener::bind(&listen).await.with_context(|| format!("binding the admin port {listen}"))?;
    let address = listener.local_addr().context("reading the admin address")?;
    tokio::spawn(serve_admin(listener, stop));
    Ok(Some(address))
}

/// Serves `GET /metrics` (and `GET /healthz`) on `listener` until `stop` turns true.
pub async fn serve_admin(listener: tokio::net::TcpListener, mut stop: tokio::sync::watch::Receiver<bool>) {
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(|| async {
                ([(http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], prometheus())
            }),
        )
        .route("/healthz", get(|| async { "ok" }));
    let stopped = async move {
        let _ = stop.wait_for(|stop| *stop).await;
    };
    if let Err(error) = axum::serve(listener, app).with_graceful_shutdown(stopped).await {
        tracing::warn!(%error, "the admin server stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_prometheus_compatibility_rules() {
        assert_eq!(prometheus_name("http.server.request.duration", "s"), "http_server_request_duration_seconds");
        assert_eq!(prometheus_name("switchboard.credits.debited", "{credit}"), "switchboard_credits_debited");
    }

    #[test]
    fn labels_are_escaped_and_le_comes_last() {
        let attributes = [opentelemetry::KeyValue::new("http.route", "/v1/a\"b")];
        assert_eq!(labels(attributes.iter(), Some("0.5")), "{http_route=\"/v1/a\\\"b\",le=\"0.5\"}");
        assert_eq!(labels([].iter(), None), "");
    }
}
