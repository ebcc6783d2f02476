//! Sends deliveries: signed POSTs of the event's body, at most `concurrency` at a time, each
//! to a receiver that must answer within the timeout (redirects are not followed, and a
//! private address is refused after DNS unless allowed). A slow receiver holds one slot, never
//! the API: the API only writes rows that this loop reads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_kit::egress::{self, GuardedResolver};
use switchboard_kit::metrics::{Counter, Histogram, KeyValue, meter};
use switchboard_kit::time::now_ms;
use tokio::sync::{Notify, Semaphore, watch};
use tracing::Instrument;

use crate::settings::Settings;
use crate::sign;
use crate::store::{Attempt, Claimed, WebhookStore};

pub const USER_AGENT: &str = concat!("Switchboard-Webhooks/", env!("CARGO_PKG_VERSION"));
/// How often the table is looked at when nobody rings.
const POLL: Duration = Duration::from_millis(100);
/// How much of an error body is kept in a delivery's `error`.
const ERROR_BODY: usize = 200;

struct Instruments {
    attempts: Counter<u64>,
    duration: Histogram<f64>,
}

pub struct Deliverer {
    store: WebhookStore,
    settings: Settings,
    client: reqwest::Client,
    wake: Arc<Notify>,
    instruments: Arc<Instruments>,
}

impl Deliverer {
    pub fn new(store: WebhookStore, settings: Settings, wake: Arc<Notify>) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(GuardedResolver::new(settings.allow_private)))
            .build()?;
        let meter = meter();
        let instruments = Instruments {
            attempts: meter
                .u64_counter("switchboard.webhook.attempts")
                .with_description("Webhook delivery attempts, by event type and outcome (delivered, retry, failed).")
                .with_unit("{attempt}")
                .build(),
            duration: meter
                .f64_histogram("switchboard.webhook.attempt.duration")
                .with_description("How long receivers took to answer a delivery attempt.")
                .with_unit("s")
                .build(),
        };
        Ok(Self { store, settings, client, wake, instruments: Arc::new(instruments) })
    }

    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let this = Arc::new(self);
        let slots = Arc::new(Semaphore::new(this.settings.concurrency));
        // A claim outlives the attempt (timeout) by a margin: then another replica takes it.
        let lease = this.settings.timeout + Duration::from_secs(30);
        let pruner = tokio::spawn(prune(this.store.clone()));
        while !*stop.borrow() {
            let free = slots.available_permits();
            if free == 0 {
                tokio::select! {
                    _ = slots.acquire() => {}
                    _ = stop.changed() => {}
                }
                continue;
            }
            match this.store.claim(free, lease).await {
                Ok(claimed) if !claimed.is_empty() => {
                    for claim in claimed {
                        let Ok(slot) = slots.clone().acquire_owned().await else { break };
                        let this = this.clone();
                        tokio::spawn(async move {
                            this.attempt(claim).await;
                            drop(slot);
                        });
                    }
                }
                Ok(_) => {
                    tokio::select! {
                        () = this.wake.notified() => {}
                        () = tokio::time::sleep(POLL) => {}
                        _ = stop.changed() => {}
                    }
                }
                Err(error) => {
                    tracing::warn!(error = %error, "claiming webhook deliveries failed");
                    tokio::time::sleep(POLL * 10).await;
                }
            }
        }
        pruner.abort();
        // Attempts in flight finish (each within the timeout) before the database closes.
        let _ = slots.acquire_many(u32::try_from(this.settings.concurrency).unwrap_or(u32::MAX)).await;
    }

    async fn attempt(&self, claim: Claimed) {
        let span = tracing::info_span!(
            target: switchboard_kit::telemetry::TRACE_TARGET,
            "webhook.deliver",
            otel.kind = "client",
            webhook.id = %claim.webhook_id,
            webhook.event = %claim.event_type,
            webhook.delivery = %claim.id,
            webhook.attempt = claim.attempts + 1,
            http.response.status_code = tracing::field::Empty,
        );
        let attempt = self.send(&claim).instrument(span.clone()).await;
        if let Some(code) = attempt.status_code {
            span.record("http.response.status_code", code);
        }
        let delivered = attempt.status_code.is_some_and(|code| (200..300).contains(&code));
        let attempts = u32::try_from(claim.attempts + 1).unwrap_or(u32::MAX);
        let wait = self.settings.backoff_after(attempts);
        let retry_in =
            (now_ms() + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 4) <= claim.give_up_at_ms).then_some(wait);
        let outcome = match (delivered, retry_in) {
            (true, _) => "delivered",
            (false, Some(_)) => "retry",
            (false, None) => "failed",
        };
        let labels = [KeyValue::new("webhook.event", claim.event_type.clone()), KeyValue::new("outcome", outcome)];
        self.instruments.attempts.add(1, &labels);
        self.instruments.duration.record(attempt.duration_ms as f64 / 1000.0, &labels[..1]);
        if let Err(error) = self.store.record(&claim, &attempt, retry_in).await {
            // The lease runs out and the delivery is attempted again: at least once.
            tracing::error!(parent: &span, error = %error, "recording a webhook attempt failed");
        }
    }

    async fn send(&self, claim: &Claimed) -> Attempt {
        let started = Instant::now();
        let failed = |error: String| Attempt {
            status_code: None,
            duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
            error: Some(error),
        };
        match url::Url::parse(&claim.url) {
            Ok(url) if !self.settings.allow_private => {
                if let Err(host) = egress::check_host(url.host_str().unwrap_or_default()) {
                    return failed(format!("the address of {host} is private, loopback or link-local"));
                }
            }
            Ok(_) => {}
            Err(error) => return failed(format!("the URL is not valid: {error}")),
        }
        let timestamp = now_ms() / 1000;
        let signature = match sign::signature(&claim.secret, &claim.event_id, timestamp, &claim.body) {
            Ok(signature) => signature,
            Err(error) => return failed(format!("signing failed: {error}")),
        };
        let sent = self
            .client
            .post(&claim.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &claim.event_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(claim.body.clone())
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) if error.is_timeout() => {
                return failed(format!("no answer within {} ms", self.settings.timeout.as_millis()));
            }
            Err(error) if egress::refused_private(&error) => {
                return failed("the receiver's address is private, loopback or link-local".to_owned());
            }
            Err(error) => return failed(format!("the request failed: {}", error.without_url())),
        };
        let status = response.status();
        let error = if status.is_success() {
            None
        } else {
            let body = response.text().await.unwrap_or_default();
            let excerpt: String = body.chars().take(ERROR_BODY).collect();
            Some(if excerpt.is_empty() { format!("HTTP {}", status.as_u16()) } else { excerpt })
        };
        Attempt {
            status_code: Some(status.as_u16()),
            duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
            error,
        }
    }
}

/// Events and finished deliveries are kept 7 days, then forgotten.
async fn prune(store: WebhookStore) {
    const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
    loop {
        if let Err(error) = store.prune(KEEP).await {
            tracing::warn!(error = %error, "pruning old webhook events failed");
        }
        tokio::time::sleep(Duration::from_secs(600)).await;
    }
}
