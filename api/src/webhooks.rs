//! Webhook endpoints, their deliveries, and the team's credits alert.

use schemars::JsonSchema;
use serde::Serialize;
use switchboard_proto::v1 as proto;

use crate::id::Id;
use crate::time::Timestamp;

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WebhookStatus {
    /// Deliveries succeed, or have not been given up.
    Active,
    /// A delivery was given up after 24 hours of retries; the next 2xx makes it active again.
    Failing,
}

/// A webhook endpoint.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Webhook {
    pub id: Id,
    pub url: String,
    pub events: Vec<String>,
    pub description: Option<String>,
    pub status: WebhookStatus,
    /// False while paused: events for it are held (at most 1,000, as `held` deliveries) and
    /// sent once it is enabled again.
    pub enabled: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<&proto::Webhook> for Webhook {
    fn from(webhook: &proto::Webhook) -> Self {
        Self {
            id: Id::stored(webhook.id.clone()),
            url: webhook.url.clone(),
            events: webhook.events.clone(),
            description: webhook.description.clone(),
            status: if webhook.status == "failing" { WebhookStatus::Failing } else { WebhookStatus::Active },
            enabled: webhook.enabled,
            created_at: Timestamp::from_ms(webhook.created_at_ms),
            updated_at: Timestamp::from_ms(webhook.updated_at_ms),
        }
    }
}

/// A webhook just created, with its signing secret: the only answer that shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct NewWebhook {
    pub id: Id,
    pub url: String,
    pub events: Vec<String>,
    pub description: Option<String>,
    /// `whsec_` and the base64 key: verify each request's `webhook-signature` with it.
    pub secret: String,
    pub status: WebhookStatus,
    pub enabled: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

pub use switchboard_kit::vocabulary::DeliveryStatus;

/// One event sent to one webhook, with its latest attempt.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Delivery {
    pub id: Id,
    pub webhook_id: Id,
    /// The `webhook-id` header of every attempt: receivers deduplicate by it.
    pub event_id: String,
    /// The event type.
    pub event: String,
    pub status: DeliveryStatus,
    pub attempts: u32,
    /// The receiver's answer to the latest attempt; null when none came.
    pub status_code: Option<u32>,
    pub duration_ms: Option<i64>,
    /// Why the latest attempt failed (the start of the receiver's answer, or the network error).
    pub error: Option<String>,
    /// While pending: when it is attempted next.
    pub next_retry_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub last_attempt_at: Option<Timestamp>,
}

impl From<&proto::Delivery> for Delivery {
    fn from(delivery: &proto::Delivery) -> Self {
        Self {
            id: Id::stored(delivery.id.clone()),
            webhook_id: Id::stored(delivery.webhook_id.clone()),
            event_id: delivery.event_id.clone(),
            event: delivery.event.clone(),
            status: DeliveryStatus::parse(&delivery.status).unwrap_or(DeliveryStatus::Pending),
            attempts: delivery.attempts,
            status_code: delivery.status_code,
            duration_ms: delivery.duration_ms,
            error: delivery.error.clone(),
            next_retry_at: Timestamp::option(delivery.next_retry_at_ms),
            created_at: Timestamp::from_ms(delivery.created_at_ms),
            last_attempt_at: Timestamp::option(delivery.last_attempt_at_ms),
        }
    }
}

/// A delivery with the body it sends.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct DeliveryDetail {
    #[serde(flatten)]
    pub delivery: Delivery,
    /// The JSON body every attempt sends, parsed: `{type, timestamp, data}`. The bytes signed are
    /// those of its compact serialisation as sent, which a receiver verifies, not this.
    pub payload: serde_json::Value,
}

impl From<&proto::Delivery> for DeliveryDetail {
    fn from(delivery: &proto::Delivery) -> Self {
        let payload = delivery.payload.as_deref().and_then(|body| serde_json::from_str(body).ok());
        Self { delivery: Delivery::from(delivery), payload: payload.unwrap_or(serde_json::Value::Null) }
    }
}

/// The team's credits alert.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CreditsAlert {
    /// Null when no alert is set.
    pub threshold: Option<i64>,
    pub balance: i64,
}

impl From<proto::CreditsAlert> for CreditsAlert {
    fn from(alert: proto::CreditsAlert) -> Self {
        Self { threshold: alert.threshold, balance: alert.balance }
    }
}
