//! The webhooks store on SQLite and on PostgreSQL (when `TEST_DATABASE_URL` is set): events
//! stored once, deliveries to subscribers only, one subject at a time, retries and give-ups.

#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::time::Duration;

use switchboard_kit::testdb;
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::DeliveryStatus;
use switchboard_webhooks::WebhookStore;
use switchboard_webhooks::store::{Attempt, Claimed, NewWebhook, StoredEvent};

const DAY: Duration = Duration::from_secs(86_400);
const LEASE: Duration = Duration::from_secs(40);
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

async fn on_every_engine<F, Fut>(test: F)
where
    F: Fn(WebhookStore) -> Fut,
    Fut: Future<Output = ()>,
{
    for database in testdb::all().await.unwrap() {
        let store = WebhookStore::open(&database.url).await.unwrap();
        eprintln!("engine: {:?}", database.engine);
        test(store.clone()).await;
        store.db().close().await;
    }
}

fn team() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn event(team: &str, kind: &str, subject: &str) -> StoredEvent {
    StoredEvent {
        id: uuid::Uuid::now_v7().to_string(),
        team_id: team.to_owned(),
        kind: kind.to_owned(),
        subject_id: subject.to_owned(),
        body: format!(r#"{{"type":"{kind}","data":{{"id":"{subject}"}}}}"#),
        occurred_at_ms: now_ms(),
    }
}

async fn webhook(store: &WebhookStore, team: &str, events: &[&str]) -> String {
    let events: Vec<String> = events.iter().map(|e| (*e).to_owned()).collect();
    let new = NewWebhook { url: "https://hooks.example.com/in", events: &events, description: None, enabled: true };
    store.create_webhook(team, &new, SECRET, 50).await.unwrap().id
}

fn answered(status: u16) -> Attempt {
    Attempt { status_code: Some(status), duration_ms: 3, error: (status >= 300).then(|| format!("HTTP {status}")) }
}

/// Leases every delivery that is due now.
async fn due(store: &WebhookStore) -> Vec<Claimed> {
    store.claim(100, LEASE).await.unwrap()
}

fn event_ids(claimed: &[Claimed]) -> Vec<&str> {
    claimed.iter().map(|claim| claim.event_id.as_str()).collect()
}

#[tokio::test]
async fn events_reach_subscribers_of_their_team_once() {
    on_every_engine(|store| async move {
        let (mine, other) = (team(), team());
        let contacts = webhook(&store, &mine, &["contact.created", "contact.updated"]).await;
        let _calls = webhook(&store, &mine, &["call.ended"]).await;
        let _theirs = webhook(&store, &other, &["contact.created"]).await;
        let created = event(&mine, "contact.created", "c1");
        assert_eq!(store.publish(std::slice::from_ref(&created), DAY).await.unwrap(), 1);
        assert_eq!(store.publish(std::slice::from_ref(&created), DAY).await.unwrap(), 0, "seen before");
        let claimed = due(&store).await;
        assert_eq!(event_ids(&claimed), vec![created.id.as_str()], "{claimed:?}");
        assert_eq!(claimed[0].webhook_id, contacts);
        assert_eq!(claimed[0].body, created.body);
        assert!(due(&store).await.is_empty(), "a leased delivery is not claimed twice");
    })
    .await;
}

#[tokio::test]
async fn one_subject_goes_one_delivery_at_a_time_in_order() {
    on_every_engine(|store| async move {
        let mine = team();
        let hook = webhook(&store, &mine, &["contact.created", "contact.updated", "contact.deleted"]).await;
        let first = event(&mine, "contact.created", "a");
        let second = event(&mine, "contact.updated", "a");
        let third = event(&mine, "contact.deleted", "a");
        let elsewhere = event(&mine, "contact.created", "b");
        store.publish(&[first.clone(), second.clone(), third.clone(), elsewhere.clone()], DAY).await.unwrap();

        let claimed = due(&store).await;
        assert_eq!(event_ids(&claimed), vec![first.id.as_str(), elsewhere.id.as_str()], "the first of each subject");

        // A failure keeps the subject's later events waiting until it succeeds.
        store.record(&claimed[0], &answered(503), Some(Duration::ZERO)).await.unwrap();
        store.record(&claimed[1], &answered(200), None).await.unwrap();
        let again = due(&store).await;
        assert_eq!(event_ids(&again), vec![first.id.as_str()]);
        assert_eq!(again[0].attempts, 1);
        store.record(&again[0], &answered(204), None).await.unwrap();
        let next = due(&store).await;
        assert_eq!(event_ids(&next), vec![second.id.as_str()]);
        store.record(&next[0], &answered(200), None).await.unwrap();
        let last = due(&store).await;
        assert_eq!(event_ids(&last), vec![third.id.as_str()]);

        let (deliveries, page) =
            store.list_deliveries(&mine, &hook, (1, 20), Some(DeliveryStatus::Delivered)).await.unwrap();
        assert_eq!(page.total_count, 3);
        let retried = deliveries.iter().find(|delivery| delivery.event_id == first.id).unwrap();
        assert_eq!((retried.attempts, retried.status_code, retried.error.as_deref()), (2, Some(204), None));
    })
    .await;
}

#[tokio::test]
async fn concurrent_creates_never_pass_the_team_limit() {
    on_every_engine(|store| async move {
        let (mine, other) = (team(), team());
        let events = vec!["contact.created".to_owned()];
        let new = NewWebhook { url: "https://hooks.example.com/in", events: &events, description: None, enabled: true };
        for _ in 0..2 {
            store.create_webhook(&mine, &new, SECRET, 3).await.unwrap();
        }
        // Four at once for the one place left: exactly one gets it.
        let attempts = futures::future::join_all((0..4).map(|_| store.create_webhook(&mine, &new, SECRET, 3))).await;
        let created = attempts.iter().filter(|attempt| attempt.is_ok()).count();
        assert_eq!(created, 1, "{attempts:?}");
        for refused in attempts.iter().filter_map(|attempt| attempt.as_ref().err()) {
            assert_eq!(refused.kind, switchboard_kit::ErrorKind::Conflict);
        }
        assert_eq!(store.list_webhooks(&mine).await.unwrap().len(), 3);
        store.create_webhook(&other, &new, SECRET, 3).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_retry_of_a_delivery_in_flight_does_not_send_it_twice() {
    on_every_engine(|store| async move {
        let mine = team();
        let hook = webhook(&store, &mine, &["contact.created"]).await;
        store.publish(&[event(&mine, "contact.created", "x")], DAY).await.unwrap();
        let in_flight = due(&store).await;
        assert_eq!(in_flight.len(), 1);
        let (deliveries, _) = store.list_deliveries(&mine, &hook, (1, 20), None).await.unwrap();
        let retried = store.retry(&mine, &hook, &deliveries[0].id, DAY).await.unwrap();
        assert_eq!(retried.status, "pending");
        assert!(due(&store).await.is_empty(), "the attempt in flight holds the delivery");
        store.record(&in_flight[0], &answered(200), None).await.unwrap();
        assert!(due(&store).await.is_empty(), "delivered once");
        let (deliveries, _) = store.list_deliveries(&mine, &hook, (1, 20), None).await.unwrap();
        assert_eq!((deliveries[0].status.as_str(), deliveries[0].attempts), ("delivered", 1));
    })
    .await;
}

#[tokio::test]
async fn a_delivery_given_up_fails_its_webhook_until_one_succeeds() {
    on_every_engine(|store| async move {
        let mine = team();
        let hook = webhook(&store, &mine, &["contact.created"]).await;
        store.publish(&[event(&mine, "contact.created", "x")], DAY).await.unwrap();
        let claimed = due(&store).await;
        store.record(&claimed[0], &answered(500), None).await.unwrap();
        assert_eq!(store.webhook(&mine, &hook).await.unwrap().status, "failing");
        let (deliveries, _) = store.list_deliveries(&mine, &hook, (1, 20), None).await.unwrap();
        assert_eq!((deliveries[0].status.as_str(), deliveries[0].next_retry_at_ms), ("failed", None));

        // Sent again on request; it succeeds and the webhook is active again.
        let retried = store.retry(&mine, &hook, &deliveries[0].id, DAY).await.unwrap();
        assert_eq!(retried.status, "pending");
        let claimed = due(&store).await;
        assert_eq!(event_ids(&claimed), vec![deliveries[0].event_id.as_str()]);
        store.record(&claimed[0], &answered(200), None).await.unwrap();
        assert_eq!(store.webhook(&mine, &hook).await.unwrap().status, "active");

        // Another team's ids are not found; a deleted webhook takes its deliveries along.
        let other = team();
        assert!(store.retry(&other, &hook, &deliveries[0].id, DAY).await.is_err());
        assert!(store.list_deliveries(&other, &hook, (1, 20), None).await.is_err());
        store.delete_webhook(&mine, &hook).await.unwrap();
        store.publish(&[event(&mine, "contact.created", "y")], DAY).await.unwrap();
        assert!(due(&store).await.is_empty());
    })
    .await;
}

/// A disabled webhook (issue 40): its deliveries are held, not claimed; at most
/// HELD_PER_WEBHOOK are held and the next is recorded failed; enabling makes the held ones due.
#[tokio::test]
async fn a_disabled_webhook_holds_a_bounded_number_until_enabled() {
    use switchboard_webhooks::store::{HELD_PER_WEBHOOK, WebhookChange};
    on_every_engine(|store| async move {
        let mine = team();
        let hook = webhook(&store, &mine, &["contact.created"]).await;
        let off = WebhookChange { url: None, events: None, description: None, enabled: Some(false) };
        assert!(!store.update_webhook(&mine, &hook, &off, DAY).await.unwrap().enabled);
        let count = usize::try_from(HELD_PER_WEBHOOK).unwrap() + 1;
        let events: Vec<StoredEvent> =
            (0..count).map(|i| event(&mine, "contact.created", &format!("c{}", i % 7))).collect();
        assert_eq!(store.publish(&events, DAY).await.unwrap(), u32::try_from(count).unwrap());
        assert!(due(&store).await.is_empty(), "a held delivery was claimed");
        let (held, page) = store.list_deliveries(&mine, &hook, (1, 100), Some(DeliveryStatus::Held)).await.unwrap();
        assert_eq!(page.total_count, u64::try_from(HELD_PER_WEBHOOK).unwrap(), "{page:?}");
        assert!(held.iter().all(|d| d.status == "held" && d.next_retry_at_ms.is_none()));
        let (failed, _) = store.list_deliveries(&mine, &hook, (1, 100), Some(DeliveryStatus::Failed)).await.unwrap();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].event_id, events[count - 1].id, "the newest beyond the bound is not held");
        assert!(failed[0].error.as_deref().unwrap_or_default().contains("Not held"), "{:?}", failed[0]);
        let (pending, _) = store.list_deliveries(&mine, &hook, (1, 100), Some(DeliveryStatus::Pending)).await.unwrap();
        assert!(pending.is_empty(), "held is not pending while disabled");

        let on = WebhookChange { enabled: Some(true), ..off };
        assert!(store.update_webhook(&mine, &hook, &on, DAY).await.unwrap().enabled);
        // One per subject at a time: the first delivery of each of the 7 subjects is due.
        let claimed = due(&store).await;
        assert_eq!(claimed.len(), 7, "{claimed:?}");
        assert!(claimed.iter().all(|claim| claim.give_up_at_ms > now_ms() + 3_600_000), "a fresh retry window");
    })
    .await;
}
