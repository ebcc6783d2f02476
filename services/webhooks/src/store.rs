//! The webhooks store. SQL is written once for both engines (see `switchboard_kit::db`);
//! every statement of the API filters on the team, so another team's webhook or delivery is
//! `NOT_FOUND`.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::db::Db;
use switchboard_kit::listing::{self, Total};
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::DeliveryStatus;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{Delivery, PageInfo, Webhook};

pub const ACTIVE: &str = "active";
pub const FAILING: &str = "failing";
/// The most deliveries a disabled webhook holds; events beyond are recorded as `failed` (and
/// can be retried once it is enabled), so a paused endpoint cannot grow the table without end.
pub const HELD_PER_WEBHOOK: i64 = 1000;

pub fn webhook_not_found() -> ServiceError {
    ServiceError::not_found("Webhook not found")
}

pub fn delivery_not_found() -> ServiceError {
    ServiceError::not_found("Delivery not found")
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}

const WEBHOOK_COLUMNS: &str = "id, team_id, url, events, description, status, enabled, created_at, updated_at";

fn webhook_from_row(row: &AnyRow) -> Result<Webhook, sqlx::Error> {
    let events: String = row.try_get("events")?;
    let enabled: i64 = row.try_get("enabled")?;
    Ok(Webhook {
        id: row.try_get("id")?,
        team_id: row.try_get("team_id")?,
        url: row.try_get("url")?,
        events: serde_json::from_str(&events).unwrap_or_default(),
        description: row.try_get("description")?,
        secret: String::new(),
        status: row.try_get("status")?,
        enabled: enabled != 0,
        created_at_ms: row.try_get("created_at")?,
        updated_at_ms: row.try_get("updated_at")?,
    })
}

const DELIVERY_COLUMNS: &str = "id, webhook_id, event_id, event_type, status, attempts, status_code, duration_ms, \
                                error, next_attempt_at, created_at, last_attempt_at";

/// A delivery row as the API shows it: a pending delivery of a disabled webhook is `held`.
fn delivery_from_row(row: &AnyRow, enabled: bool) -> Result<Delivery, sqlx::Error> {
    let attempts: i64 = row.try_get("attempts")?;
    let status_code: Option<i64> = row.try_get("status_code")?;
    let stored: String = row.try_get("status")?;
    let mut status = DeliveryStatus::parse(&stored)
        .ok_or_else(|| sqlx::Error::Decode(format!("{stored} is not a delivery status").into()))?;
    // Held is how a pending delivery of a disabled webhook is shown: it is not attempted until
    // the webhook is enabled again. Stored as pending, so enabling rewrites no rows.
    if !enabled && status == DeliveryStatus::Pending {
        status = DeliveryStatus::Held;
    }
    let next: Option<i64> = row.try_get("next_attempt_at")?;
    Ok(Delivery {
        id: row.try_get("id")?,
        webhook_id: row.try_get("webhook_id")?,
        event_id: row.try_get("event_id")?,
        event: row.try_get("event_type")?,
        next_retry_at_ms: next.filter(|_| status == DeliveryStatus::Pending),
        status: status.as_str().to_owned(),
        attempts: u32::try_from(attempts).unwrap_or(0),
        status_code: status_code.and_then(|code| u32::try_from(code).ok()),
        duration_ms: row.try_get("duration_ms")?,
        error: row.try_get("error")?,
        created_at_ms: row.try_get("created_at")?,
        last_attempt_at_ms: row.try_get("last_attempt_at")?,
        payload: None,
    })
}

/// A checked new endpoint.
pub struct NewWebhook<'a> {
    pub url: &'a str,
    pub events: &'a [String],
    pub description: Option<&'a str>,
    pub enabled: bool,
}

/// A checked change: `None` keeps the value.
pub struct WebhookChange<'a> {
    pub url: Option<&'a str>,
    pub events: Option<&'a [String]>,
    pub description: Option<&'a str>,
    pub enabled: Option<bool>,
}

/// An event as stored: its body is what every delivery of it sends.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub id: String,
    pub team_id: String,
    pub kind: String,
    pub subject_id: String,
    pub body: String,
    pub occurred_at_ms: i64,
}

/// A delivery claimed for an attempt, with what sending it needs.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub seq: i64,
    pub id: String,
    pub webhook_id: String,
    pub event_id: String,
    pub event_type: String,
    pub attempts: i64,
    pub give_up_at_ms: i64,
    pub url: String,
    pub secret: String,
    pub body: String,
}

/// What an attempt came to.
pub struct Attempt {
    pub status_code: Option<u16>,
    pub duration_ms: i64,
    pub error: Option<String>,
}

#[derive(Clone)]
pub struct WebhookStore {
    db: Db,
}

impl WebhookStore {
    pub async fn open(url: &str) -> anyhow::Result<Self> {
        Ok(Self { db: Db::connect(url, &crate::MIGRATIONS).await? })
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Creates a webhook unless the team already has `most` (409). The count and the insert
    /// are one transaction, serialised per team, so concurrent creates cannot pass the limit.
    pub async fn create_webhook(
        &self,
        team_id: &str,
        new: &NewWebhook<'_>,
        secret: &str,
        most: usize,
    ) -> ServiceResult<Webhook> {
        let id = uuid::Uuid::new_v4().to_string();
        let now = now_ms();
        let mut tx = self.db.begin_write().await?;
        self.db.lock_scope(&mut tx, &format!("webhooks:{team_id}")).await?;
        let count: i64 = sqlx::query("SELECT COUNT(*) AS n FROM webhooks WHERE team_id = $1")
            .bind(team_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        if usize::try_from(count).unwrap_or(usize::MAX) >= most {
            return Err(ServiceError::conflict(format!("A team has at most {most} webhooks; delete one first")));
        }
        sqlx::query(
            "INSERT INTO webhooks (id, team_id, url, events, description, secret, status, enabled, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)",
        )
        .bind(&id)
        .bind(team_id)
        .bind(new.url)
        .bind(serde_json::to_string(new.events).map_err(ServiceError::internal)?)
        .bind(new.description)
        .bind(secret)
        .bind(ACTIVE)
        .bind(i64::from(new.enabled))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let mut webhook = webhook_in(&mut tx, team_id, &id).await?;
        tx.commit().await?;
        webhook.secret = secret.to_owned();
        Ok(webhook)
    }

    pub async fn list_webhooks(&self, team_id: &str) -> ServiceResult<Vec<Webhook>> {
        let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE team_id = $1 ORDER BY created_at, id");
        let rows = sqlx::query(&sql).bind(team_id).fetch_all(self.db.pool()).await?;
        Ok(rows.iter().map(webhook_from_row).collect::<Result<_, _>>()?)
    }

    pub async fn webhook(&self, team_id: &str, webhook_id: &str) -> ServiceResult<Webhook> {
        let mut conn = self.db.pool().acquire().await?;
        webhook_in(&mut conn, team_id, webhook_id).await
    }

    /// Changes the webhook. Enabling a disabled one makes its held deliveries due now, each
    /// retried for another `retry_for` (the time spent held does not count against it).
    pub async fn update_webhook(
        &self,
        team_id: &str,
        webhook_id: &str,
        change: &WebhookChange<'_>,
        retry_for: Duration,
    ) -> ServiceResult<Webhook> {
        let events = change.events.map(serde_json::to_string).transpose().map_err(ServiceError::internal)?;
        let now = now_ms();
        let mut tx = self.db.begin_write().await?;
        let before = webhook_in(&mut tx, team_id, webhook_id).await?;
        sqlx::query(
            "UPDATE webhooks SET url = COALESCE($1, url), events = COALESCE($2, events), \
             description = COALESCE($3, description), enabled = COALESCE($4, enabled), updated_at = $5 \
             WHERE team_id = $6 AND id = $7",
        )
        .bind(change.url)
        .bind(events)
        .bind(change.description)
        .bind(change.enabled.map(i64::from))
        .bind(now)
        .bind(team_id)
        .bind(webhook_id)
        .execute(&mut *tx)
        .await?;
        if !before.enabled && change.enabled == Some(true) {
            sqlx::query(
                "UPDATE deliveries SET next_attempt_at = $1, give_up_at = $2 WHERE webhook_id = $3 AND status = $4",
            )
            .bind(now)
            .bind(now + millis(retry_for))
            .bind(webhook_id)
            .bind(DeliveryStatus::Pending.as_str())
            .execute(&mut *tx)
            .await?;
        }
        let webhook = webhook_in(&mut tx, team_id, webhook_id).await?;
        tx.commit().await?;
        Ok(webhook)
    }

    /// Deletes the endpoint and its deliveries (pending ones are not sent).
    pub async fn delete_webhook(&self, team_id: &str, webhook_id: &str) -> ServiceResult<Webhook> {
        let mut tx = self.db.begin_write().await?;
        let webhook = webhook_in(&mut tx, team_id, webhook_id).await?;
        sqlx::query("DELETE FROM deliveries WHERE webhook_id = $1").bind(webhook_id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM webhooks WHERE id = $1").bind(webhook_id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(webhook)
    }

    /// Stores new events and a pending delivery of each to every endpoint of its team that
    /// subscribed to its type, all or nothing; events seen before are skipped. The number new.
    pub async fn publish(&self, events: &[StoredEvent], retry_for: Duration) -> ServiceResult<u32> {
        let mut tx = self.db.begin_write().await?;
        let mut subscribers: HashMap<String, Vec<(String, Vec<String>, bool)>> = HashMap::new();
        let mut accepted = 0;
        let now = now_ms();
        for event in events {
            if !insert_event(&mut tx, event, now).await? {
                continue;
            }
            accepted += 1;
            if !subscribers.contains_key(&event.team_id) {
                let rows =
                    sqlx::query("SELECT id, events, enabled FROM webhooks WHERE team_id = $1 ORDER BY created_at, id")
                        .bind(&event.team_id)
                        .fetch_all(&mut *tx)
                        .await?;
                let mut endpoints = Vec::with_capacity(rows.len());
                for row in &rows {
                    let events: String = row.try_get("events")?;
                    let enabled: i64 = row.try_get("enabled")?;
                    endpoints.push((
                        row.try_get("id")?,
                        serde_json::from_str(&events).unwrap_or_default(),
                        enabled != 0,
                    ));
                }
                subscribers.insert(event.team_id.clone(), endpoints);
            }
            let endpoints = subscribers.get(&event.team_id).map(Vec::as_slice).unwrap_or_default();
            for (webhook_id, types, enabled) in endpoints {
                if !types.iter().any(|kind| kind == &event.kind) {
                    continue;
                }
                let give_up_at = now + millis(retry_for);
                if !enabled && held(&mut tx, webhook_id).await? >= HELD_PER_WEBHOOK {
                    let error = format!(
                        "Not held: the webhook was disabled and already held {HELD_PER_WEBHOOK} deliveries; \
                         retry it once the webhook is enabled"
                    );
                    insert_failed_delivery(&mut tx, webhook_id, event, give_up_at, &error).await?;
                } else {
                    insert_delivery(&mut tx, webhook_id, event, give_up_at).await?;
                }
            }
        }
        tx.commit().await?;
        Ok(accepted)
    }

    /// Stores `event` (a `webhook.test`) and its delivery to `webhook_id` alone.
    pub async fn queue_test(
        &self,
        webhook_id: &str,
        event: &StoredEvent,
        retry_for: Duration,
    ) -> ServiceResult<Delivery> {
        let mut tx = self.db.begin_write().await?;
        if !webhook_in(&mut tx, &event.team_id, webhook_id).await?.enabled {
            return Err(disabled("send a test event"));
        }
        let now = now_ms();
        insert_event(&mut tx, event, now).await?;
        let id = insert_delivery(&mut tx, webhook_id, event, now + millis(retry_for)).await?;
        let delivery = delivery_in(&mut tx, &event.team_id, webhook_id, &id).await?;
        tx.commit().await?;
        Ok(delivery)
    }

    /// The endpoint's deliveries, newest first.
    pub async fn list_deliveries(
        &self,
        team_id: &str,
        webhook_id: &str,
        (page, limit): (u32, u32),
        status: Option<DeliveryStatus>,
    ) -> ServiceResult<(Vec<Delivery>, PageInfo)> {
        let mut conn = self.db.pool().acquire().await?;
        let enabled = webhook_in(&mut conn, team_id, webhook_id).await?.enabled;
        // `held` is how pending rows of a disabled webhook are shown: the filter asks for the
        // stored status, and a status the webhook's state rules out matches no row.
        let status = status.map(|status| match (status, enabled) {
            (DeliveryStatus::Held, false) => DeliveryStatus::Pending,
            (DeliveryStatus::Pending, false) => DeliveryStatus::Held,
            (status, _) => status,
        });
        let status_filter = if status.is_some() { " AND status = $3" } else { "" };
        let count_sql =
            format!("SELECT COUNT(*) AS n FROM deliveries WHERE team_id = $1 AND webhook_id = $2{status_filter}");
        let mut count = sqlx::query(&count_sql).bind(team_id).bind(webhook_id);
        if let Some(status) = status {
            count = count.bind(status.as_str());
        }
        let total: i64 = count.fetch_one(&mut *conn).await?.try_get("n")?;
        let offset = i64::from(page.saturating_sub(1)) * i64::from(limit);
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE team_id = $1 AND webhook_id = $2{status_filter} \
             ORDER BY seq DESC LIMIT {limit} OFFSET {offset}"
        );
        let mut query = sqlx::query(&sql).bind(team_id).bind(webhook_id);
        if let Some(status) = status {
            query = query.bind(status.as_str());
        }
        let rows = query.fetch_all(&mut *conn).await?;
        let deliveries = rows.iter().map(|row| delivery_from_row(row, enabled)).collect::<Result<_, _>>()?;
        Ok((deliveries, listing::page_info(page, limit, Total::exact(total))))
    }

    /// One delivery of the team's webhook with the body it sends.
    pub async fn delivery(&self, team_id: &str, webhook_id: &str, delivery_id: &str) -> ServiceResult<Delivery> {
        let mut conn = self.db.pool().acquire().await?;
        let mut delivery = delivery_in(&mut conn, team_id, webhook_id, delivery_id).await?;
        let body: Option<String> = sqlx::query_scalar("SELECT body FROM events WHERE id = $1 AND team_id = $2")
            .bind(&delivery.event_id)
            .bind(team_id)
            .fetch_optional(&mut *conn)
            .await?;
        delivery.payload = Some(body.ok_or_else(delivery_not_found)?);
        Ok(delivery)
    }

    /// Makes the delivery pending again, due now, retried for another `retry_for`.
    pub async fn retry(
        &self,
        team_id: &str,
        webhook_id: &str,
        delivery_id: &str,
        retry_for: Duration,
    ) -> ServiceResult<Delivery> {
        let mut tx = self.db.begin_write().await?;
        if !webhook_in(&mut tx, team_id, webhook_id).await?.enabled {
            return Err(disabled("retry a delivery"));
        }
        let now = now_ms();
        // A delivery being attempted right now keeps its lease: the attempt in flight stands
        // for the retry (its outcome is recorded as usual), instead of a second, concurrent
        // send of the same event.
        let done = sqlx::query(
            "UPDATE deliveries SET status = $1, next_attempt_at = $2, give_up_at = $3, \
             lease_until = CASE WHEN lease_until > $2 THEN lease_until ELSE NULL END \
             WHERE team_id = $4 AND webhook_id = $5 AND id = $6",
        )
        .bind(DeliveryStatus::Pending.as_str())
        .bind(now)
        .bind(now + millis(retry_for))
        .bind(team_id)
        .bind(webhook_id)
        .bind(delivery_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(delivery_not_found());
        }
        let delivery = delivery_in(&mut tx, team_id, webhook_id, delivery_id).await?;
        tx.commit().await?;
        Ok(delivery)
    }

    /// Leases up to `limit` due deliveries for `lease`. A delivery is due when it is pending,
    /// its time has come, nobody holds it, and no earlier delivery of the same subject to the
    /// same endpoint is still pending: that is what keeps the order per resource.
    pub async fn claim(&self, limit: usize, lease: Duration) -> ServiceResult<Vec<Claimed>> {
        let now = now_ms();
        let sql = format!(
            "UPDATE deliveries SET lease_until = $1 WHERE seq IN (SELECT d.seq FROM deliveries d \
             WHERE d.status = 'pending' AND d.next_attempt_at <= $2 AND (d.lease_until IS NULL OR d.lease_until < $2) \
             AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.enabled = 1) \
             AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.webhook_id = d.webhook_id \
             AND e.subject_id = d.subject_id AND e.status = 'pending' AND e.seq < d.seq) \
             ORDER BY d.next_attempt_at, d.seq LIMIT {limit}{}) \
             RETURNING seq, id, webhook_id, event_id, event_type, attempts, give_up_at",
            self.db.for_update_skip_locked()
        );
        let mut tx = self.db.begin_write().await?;
        let rows = sqlx::query(&sql).bind(now + millis(lease)).bind(now).fetch_all(&mut *tx).await?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            let (webhook_id, event_id): (String, String) = (row.try_get("webhook_id")?, row.try_get("event_id")?);
            let found =
                sqlx::query("SELECT w.url, w.secret, e.body FROM webhooks w, events e WHERE w.id = $1 AND e.id = $2")
                    .bind(&webhook_id)
                    .bind(&event_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            let Some(found) = found else {
                // The endpoint was deleted meanwhile (its deliveries go with it).
                continue;
            };
            claimed.push(Claimed {
                seq: row.try_get("seq")?,
                id: row.try_get("id")?,
                webhook_id,
                event_id,
                event_type: row.try_get("event_type")?,
                attempts: row.try_get("attempts")?,
                give_up_at_ms: row.try_get("give_up_at")?,
                url: found.try_get("url")?,
                secret: found.try_get("secret")?,
                body: found.try_get("body")?,
            });
        }
        tx.commit().await?;
        claimed.sort_by_key(|claim| claim.seq);
        Ok(claimed)
    }

    /// Records an attempt: delivered on a 2xx; otherwise pending again after `retry_in`, or
    /// failed (and its endpoint failing) when `retry_in` is `None`.
    pub async fn record(&self, claim: &Claimed, attempt: &Attempt, retry_in: Option<Duration>) -> ServiceResult<()> {
        let now = now_ms();
        let delivered = attempt.status_code.is_some_and(|code| (200..300).contains(&code));
        let (status, next) = match (delivered, retry_in) {
            (true, _) => (DeliveryStatus::Delivered, None),
            (false, Some(wait)) => (DeliveryStatus::Pending, Some(now + millis(wait))),
            (false, None) => (DeliveryStatus::Failed, None),
        };
        let mut tx = self.db.begin_write().await?;
        sqlx::query(
            "UPDATE deliveries SET status = $1, attempts = attempts + 1, status_code = $2, duration_ms = $3, \
             error = $4, next_attempt_at = $5, lease_until = NULL, last_attempt_at = $6 WHERE seq = $7",
        )
        .bind(status.as_str())
        .bind(attempt.status_code.map(i64::from))
        .bind(attempt.duration_ms)
        .bind(attempt.error.as_deref())
        .bind(next)
        .bind(now)
        .bind(claim.seq)
        .execute(&mut *tx)
        .await?;
        let endpoint_status = match status {
            DeliveryStatus::Delivered => Some(ACTIVE),
            DeliveryStatus::Failed => Some(FAILING),
            DeliveryStatus::Pending | DeliveryStatus::Held => None,
        };
        if let Some(endpoint_status) = endpoint_status {
            sqlx::query("UPDATE webhooks SET status = $1 WHERE id = $2 AND status <> $1")
                .bind(endpoint_status)
                .bind(&claim.webhook_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Forgets events older than `keep` that no delivery waits for any more.
    pub async fn prune(&self, keep: Duration) -> ServiceResult<u64> {
        let done = sqlx::query(
            "DELETE FROM events WHERE created_at < $1 AND NOT EXISTS \
             (SELECT 1 FROM deliveries d WHERE d.event_id = events.id AND d.status = $2)",
        )
        .bind(now_ms() - millis(keep))
        .bind(DeliveryStatus::Pending.as_str())
        .execute(self.db.pool())
        .await?;
        sqlx::query("DELETE FROM deliveries WHERE status <> $2 AND created_at < $1")
            .bind(now_ms() - millis(keep))
            .bind(DeliveryStatus::Pending.as_str())
            .execute(self.db.pool())
            .await?;
        Ok(done.rows_affected())
    }
}

/// The 409 of what a disabled webhook does not do.
fn disabled(what: &str) -> ServiceError {
    ServiceError::conflict(format!("The webhook is disabled: enable it to {what}"))
        .with_hint("Set `enabled` to true with PUT /v1/webhooks/{webhookId}; its held deliveries are sent then.")
}

/// How many deliveries wait for `webhook_id` (held ones, when it is disabled).
async fn held(conn: &mut AnyConnection, webhook_id: &str) -> ServiceResult<i64> {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM deliveries WHERE webhook_id = $1 AND status = $2")
        .bind(webhook_id)
        .bind(DeliveryStatus::Pending.as_str())
        .fetch_one(conn)
        .await?;
    Ok(row.try_get("n")?)
}

/// A delivery of `event` to `webhook_id` recorded as failed at once with `error`: it was not
/// held. A retry once the webhook is enabled sends it.
async fn insert_failed_delivery(
    conn: &mut AnyConnection,
    webhook_id: &str,
    event: &StoredEvent,
    give_up_at_ms: i64,
    error: &str,
) -> ServiceResult<()> {
    let now = now_ms();
    sqlx::query(
        "INSERT INTO deliveries (id, webhook_id, team_id, event_id, event_type, subject_id, status, attempts, \
         error, give_up_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $10, 0, $7, $8, $9) \
         ON CONFLICT (webhook_id, event_id) DO NOTHING",
    )
    .bind(uuid::Uuid::now_v7().to_string())
    .bind(webhook_id)
    .bind(&event.team_id)
    .bind(&event.id)
    .bind(&event.kind)
    .bind(&event.subject_id)
    .bind(error)
    .bind(give_up_at_ms)
    .bind(now)
    .bind(DeliveryStatus::Failed.as_str())
    .execute(conn)
    .await?;
    Ok(())
}

async fn webhook_in(conn: &mut AnyConnection, team_id: &str, webhook_id: &str) -> ServiceResult<Webhook> {
    let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE team_id = $1 AND id = $2");
    let row = sqlx::query(&sql).bind(team_id).bind(webhook_id).fetch_optional(conn).await?;
    Ok(webhook_from_row(&row.ok_or_else(webhook_not_found)?)?)
}

async fn delivery_in(
    conn: &mut AnyConnection,
    team_id: &str,
    webhook_id: &str,
    delivery_id: &str,
) -> ServiceResult<Delivery> {
    let enabled = webhook_in(&mut *conn, team_id, webhook_id).await?.enabled;
    let sql = format!("SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE team_id = $1 AND webhook_id = $2 AND id = $3");
    let row = sqlx::query(&sql).bind(team_id).bind(webhook_id).bind(delivery_id).fetch_optional(conn).await?;
    Ok(delivery_from_row(&row.ok_or_else(delivery_not_found)?, enabled)?)
}

/// Stores `event` received at `now`; false when an event of that id is stored already (a
/// relay that published it before).
async fn insert_event(conn: &mut AnyConnection, event: &StoredEvent, now: i64) -> ServiceResult<bool> {
    let inserted = sqlx::query(
        "INSERT INTO events (id, team_id, type, subject_id, body, occurred_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
    )
    .bind(&event.id)
    .bind(&event.team_id)
    .bind(&event.kind)
    .bind(&event.subject_id)
    .bind(&event.body)
    .bind(event.occurred_at_ms)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() > 0)
}

/// A pending delivery of `event` to `webhook_id`, due now; its id.
async fn insert_delivery(
    conn: &mut AnyConnection,
    webhook_id: &str,
    event: &StoredEvent,
    give_up_at_ms: i64,
) -> ServiceResult<String> {
    let id = uuid::Uuid::now_v7().to_string();
    let now = now_ms();
    sqlx::query(
        "INSERT INTO deliveries (id, webhook_id, team_id, event_id, event_type, subject_id, status, attempts, \
         next_attempt_at, give_up_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $9, 0, $7, $8, $7) \
         ON CONFLICT (webhook_id, event_id) DO NOTHING",
    )
    .bind(&id)
    .bind(webhook_id)
    .bind(&event.team_id)
    .bind(&event.id)
    .bind(&event.kind)
    .bind(&event.subject_id)
    .bind(now)
    .bind(give_up_at_ms)
    .bind(DeliveryStatus::Pending.as_str())
    .execute(conn)
    .await?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use switchboard_kit::outbox::TEST_EVENT;
    use switchboard_kit::vocabulary::{DeliveryStatus, EventType, checked_values, listed_values};

    #[test]
    fn events_and_deliveries_take_exactly_the_event_types() {
        let mut all: Vec<String> = EventType::ALL.iter().map(ToString::to_string).collect();
        all.push(TEST_EVENT.to_owned());
        let postgres = include_str!("../migrations/postgres/0003_event_types.sql");
        assert_eq!(checked_values(postgres, "type"), vec![all.clone()]);
        assert_eq!(checked_values(postgres, "event_type"), vec![all.clone()]);
        // SQLite: one trigger for inserts, one for updates, per table.
        let sqlite = include_str!("../migrations/sqlite/0003_event_types.sql");
        assert_eq!(listed_values(sqlite, "NEW.type IN ("), vec![all.clone(), all.clone()]);
        assert_eq!(listed_values(sqlite, "NEW.event_type IN ("), vec![all.clone(), all]);
    }

    #[test]
    fn the_deliveries_table_allows_exactly_the_stored_delivery_statuses() {
        let stored: Vec<String> = DeliveryStatus::STORED.iter().map(ToString::to_string).collect();
        for sql in [
            include_str!("../migrations/sqlite/0001_webhooks.sql"),
            include_str!("../migrations/postgres/0001_webhooks.sql"),
        ] {
            // The webhooks' own status, then the deliveries'.
            assert_eq!(checked_values(sql, "status")[1], stored);
        }
    }
}
