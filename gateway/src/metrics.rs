//! The gateway's instruments: `http.server.request.duration` (OpenTelemetry HTTP server
//! conventions: by method, route and status; its count is the request count) and
//! `switchboard.rate_limit.decisions` (by class and decision).

use std::time::Duration;

use switchboard_kit::metrics::{Counter, Histogram, KeyValue, meter};

pub struct GatewayMetrics {
    duration: Histogram<f64>,
    rate_limit: Counter<u64>,
}

impl GatewayMetrics {
    pub fn new() -> Self {
        let meter = meter();
        Self {
            duration: meter
                .f64_histogram("http.server.request.duration")
                .with_description("Duration of HTTP requests answered by the gateway.")
                .with_unit("s")
                .with_boundaries(vec![0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0])
                .build(),
            rate_limit: meter
                .u64_counter("switchboard.rate_limit.decisions")
                .with_description("Rate-limit decisions, by rate class and decision (allowed or limited).")
                .with_unit("{request}")
                .build(),
        }
    }

    /// One answered request; `route` is the route's template, `None` for paths of no route.
    pub fn request(&self, method: &str, route: Option<&'static str>, status: u16, took: Duration) {
        let mut labels = vec![
            KeyValue::new("http.request.method", method.to_owned()),
            KeyValue::new("http.response.status_code", i64::from(status)),
        ];
        if let Some(route) = route {
            labels.push(KeyValue::new("http.route", route));
        }
        self.duration.record(took.as_secs_f64(), &labels);
    }

    pub fn rate_limit(&self, class: &'static str, allowed: bool) {
        let decision = if allowed { "allowed" } else { "limited" };
        self.rate_limit.add(1, &[KeyValue::new("class", class), KeyValue::new("decision", decision)]);
    }
}
