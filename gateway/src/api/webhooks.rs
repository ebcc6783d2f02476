//! `/webhooks`: endpoints that receive the team's events, signed per the Standard Webhooks
//! specification (webhooks service), and the deliveries made to them.

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::webhooks::{CreditsAlert, Delivery, DeliveryDetail, DeliveryStatus, NewWebhook, Webhook};
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::vocabulary::EventType;
use switchboard_kit::{ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{
    self as proto, CreateWebhookRequest, DeliveryRef, ListDeliveriesRequest, ListWebhooksRequest, UpdateWebhookRequest,
    WebhookRef,
};

use super::groups::WEBHOOKS;
use crate::call::Call;
use crate::endpoint::{Accepted, Created, Data, Endpoint, Id, Input, Json, List, Nothing, Page, Updated};
use switchboard_api::paging::{default_limit, first_page};

const WEBHOOK_GONE: &str = "Webhook not found";
const DELIVERY_GONE: &str = "Webhook or delivery not found";
const DISABLED: &str = "The webhook is disabled: enable it first (held deliveries are sent then)";
const TOO_MANY: &str = "A team has at most 50 webhooks";
const GOVERNED: &str = "An event type whose data the team's access configuration (a client subteam's) hides, e.g. \
    agent.instructions.updated without `instructions`, contact.* without `crm`, call.ended and chat.ended without \
    `conversations`, webpage.* and document.* without `knowledgeBase`.";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/webhooks", list)
            .for_admins()
            .doc("listWebhooks", WEBHOOKS, "The team's webhooks, oldest first")
            .lists("webhookId")
            .about("Every webhook endpoint of the team; not paged. Secrets are never shown again."),
        Endpoint::post("/v1/webhooks", create)
            .shows_secret_once()
            .for_admins()
            .audited(AuditAction::WebhookCreated)
            .doc("createWebhook", WEBHOOKS, "Create a webhook")
            .creates("webhookId")
            .about(
                "Events of the types in `events` are POSTed to `url`, signed per the Standard Webhooks \
                 specification with the `secret` of this answer (`whsec_...`), which is shown this once. \
                 A private, loopback or link-local `url` is refused unless the operator allows it.",
            )
            .fails(403, GOVERNED)
            .fails(409, TOO_MANY),
        Endpoint::get("/v1/webhooks/{webhookId}", get)
            .for_admins()
            .doc("getWebhook", WEBHOOKS, "Get a webhook")
            .fails(404, WEBHOOK_GONE),
        Endpoint::put("/v1/webhooks/{webhookId}", update)
            .audited(AuditAction::WebhookUpdated)
            .for_admins()
            .doc("updateWebhook", WEBHOOKS, "Change a webhook's URL, events, description, or pause it")
            .about(
                "Members left out (or null) keep their value; `events` replaces the list. The secret stays. \
                 `enabled: false` pauses it: events for it are held (at most 1,000; see the deliveries) and \
                 `enabled: true` sends the held ones, in order, each retried for another 24 hours.",
            )
            .fails(403, GOVERNED)
            .fails(404, WEBHOOK_GONE),
        Endpoint::delete("/v1/webhooks/{webhookId}", delete)
            .for_admins()
            .audited(AuditAction::WebhookDeleted)
            .doc("deleteWebhook", WEBHOOKS, "Delete a webhook; its pending deliveries are dropped")
            .fails(404, WEBHOOK_GONE),
        Endpoint::post("/v1/webhooks/{webhookId}/test", test)
            .audited(AuditAction::WebhookTested)
            .for_admins()
            .doc("testWebhook", WEBHOOKS, "Send a webhook.test event to the webhook")
            .creates("deliveryId")
            .about("Queues the event for this endpoint alone and answers the delivery; its outcome shows in the deliveries.")
            .fails(404, WEBHOOK_GONE)
            .fails(409, DISABLED),
        Endpoint::get("/v1/webhooks/{webhookId}/deliveries", deliveries)
            .for_admins()
            .doc("listWebhookDeliveries", WEBHOOKS, "The webhook's deliveries, newest first")
            .lists("deliveryId")
            .about(
                "One delivery per event sent to the endpoint, with its latest attempt: `statusCode`, \
                 `durationMs`, `error`, and while it is pending `nextRetryAt`. Failed attempts are retried \
                 with exponential backoff for 24 hours; then the delivery is `failed` and the webhook `failing`. \
                 While the webhook is disabled its waiting deliveries are `held`; beyond 1,000 held, a new event \
                 is recorded as `failed` at once (it can be retried once the webhook is enabled).",
            )
            .fails(404, WEBHOOK_GONE),
        Endpoint::get("/v1/webhooks/{webhookId}/deliveries/{deliveryId}", delivery)
            .for_admins()
            .doc("getWebhookDelivery", WEBHOOKS, "One delivery with the payload it sends")
            .about(
                "A delivery as the list shows it, with `payload`: the event's JSON body that every attempt \
                 sends (and a retry sends again). Events are kept as long as their deliveries.",
            )
            .fails(404, DELIVERY_GONE),
        Endpoint::get("/v1/credits/alert", credits_alert)
            .doc("getCreditsAlert", WEBHOOKS, "The balance under which webhooks hear credits.low")
            .about("`threshold` is null when no alert is set; `balance` is the team's credit balance now."),
        Endpoint::put("/v1/credits/alert", set_credits_alert)
            .audited(AuditAction::CreditsAlertChanged)
            .doc("setCreditsAlert", WEBHOOKS, "Set (or clear, with null) the credits.low threshold")
            .about(
                "When a debit or transfer takes the balance from `threshold` or more to under it, the team's \
                 webhooks subscribed to `credits.low` get `{teamId, balance, threshold}`: once per crossing.",
            ),
        Endpoint::post("/v1/webhooks/{webhookId}/deliveries/{deliveryId}/retry", retry)
            .audited(AuditAction::WebhookDeliveryRetried)
            .for_admins()
            .doc("retryWebhookDelivery", WEBHOOKS, "Send a delivery again")
            .about(
                "The same event (same `webhook-id` and body) is queued to be sent now: a failed delivery, or a \
                 delivered one sent again on purpose (receivers deduplicate by `webhook-id`).",
            )
            .fails(404, DELIVERY_GONE)
            .fails(409, DISABLED),
    ]
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookPath {
    pub webhook_id: Id,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryPath {
    pub webhook_id: Id,
    pub delivery_id: Id,
}

/// An event type, as the client wrote it: the webhooks service checks it, and answers which
/// item of `events` is not one with the whole list. Its schema is [`EventType`]'s.
#[derive(Deserialize)]
#[serde(transparent)]
pub struct EventName(pub String);

impl JsonSchema for EventName {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        EventType::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        EventType::json_schema(generator)
    }
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct CreateWebhook {
    /// Where events are POSTed: an absolute http or https URL, not a private, loopback or
    /// link-local address.
    #[schemars(length(min = limits::URL.min, max = limits::URL.max), extend("format" = "uri"))]
    pub url: String,
    /// The event types sent to it (at least one; repeats count once).
    #[schemars(length(min = 1, max = 100))]
    pub events: Vec<EventName>,
    #[schemars(length(min = limits::WEBHOOK_DESCRIPTION.min, max = limits::WEBHOOK_DESCRIPTION.max))]
    pub description: Option<String>,
    /// False creates it paused (events are held until it is enabled); true when left out.
    pub enabled: Option<bool>,
}

/// A partial update: members left out (or null) keep their value. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct UpdateWebhook {
    /// As in the create.
    #[schemars(length(min = limits::URL.min, max = limits::URL.max), extend("format" = "uri"))]
    pub url: Option<String>,
    /// Replaces the list.
    #[schemars(length(min = 1, max = 100))]
    pub events: Option<Vec<EventName>>,
    #[schemars(length(min = limits::WEBHOOK_DESCRIPTION.min, max = limits::WEBHOOK_DESCRIPTION.max))]
    pub description: Option<String>,
    /// False pauses it (events are held); true sends what it held and resumes.
    pub enabled: Option<bool>,
}

/// The page of a delivery list.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryQuery {
    /// The page, from 1.
    #[serde(default = "first_page")]
    #[schemars(range(min = limits::PAGE.min, max = limits::PAGE.max))]
    pub page: u32,
    /// Deliveries per page.
    #[serde(default = "default_limit")]
    #[schemars(range(min = limits::PAGE_LIMIT.min, max = limits::PAGE_LIMIT.max))]
    pub limit: u32,
    /// Only deliveries with this status.
    pub status: Option<DeliveryStatus>,
}

fn webhook_ref(call: &Call, path: &WebhookPath) -> WebhookRef {
    WebhookRef { team_id: call.team_id().to_owned(), webhook_id: path.webhook_id.to_string() }
}

fn names(events: Vec<EventName>) -> Vec<String> {
    events.into_iter().map(|event| event.0).collect()
}

/// Refuses event types whose data the team's access configuration hides (a client subteam's):
/// they would never be delivered to it ([`switchboard_api::access`]), whoever subscribes.
fn check_governed(call: &Call, events: &[String]) -> ServiceResult<()> {
    let refused = events.iter().find_map(|kind| {
        switchboard_api::access::feature_of_event_named(kind)
            .filter(|feature| !feature.allowed_for(&call.team))
            .map(|feature| (kind, feature))
    });
    match refused {
        None => Ok(()),
        Some((kind, feature)) => Err(ServiceError::forbidden(format!(
            "This team's access configuration does not allow {}, so its webhooks cannot take {kind}",
            feature.name()
        ))
        .with_hint("The agency that manages this team can change its access configuration.")),
    }
}

async fn list(call: Call, _: Input) -> ServiceResult<List<Webhook>> {
    let request = ListWebhooksRequest { team_id: call.team_id().to_owned() };
    let webhooks = call.services.webhooks.clone().list_webhooks(request).await?.into_inner().webhooks;
    Ok(List::new(webhooks.iter().map(Webhook::from).collect()))
}

async fn create(call: Call, input: Input<Nothing, Nothing, Json<CreateWebhook>>) -> ServiceResult<Created<NewWebhook>> {
    let body = input.body.0;
    let events = names(body.events);
    check_governed(&call, &events)?;
    let request = CreateWebhookRequest {
        team_id: call.team_id().to_owned(),
        url: body.url,
        events,
        description: body.description,
        enabled: body.enabled,
    };
    let webhook = call.services.webhooks.clone().create_webhook(request).await?.into_inner();
    let view = Webhook::from(&webhook);
    let created = NewWebhook {
        id: view.id,
        url: view.url,
        events: view.events,
        description: view.description,
        secret: webhook.secret,
        status: view.status,
        enabled: view.enabled,
        created_at: view.created_at,
        updated_at: view.updated_at,
    };
    Ok(Created::new(created, "Webhook created successfully"))
}

async fn get(call: Call, input: Input<WebhookPath>) -> ServiceResult<crate::endpoint::Data<Webhook>> {
    let webhook = call.services.webhooks.clone().get_webhook(webhook_ref(&call, &input.path)).await?.into_inner();
    Ok(crate::endpoint::Data::new(Webhook::from(&webhook)))
}

async fn update(
    call: Call,
    input: Input<WebhookPath, Nothing, Json<UpdateWebhook>>,
) -> ServiceResult<Updated<Webhook>> {
    let body = input.body.0;
    let replace_events = body.events.is_some();
    let events = body.events.map(names).unwrap_or_default();
    check_governed(&call, &events)?;
    let request = UpdateWebhookRequest {
        team_id: call.team_id().to_owned(),
        webhook_id: input.path.webhook_id.into_string(),
        url: body.url,
        replace_events,
        events,
        description: body.description,
        enabled: body.enabled,
    };
    let webhook = call.services.webhooks.clone().update_webhook(request).await?.into_inner();
    Ok(Updated::new(Webhook::from(&webhook), "Webhook updated successfully"))
}

async fn delete(call: Call, input: Input<WebhookPath>) -> ServiceResult<Updated<Webhook>> {
    let webhook = call.services.webhooks.clone().delete_webhook(webhook_ref(&call, &input.path)).await?.into_inner();
    Ok(Updated::new(Webhook::from(&webhook), "Webhook deleted successfully"))
}

async fn test(call: Call, input: Input<WebhookPath>) -> ServiceResult<Accepted<Delivery>> {
    let delivery = call.services.webhooks.clone().test_webhook(webhook_ref(&call, &input.path)).await?.into_inner();
    Ok(Accepted::new(Delivery::from(&delivery), "Test event queued"))
}

async fn deliveries(call: Call, input: Input<WebhookPath, DeliveryQuery>) -> ServiceResult<Page<Delivery>> {
    let query = input.query;
    let request = ListDeliveriesRequest {
        team_id: call.team_id().to_owned(),
        webhook_id: input.path.webhook_id.into_string(),
        page: Some(proto::PageRequest { page: query.page, limit: query.limit, ..Default::default() }),
        status: query.status.map(|status| status.as_str().to_owned()),
    };
    let listed = call.services.webhooks.clone().list_deliveries(request).await?.into_inner();
    Ok(Page {
        data: listed.deliveries.iter().map(Delivery::from).collect(),
        pagination: listed.page.unwrap_or_default().into(),
    })
}

/// The credits alert to set.
#[derive(Deserialize, JsonSchema)]
pub struct SetCreditsAlert {
    /// Credits; null (or absent) clears the alert.
    #[schemars(range(min = 0, max = limits::CREDITS_ALERT_MAX))]
    pub threshold: Option<i64>,
}

async fn credits_alert(call: Call, _: Input) -> ServiceResult<crate::endpoint::Data<CreditsAlert>> {
    let request = proto::GetBalanceRequest { team_id: call.team_id().to_owned() };
    let alert = call.services.identity.clone().get_credits_alert(request).await?.into_inner();
    Ok(crate::endpoint::Data::new(alert.into()))
}

async fn set_credits_alert(
    call: Call,
    input: Input<Nothing, Nothing, Json<SetCreditsAlert>>,
) -> ServiceResult<Updated<CreditsAlert>> {
    let request =
        proto::SetCreditsAlertRequest { team_id: call.team_id().to_owned(), threshold: input.body.0.threshold };
    let alert = call.services.identity.clone().set_credits_alert(request).await?.into_inner();
    Ok(Updated::new(alert.into(), "Credits alert updated successfully"))
}

async fn delivery(call: Call, input: Input<DeliveryPath>) -> ServiceResult<Data<DeliveryDetail>> {
    let request = DeliveryRef {
        team_id: call.team_id().to_owned(),
        webhook_id: input.path.webhook_id.into_string(),
        delivery_id: input.path.delivery_id.into_string(),
    };
    let delivery = call.services.webhooks.clone().get_delivery(request).await?.into_inner();
    Ok(Data::new(DeliveryDetail::from(&delivery)))
}

async fn retry(call: Call, input: Input<DeliveryPath>) -> ServiceResult<Accepted<Delivery>> {
    let request = DeliveryRef {
        team_id: call.team_id().to_owned(),
        webhook_id: input.path.webhook_id.into_string(),
        delivery_id: input.path.delivery_id.into_string(),
    };
    let delivery = call.services.webhooks.clone().retry_delivery(request).await?.into_inner();
    Ok(Accepted::new(Delivery::from(&delivery), "Delivery queued"))
}
