//! The gateway's instruments: `http.server.request.duration` (OpenTelemetry HTTP server
//! conventions: by method, route and status; its count is the request count) and
//! `switchboard.rate_limit.decisions` (by class and decision).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use switchboard_kit::metrics::{Histogram, KeyValue, meter};

use crate::config::RateClass;

pub struct GatewayMetrics {
    duration: Histogram<f64>,
}

/// Rate-limit decisions of this process, by class and decision (allowed, limited), counted
/// with one atomic add per request and read by the meter when it collects: an instrument's
/// `add` looks its attributes up in a map under a lock, on every request.
static DECISIONS: [[AtomicU64; 2]; RateClass::ALL.len()] =
    [const { [const { AtomicU64::new(0) }; 2] }; RateClass::ALL.len()];
static DECISIONS_OBSERVED: OnceLock<()> = OnceLock::new();

fn observe_decisions() {
    DECISIONS_OBSERVED.get_or_init(|| {
        meter()
            .u64_observable_counter("switchboard.rate_limit.decisions")
            .with_description("Rate-limit decisions, by rate class and decision (allowed or limited).")
            .with_unit("{request}")
            .with_callback(|observer| {
                for class in RateClass::ALL {
                    for (decision, count) in ["allowed", "limited"].into_iter().zip(&DECISIONS[class.index()]) {
                        let labels = [KeyValue::new("class", class.name()), KeyValue::new("decision", decision)];
                        observer.observe(count.load(Ordering::Relaxed), &labels);
                    }
                }
            })
            .build();
    });
}

impl GatewayMetrics {
    pub fn new() -> Self {
        observe_decisions();
        let meter = meter();
        Self {
            duration: meter
                .f64_histogram("http.server.request.duration")
                .with_description("Duration of HTTP requests answered by the gateway.")
                .with_unit("s")
                .with_boundaries(vec![0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0])
                .build(),
        }
    }

    /// One answered request; `route` is the route's template, `None` for paths of no route.
    /// Labels are static strings where they can be: this runs on every request.
    pub fn request(&self, method: &str, route: Option<&'static str>, status: u16, took: Duration) {
        let method = KeyValue::new("http.request.method", known_method(method));
        let status = KeyValue::new("http.response.status_code", i64::from(status));
        match route {
            Some(route) => {
                self.duration.record(took.as_secs_f64(), &[method, status, KeyValue::new("http.route", route)])
            }
            None => self.duration.record(took.as_secs_f64(), &[method, status]),
        }
    }
}

/// One rate-limit decision of this process.
pub fn rate_limit(class: RateClass, allowed: bool) {
    DECISIONS[class.index()][usize::from(!allowed)].fetch_add(1, Ordering::Relaxed);
}

/// The method as the HTTP conventions name it; any method not in RFC 9110 is `_OTHER`, which
/// also keeps the label's values few whatever clients send.
fn known_method(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        "CONNECT" => "CONNECT",
        "TRACE" => "TRACE",
        _ => "_OTHER",
    }
}

#[cfg(test)]
mod tests {
    use super::known_method;

    #[test]
    fn methods_outside_rfc_9110_share_one_label_value() {
        assert_eq!(known_method("PATCH"), "PATCH");
        assert_eq!(known_method("PROPFIND"), "_OTHER");
        assert_eq!(known_method("get"), "_OTHER");
    }
}
