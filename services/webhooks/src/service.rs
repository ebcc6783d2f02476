//! The gRPC face of the webhooks service: endpoints are checked here (URL, events,
//! description); the store writes them. Published events are rendered once, as the API shows
//! their resource, into the body every delivery sends.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use switchboard_kit::egress;
use switchboard_kit::grpc::{Channel, Reply, reply};
use switchboard_kit::outbox::TEST_EVENT;
use switchboard_kit::time::{iso_ms, now_ms};
use switchboard_kit::vocabulary::{DeliveryStatus, EventType};
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, limits};
use switchboard_proto::v1::agents_service_client::AgentsServiceClient;
use switchboard_proto::v1::identity_service_client::IdentityServiceClient;
use switchboard_proto::v1::webhooks_service_server::{WebhooksService, WebhooksServiceServer};
use switchboard_proto::v1::*;
use tokio::sync::Notify;
use tonic::Request;
use tonic::service::Routes;

use crate::settings::Settings;
use crate::sign;
use crate::store::{NewWebhook, StoredEvent, WebhookChange, WebhookStore};

/// How long the check of a new URL's name may wait for DNS.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct WebhooksApi {
    store: WebhookStore,
    settings: Settings,
    /// Rung when deliveries are queued, so that they start now rather than at the next poll.
    wake: Arc<Notify>,
    /// Names the agents of calls and chats in their events.
    agents: AgentsServiceClient<Channel>,
    /// Tells whether a client subteam's access configuration lets its webhooks receive an event.
    identity: IdentityServiceClient<Channel>,
}

/// The other services the webhooks service reads from.
pub struct Peers {
    pub agents: AgentsServiceClient<Channel>,
    pub identity: IdentityServiceClient<Channel>,
}

pub fn routes(store: WebhookStore, settings: Settings, wake: Arc<Notify>, peers: Peers) -> Routes {
    let Peers { agents, identity } = peers;
    Routes::new(WebhooksServiceServer::new(WebhooksApi { store, settings, wake, agents, identity }))
}

/// One VALIDATION_ERROR with the violations of every check that failed, so that a client
/// sees them all at once.
fn all_at_once<'a>(failed: impl IntoIterator<Item = Option<&'a ServiceError>>) -> ServiceResult<()> {
    let violations: Vec<FieldViolation> =
        failed.into_iter().flatten().flat_map(|error| error.details.iter().cloned()).collect();
    if violations.is_empty() { Ok(()) } else { Err(ServiceError::validation(violations)) }
}

fn id_or_not_found(id: &str, not_found: fn() -> ServiceError) -> ServiceResult<()> {
    uuid::Uuid::parse_str(id).map(|_| ()).map_err(|_| not_found())
}

impl WebhooksApi {
    /// A receiver URL: http(s), at most 2048 characters, and (unless private receivers are
    /// allowed) not a private, loopback or link-local address, literally or once resolved.
    /// A name that does not resolve now is accepted: delivery resolves it again, each time.
    async fn check_url(&self, url: &str) -> ServiceResult<String> {
        let url = url.trim();
        if let Some(violation) = limits::URL.check("url", url) {
            return Err(ServiceError::validation(vec![violation]));
        }
        let invalid = |message: &str| ServiceError::invalid_field("url", message);
        let parsed = url::Url::parse(url).map_err(|error| invalid(&format!("is not a valid URL: {error}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(invalid("must be an http or https URL"));
        }
        let host = parsed.host_str().ok_or_else(|| invalid("must have a host"))?.to_owned();
        if !self.settings.allow_private {
            let private = || invalid("must not be a private, loopback or link-local address");
            egress::check_host(&host).map_err(|_| private())?;
            let port = parsed.port_or_known_default().unwrap_or(443);
            let lookup = tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host.as_str(), port))).await;
            if let Ok(Ok(found)) = lookup {
                let found: Vec<SocketAddr> = found.collect();
                if !found.is_empty() && found.iter().all(|address| !egress::is_public(address.ip())) {
                    return Err(private());
                }
            }
        }
        Ok(parsed.to_string())
    }

    /// The subscribed types, each once, in the order given.
    fn check_events(events: &[String]) -> ServiceResult<Vec<String>> {
        if events.is_empty() {
            return Err(ServiceError::invalid_field("events", "must name at least one event"));
        }
        let mut violations = Vec::new();
        let mut chosen: Vec<String> = Vec::new();
        for (index, event) in events.iter().enumerate() {
            if EventType::parse(event).is_none() {
                violations.push(FieldViolation::new(
                    format!("events[{index}]"),
                    format!("must be one of {}", EventType::names()),
                ));
            } else if !chosen.contains(event) {
                chosen.push(event.clone());
            }
        }
        if violations.is_empty() { Ok(chosen) } else { Err(ServiceError::validation(violations)) }
    }

    fn check_description(description: Option<&str>) -> ServiceResult<()> {
        let violation = description.and_then(|text| limits::WEBHOOK_DESCRIPTION.check("description", text));
        switchboard_kit::validate([violation])
    }

    /// The name of the agent of a call or chat (`None` once it is deleted). Names read for
    /// one batch are kept in `names`.
    async fn agent_name(
        &self,
        event: &Event,
        names: &mut HashMap<(String, String), Option<String>>,
    ) -> ServiceResult<Option<String>> {
        let Some(agent_id) = event.resource.as_ref().and_then(switchboard_api::events::agent_of) else {
            return Ok(None);
        };
        let key = (event.team_id.clone(), agent_id.to_owned());
        if let Some(name) = names.get(&key) {
            return Ok(name.clone());
        }
        let request = GetAgentRequest { team_id: key.0.clone(), agent_id: key.1.clone() };
        let name = match self.agents.clone().get_agent(request).await {
            Ok(agent) => Some(agent.into_inner().name),
            Err(status) if status.code() == tonic::Code::NotFound => None,
            Err(status) => return Err(ServiceError::from_status(&status)),
        };
        names.insert(key, name.clone());
        Ok(name)
    }

    /// Whether the event's team may receive it: a client subteam's webhooks get no event whose
    /// data its access configuration hides (`switchboard_api::access`), whoever made the
    /// webhook, since the subteam's own keys can point any of its webhooks elsewhere. Settings
    /// read for one batch are kept in `teams`.
    async fn team_receives(&self, event: &Event, teams: &mut HashMap<String, Team>) -> ServiceResult<bool> {
        let Some(feature) = switchboard_api::access::feature_of_event_named(&event.r#type) else {
            return Ok(true);
        };
        if !teams.contains_key(&event.team_id) {
            let request = GetTeamRequest { team_id: event.team_id.clone() };
            let team = match self.identity.clone().get_team(request).await {
                Ok(team) => team.into_inner(),
                // A team gone has no webhooks left to deliver to.
                Err(status) if status.code() == tonic::Code::NotFound => Team::default(),
                Err(status) => return Err(ServiceError::from_status(&status)),
            };
            teams.insert(event.team_id.clone(), team);
        }
        Ok(teams.get(&event.team_id).is_none_or(|team| feature.allowed_for(team)))
    }

    /// The stored form of a published event: its body rendered once.
    fn stored(event: &Event, agent_name: Option<&str>) -> Result<StoredEvent, String> {
        if EventType::parse(&event.r#type).is_none() {
            return Err(format!("{} is not an event type", event.r#type));
        }
        let resource = event.resource.as_ref().ok_or("the event has no resource")?;
        let data = switchboard_api::events::render(resource, agent_name)?;
        let body = serde_json::json!({ "type": event.r#type, "timestamp": iso_ms(event.occurred_at_ms), "data": data });
        Ok(StoredEvent {
            id: event.id.clone(),
            team_id: event.team_id.clone(),
            kind: event.r#type.clone(),
            subject_id: event.subject_id.clone(),
            body: body.to_string(),
            occurred_at_ms: event.occurred_at_ms,
        })
    }
}

#[tonic::async_trait]
impl WebhooksService for WebhooksApi {
    async fn create_webhook(&self, request: Request<CreateWebhookRequest>) -> Reply<Webhook> {
        let request = request.into_inner();
        id_or_not_found(&request.team_id, ServiceError::team_not_found)?;
        let events = Self::check_events(&request.events);
        let description = Self::check_description(request.description.as_deref());
        let url = self.check_url(&request.url).await;
        all_at_once([url.as_ref().err(), events.as_ref().err(), description.as_ref().err()])?;
        let (url, events) = (url?, events?);
        let new = NewWebhook {
            url: &url,
            events: &events,
            description: request.description.as_deref(),
            enabled: request.enabled.unwrap_or(true),
        };
        let secret = sign::new_secret();
        reply(self.store.create_webhook(&request.team_id, &new, &secret, limits::WEBHOOKS_PER_TEAM).await)
    }

    async fn list_webhooks(&self, request: Request<ListWebhooksRequest>) -> Reply<ListWebhooksResponse> {
        let request = request.into_inner();
        let webhooks = self.store.list_webhooks(&request.team_id).await?;
        reply(Ok(ListWebhooksResponse { webhooks }))
    }

    async fn get_webhook(&self, request: Request<WebhookRef>) -> Reply<Webhook> {
        let request = request.into_inner();
        id_or_not_found(&request.webhook_id, crate::store::webhook_not_found)?;
        reply(self.store.webhook(&request.team_id, &request.webhook_id).await)
    }

    async fn update_webhook(&self, request: Request<UpdateWebhookRequest>) -> Reply<Webhook> {
        let request = request.into_inner();
        id_or_not_found(&request.webhook_id, crate::store::webhook_not_found)?;
        let events = if request.replace_events { Some(Self::check_events(&request.events)) } else { None };
        let description = Self::check_description(request.description.as_deref());
        let url = match &request.url {
            Some(url) => Some(self.check_url(url).await),
            None => None,
        };
        all_at_once([
            url.as_ref().and_then(|url| url.as_ref().err()),
            events.as_ref().and_then(|events| events.as_ref().err()),
            description.as_ref().err(),
        ])?;
        let url = url.transpose()?;
        let events = events.transpose()?;
        let change = WebhookChange {
            url: url.as_deref(),
            events: events.as_deref(),
            description: request.description.as_deref(),
            enabled: request.enabled,
        };
        let updated =
            self.store.update_webhook(&request.team_id, &request.webhook_id, &change, self.settings.retry_for).await;
        if request.enabled == Some(true) {
            // Held deliveries are due now.
            self.wake.notify_one();
        }
        reply(updated)
    }

    async fn delete_webhook(&self, request: Request<WebhookRef>) -> Reply<Webhook> {
        let request = request.into_inner();
        id_or_not_found(&request.webhook_id, crate::store::webhook_not_found)?;
        reply(self.store.delete_webhook(&request.team_id, &request.webhook_id).await)
    }

    async fn test_webhook(&self, request: Request<WebhookRef>) -> Reply<Delivery> {
        let request = request.into_inner();
        id_or_not_found(&request.webhook_id, crate::store::webhook_not_found)?;
        let now = now_ms();
        let data = serde_json::json!({
            "webhookId": request.webhook_id,
            "message": "A test event sent on request: the endpoint receives and verifies Switchboard webhooks.",
        });
        let event = StoredEvent {
            id: uuid::Uuid::now_v7().to_string(),
            team_id: request.team_id.clone(),
            kind: TEST_EVENT.to_owned(),
            subject_id: request.webhook_id.clone(),
            body: serde_json::json!({ "type": TEST_EVENT, "timestamp": iso_ms(now), "data": data }).to_string(),
            occurred_at_ms: now,
        };
        let delivery = self.store.queue_test(&request.webhook_id, &event, self.settings.retry_for).await?;
        self.wake.notify_one();
        reply(Ok(delivery))
    }

    async fn list_deliveries(&self, request: Request<ListDeliveriesRequest>) -> Reply<ListDeliveriesResponse> {
        let request = request.into_inner();
        id_or_not_found(&request.webhook_id, crate::store::webhook_not_found)?;
        let status = match request.status.as_deref() {
            None => None,
            Some(text) => Some(DeliveryStatus::parse(text).ok_or_else(|| {
                ServiceError::invalid_field("status", format!("must be one of {}", DeliveryStatus::names()))
            })?),
        };
        let page = request.page.unwrap_or_default();
        let limit = if page.limit == 0 { 20 } else { page.limit.min(100) };
        let (deliveries, info) = self
            .store
            .list_deliveries(&request.team_id, &request.webhook_id, (page.page.max(1), limit), status)
            .await?;
        reply(Ok(ListDeliveriesResponse { deliveries, page: Some(info) }))
    }

    async fn get_delivery(&self, request: Request<DeliveryRef>) -> Reply<Delivery> {
        let request = request.into_inner();
        id_or_not_found(&request.webhook_id, crate::store::webhook_not_found)?;
        id_or_not_found(&request.delivery_id, crate::store::delivery_not_found)?;
        reply(self.store.delivery(&request.team_id, &request.webhook_id, &request.delivery_id).await)
    }

    async fn retry_delivery(&self, request: Request<DeliveryRef>) -> Reply<Delivery> {
        let request = request.into_inner();
        id_or_not_found(&request.webhook_id, crate::store::webhook_not_found)?;
        id_or_not_found(&request.delivery_id, crate::store::delivery_not_found)?;
        let delivery = self
            .store
            .retry(&request.team_id, &request.webhook_id, &request.delivery_id, self.settings.retry_for)
            .await?;
        self.wake.notify_one();
        reply(Ok(delivery))
    }

    async fn publish(&self, request: Request<PublishRequest>) -> Reply<PublishResponse> {
        let mut stored = Vec::new();
        let mut names = HashMap::new();
        let mut teams = HashMap::new();
        for event in &request.get_ref().events {
            // Identity being down fails the batch too.
            if !self.team_receives(event, &mut teams).await? {
                tracing::debug!(event = %event.id, kind = %event.r#type, "not delivered: the team's access hides it");
                continue;
            }
            // The agents service being down fails the batch: the relay publishes it again.
            let agent_name = self.agent_name(event, &mut names).await?;
            match Self::stored(event, agent_name.as_deref()) {
                Ok(event) => stored.push(event),
                // A producer's bug must not jam its outbox: the event is dropped, loudly.
                Err(error) => tracing::error!(event = %event.id, kind = %event.r#type, %error, "event dropped"),
            }
        }
        let accepted = self.store.publish(&stored, self.settings.retry_for).await?;
        if accepted > 0 {
            self.wake.notify_one();
        }
        reply(Ok(PublishResponse { accepted }))
    }
}
