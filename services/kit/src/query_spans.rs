//! Database queries as client spans, children of the span they ran in.
//!
//! sqlx reports every statement it ran as a `tracing` event (target `sqlx::query`) when the
//! statement is over, with the text and how long it took; there is no hook around a query to
//! open a span in. This layer turns each such event that happens inside an exported span (a
//! gRPC call being served) into an OpenTelemetry span that started `elapsed` before the event
//! and ended at it, named by the statement's operation (`SELECT`, `INSERT`, ...) with the
//! `db.*` attributes of the semantic conventions. Statements outside any request (job
//! workers, the event relay's polls) have no trace to join and are left out.

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{SpanKind, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::Context as LayerContext;
use tracing_subscriber::registry::LookupSpan;

use crate::db::Engine;

/// `db.system.name`: the engine when the process has one, `other_sql` when it has both.
fn system_name() -> &'static str {
    match crate::db::only_engine_opened() {
        Some(Engine::Sqlite) => "sqlite",
        Some(Engine::Postgres) => "postgresql",
        None => "other_sql",
    }
}

/// The layer, exporting through `provider`; it sees only sqlx's statement events.
pub fn layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + Send + Sync
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let tracer = provider.tracer("switchboard-db");
    QuerySpans { tracer }.with_filter(Targets::new().with_target("sqlx::query", Level::TRACE))
}

struct QuerySpans {
    tracer: SdkTracer,
}

impl<S> Layer<S> for QuerySpans
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_event(&self, event: &Event<'_>, _: LayerContext<'_, S>) {
        // The span the statement ran in, as the OpenTelemetry layer made it current on this
        // thread when it was entered (the layer context would show only spans this layer's
        // own filter enables, none). sqlx's SQLite worker thread enters the caller's span.
        let parent = Context::current();
        if !parent.span().span_context().is_valid() {
            return;
        }
        let mut statement = Statement::default();
        event.record(&mut statement);
        let end = SystemTime::now();
        let start = end.checked_sub(Duration::from_secs_f64(statement.elapsed_secs.max(0.0))).unwrap_or(end);
        let text = if statement.text.trim().is_empty() { &statement.summary } else { &statement.text };
        let text = text.trim().trim_end_matches('…').trim();
        let operation = operation(text);
        let mut attributes = vec![
            KeyValue::new("db.system.name", system_name()),
            KeyValue::new("db.operation.name", operation.clone()),
            KeyValue::new("db.query.text", text.to_owned()),
        ];
        if let Some(rows) = statement.rows_returned {
            attributes.push(KeyValue::new("db.response.returned_rows", i64::try_from(rows).unwrap_or(i64::MAX)));
        }
        let mut query = self
            .tracer
            .span_builder(operation)
            .with_kind(SpanKind::Client)
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        opentelemetry::trace::Span::end_with_timestamp(&mut query, end);
    }
}

/// The statement's first keyword, upper-cased (`SELECT`, `WITH`, `PRAGMA`...).
fn operation(text: &str) -> Cow<'static, str> {
    let word = text.split_whitespace().next().unwrap_or_default();
    if word.is_empty() { Cow::Borrowed("query") } else { Cow::Owned(word.to_ascii_uppercase()) }
}

/// The fields of sqlx's statement event.
#[derive(Default)]
struct Statement {
    summary: String,
    text: String,
    elapsed_secs: f64,
    rows_returned: Option<u64>,
}

impl Visit for Statement {
    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "elapsed_secs" {
            self.elapsed_secs = value;
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "rows_returned" {
            self.rows_returned = Some(value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "summary" => value.clone_into(&mut self.summary),
            "db.statement" => value.clone_into(&mut self.text),
            _ => {}
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn fmt::Debug) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_first_keywords() {
        assert_eq!(operation("select id from teams"), "SELECT");
        assert_eq!(operation("\n\nINSERT INTO x"), "INSERT");
        assert_eq!(operation(""), "query");
    }
}
