//! Events for webhooks, written by each service in the transaction of the change they tell
//! of (a transactional outbox): an event is never lost when the change commits, and never
//! sent when it rolls back. A [`Relay`] in the same process hands the rows, oldest first, to
//! the webhooks service's `Publish` and deletes them once it has them; `Publish` ignores
//! events it has seen, so a relay that dies between the two only sends some again.
//!
//! Each service that tells of events has the `event_outbox` table in its migrations:
//! `seq` (SQLite `INTEGER PRIMARY KEY AUTOINCREMENT`, PostgreSQL `BIGSERIAL PRIMARY KEY`),
//! `id TEXT`, `event BLOB/BYTEA` (the encoded `switchboard.v1.Event`), `created_at`.

use std::time::Duration;

use anyhow::Context;
use prost::Message;
use sqlx::{AnyConnection, Row};
use switchboard_proto::v1::webhooks_service_client::WebhooksServiceClient;
use switchboard_proto::v1::{Event, PublishRequest, event};
use tokio::sync::watch;

use crate::backoff::Backoff;
use crate::db::{Db, Engine};
use crate::grpc::Channel;
use crate::time::now_ms;
use crate::vocabulary::EventType;

/// The event `POST /webhooks/{id}/test` sends.
pub const TEST_EVENT: &str = "webhook.test";

/// Writes an event; call it inside the transaction of the change it tells of.
pub async fn record(
    conn: &mut AnyConnection,
    kind: EventType,
    (team_id, subject_id): (&str, &str),
    resource: event::Resource,
) -> Result<(), sqlx::Error> {
    // Time-ordered, so that events sort by when they happened wherever they are listed.
    let id = uuid::Uuid::now_v7().to_string();
    let now = now_ms();
    let event = Event {
        id: id.clone(),
        team_id: team_id.to_owned(),
        r#type: kind.as_str().to_owned(),
        subject_id: subject_id.to_owned(),
        occurred_at_ms: now,
        resource: Some(resource),
    };
    sqlx::query("INSERT INTO event_outbox (id, event, created_at) VALUES ($1, $2, $3)")
        .bind(id)
        .bind(event.encode_to_vec())
        .bind(now)
        .execute(conn)
        .await?;
    Ok(())
}

/// How many events one `Publish` carries at most.
const BATCH: i64 = 500;
/// How often an empty outbox is looked at again.
const POLL: Duration = Duration::from_millis(100);
/// How long a batch's publication may take: a second less than the server lets the relay's
/// transaction idle. Webhooks accepts an event once by its id, so a batch published again is
/// harmless.
const PUBLISH_TIMEOUT: Duration = crate::db::IDLE_IN_TRANSACTION.saturating_sub(Duration::from_secs(1));
/// The largest wait after failures in a row (the webhooks service is down), from `POLL` up.
const MOST_BACKOFF: Duration = Duration::from_secs(10);

/// Where a relay hands its events: the webhooks service's `Publish`.
pub trait Publish: Send {
    fn publish(&mut self, events: Vec<Event>) -> futures::future::BoxFuture<'_, anyhow::Result<()>>;
}

impl Publish for WebhooksServiceClient<Channel> {
    fn publish(&mut self, events: Vec<Event>) -> futures::future::BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            WebhooksServiceClient::publish(self, PublishRequest { events })
                .await
                .context("publishing webhook events")?;
            Ok(())
        })
    }
}

/// Moves a service's outbox to the webhooks service.
pub struct Relay {
    db: Db,
    webhooks: Box<dyn Publish>,
}

impl Relay {
    pub fn new(db: Db, webhooks: impl Publish + 'static) -> Self {
        Self { db, webhooks: Box::new(webhooks) }
    }

    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let backoff = Backoff::new(POLL, MOST_BACKOFF);
        let mut failures = 0u32;
        while !*stop.borrow() {
            let wait = match self.relay_batch().await {
                Ok(moved) if moved == BATCH => {
                    failures = 0;
                    continue;
                }
                Ok(_) => {
                    failures = 0;
                    POLL
                }
                Err(error) => {
                    tracing::warn!(error = format!("{error:#}"), "relaying webhook events failed; retrying");
                    failures = failures.saturating_add(1);
                    backoff.after(failures)
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// Publishes the oldest events and deletes them; the number moved. [`Relay::run`] calls it
    /// in a loop.
    pub async fn relay_batch(&mut self) -> anyhow::Result<i64> {
        if self.db.engine() == Engine::Sqlite {
            // One process writes a SQLite file: no other relay can take the rows meanwhile,
            // and a write lock held across the call would stall the service's writes.
            let mut conn = self.db.pool().acquire().await.context("reading the outbox")?;
            return self.move_batch(&mut conn, "").await;
        }
        // The rows stay locked until they are deleted, so that the relays of two replicas
        // publish one after the other, in order.
        let mut tx = self.db.pool().begin().await.context("starting to read the outbox")?;
        let moved = self.move_batch(&mut tx, " FOR UPDATE").await?;
        tx.commit().await.context("committing the relayed events")?;
        Ok(moved)
    }

    async fn move_batch(&mut self, conn: &mut AnyConnection, lock: &str) -> anyhow::Result<i64> {
        let rows = sqlx::query(&format!("SELECT seq, event FROM event_outbox ORDER BY seq LIMIT {BATCH}{lock}"))
            .fetch_all(&mut *conn)
            .await
            .context("reading the outbox")?;
        if rows.is_empty() {
            return Ok(0);
        }
        let mut seqs = Vec::with_capacity(rows.len());
        let mut events = Vec::with_capacity(rows.len());
        for row in &rows {
            seqs.push(row.try_get::<i64, _>("seq")?);
            let bytes: Vec<u8> = row.try_get("event")?;
            match Event::decode(bytes.as_slice()) {
                Ok(event) => events.push(event),
                Err(error) => tracing::error!(%error, "an outbox row does not decode; dropped"),
            }
        }
        // The rows stay locked meanwhile: the call must end before the server ends a session
        // idle in its transaction (`db::IDLE_IN_TRANSACTION`), or the batch is published again.
        tokio::time::timeout(PUBLISH_TIMEOUT, self.webhooks.publish(events))
            .await
            .map_err(|_| anyhow::anyhow!("the webhooks service did not answer within {PUBLISH_TIMEOUT:?}"))??;
        // Exactly the rows read, not every row up to the last: on PostgreSQL a writer takes its
        // `seq` when it inserts and may commit after a later one, so a lower `seq` can appear
        // once the batch was read, and `seq <= last` would delete it unpublished.
        let placeholders: Vec<String> = (1..=seqs.len()).map(|n| format!("${n}")).collect();
        let delete = format!("DELETE FROM event_outbox WHERE seq IN ({})", placeholders.join(", "));
        let mut query = sqlx::query(&delete);
        for seq in &seqs {
            query = query.bind(*seq);
        }
        query.execute(&mut *conn).await.context("deleting relayed events")?;
        Ok(i64::try_from(rows.len()).unwrap_or(0))
    }
}
