//! Webpage sources and their refresh rule: at most one refresh per page per 24 hours, never
//! while a scrape is under way. The rule is one conditional UPDATE, so that of two
//! simultaneous refreshes exactly one wins.

use sqlx::Row;
use sqlx::any::AnyRow;
use switchboard_kit::jobs::{self, NewJob};
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::SourceStatus;
use switchboard_kit::{ServiceError, ServiceResult, limits, validate};
use switchboard_proto::v1::Webpage;

use super::sources::{Owner, RefreshInterval, Source, SourceKind, SourcePatch, remove_source, url_violation};
use super::{KnowledgeStore, check_ids, knowledgebase_not_found};

pub const SCRAPE_WEBPAGE: &str = "scrape_webpage";
pub const REFRESH_INTERVAL_MS: i64 = 24 * 60 * 60 * 1000;
/// A scrape is tried this often before the page is left `failed`.
const SCRAPE_ATTEMPTS: i64 = 4;

const WEBPAGE_COLUMNS: &str = "w.id, w.team_id, w.knowledgebase_id, w.name, w.url, w.notes, w.status, \
     w.failure_reason, w.last_scraped_at, w.last_refresh_requested_at, w.created_at, w.updated_at, w.refresh_interval, \
     (SELECT COUNT(*) FROM entries e WHERE e.source_id = w.id AND e.source_type = 'webpage') AS entry_count";

fn webpage_not_found() -> ServiceError {
    ServiceError::not_found("Webpage not found")
}

/// A page whose scheduled refresh is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledRefresh {
    pub team_id: String,
    pub knowledgebase_id: String,
    pub webpage_id: String,
}

fn webpage_from_row(row: &AnyRow, day_ms: i64) -> Result<Webpage, sqlx::Error> {
    let refresh_interval: String = row.try_get("refresh_interval")?;
    let last_refresh: Option<i64> = row.try_get("last_refresh_requested_at")?;
    let created_at: i64 = row.try_get("created_at")?;
    let next_refresh_at_ms = RefreshInterval::parse(&refresh_interval)
        .ok()
        .and_then(RefreshInterval::days)
        .map(|days| last_refresh.unwrap_or(created_at) + days * day_ms);
    Ok(Webpage {
        refresh_interval,
        next_refresh_at_ms,
        id: row.try_get("id")?,
        knowledgebase_id: row.try_get("knowledgebase_id")?,
        name: row.try_get("name")?,
        url: row.try_get("url")?,
        notes: row.try_get("notes")?,
        status: row.try_get("status")?,
        failure_reason: row.try_get("failure_reason")?,
        last_scraped_at_ms: row.try_get("last_scraped_at")?,
        last_refresh_requested_at_ms: last_refresh,
        created_at_ms: created_at,
        updated_at_ms: row.try_get("updated_at")?,
        content: Vec::new(),
        entry_count: row.try_get("entry_count")?,
    })
}

/// The page a URL names, for telling duplicates apart (issue 40): parsed, so that the scheme and
/// host are lowercase and a default port is dropped, and without its `#fragment`, which a browser
/// never sends. The path keeps its case and a trailing slash (`/faq` and `/faq/` may be different
/// pages to a server), and the query is kept. A URL that does not parse is its trimmed text.
pub fn page_key(url: &str) -> String {
    match url::Url::parse(url.trim()) {
        Ok(mut parsed) => {
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => url.trim().to_owned(),
    }
}

fn duplicate_page(existing: &str) -> ServiceError {
    ServiceError::conflict("This knowledge base already has a webpage with this URL").with_hint(format!(
        "It is {existing}: a URL that differs only by its #fragment (or the case of its host) is the same page. \
         Refresh that webpage instead."
    ))
}

impl KnowledgeStore {
    /// Adds a page and queues its first scrape in the same transaction.
    pub async fn create_webpage(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        name: &str,
        url: &str,
        notes: Option<&str>,
        refresh_interval: RefreshInterval,
    ) -> ServiceResult<Webpage> {
        check_ids(&[("teamId", team_id), ("knowledgebaseId", knowledgebase_id)])?;
        validate([
            limits::NAME.check("name", name),
            url_violation(url),
            notes.and_then(|n| limits::NOTES.check("notes", n)),
        ])?;
        let id = uuid::Uuid::now_v7().to_string();
        let now = now_ms();
        let mut tx = self.db.begin_write().await?;
        self.knowledgebase_in(&mut tx, team_id, knowledgebase_id).await?;
        self.refuse_duplicate_page(&mut tx, team_id, knowledgebase_id, url, None).await?;
        sqlx::query(
            "INSERT INTO webpages (id, team_id, knowledgebase_id, name, url, notes, status, created_at, updated_at, \
             refresh_interval) VALUES ($1, $2, $3, $4, $5, $6, $9, $7, $7, $8)",
        )
        .bind(&id)
        .bind(team_id)
        .bind(knowledgebase_id)
        .bind(name.trim())
        .bind(url.trim())
        .bind(notes)
        .bind(now)
        .bind(refresh_interval.as_str())
        .bind(SourceStatus::Pending.as_str())
        .execute(&mut *tx)
        .await?;
        enqueue_scrape(&mut tx, team_id, &id).await?;
        tx.commit().await?;
        self.webpage(team_id, knowledgebase_id, &id).await
    }

    pub async fn webpage(&self, team_id: &str, knowledgebase_id: &str, webpage_id: &str) -> ServiceResult<Webpage> {
        self.source(team_id, knowledgebase_id, webpage_id).await
    }

    /// The knowledge base's pages, oldest first.
    pub async fn webpages(&self, team_id: &str, knowledgebase_id: &str) -> ServiceResult<Vec<Webpage>> {
        self.sources(team_id, knowledgebase_id).await
    }

    /// A page by id alone, for the scrape job (`None` once it is deleted).
    pub async fn webpage_by_id(&self, webpage_id: &str) -> ServiceResult<Option<(Webpage, String)>> {
        let row = sqlx::query(&format!("SELECT {WEBPAGE_COLUMNS} FROM webpages w WHERE w.id = $1"))
            .bind(webpage_id)
            .fetch_optional(self.db.pool())
            .await?;
        row.map(|row| Ok((webpage_from_row(&row, self.refresh_day_ms)?, row.try_get::<String, _>("team_id")?)))
            .transpose()
    }

    /// Changes name, url and notes; a new url is not scraped until the next refresh.
    pub async fn update_webpage(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        webpage_id: &str,
        patch: &SourcePatch,
    ) -> ServiceResult<Webpage> {
        patch.validate()?;
        self.webpage(team_id, knowledgebase_id, webpage_id).await?;
        let mut tx = self.db.begin_write().await?;
        if let Some(url) = patch.url.as_deref() {
            self.refuse_duplicate_page(&mut tx, team_id, knowledgebase_id, url, Some(webpage_id)).await?;
        }
        sqlx::query(
            "UPDATE webpages SET name = COALESCE($1, name), url = COALESCE($2, url), \
             notes = CASE WHEN $3 = 1 THEN $4 ELSE notes END, updated_at = $5, \
             refresh_interval = COALESCE($8, refresh_interval) WHERE id = $6 AND team_id = $7",
        )
        .bind(patch.name.as_deref().map(str::trim))
        .bind(patch.url.as_deref().map(str::trim))
        .bind(i64::from(patch.notes.is_some()))
        .bind(patch.notes.clone().flatten())
        .bind(now_ms())
        .bind(webpage_id)
        .bind(team_id)
        .bind(patch.refresh_interval.map(RefreshInterval::as_str))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.webpage(team_id, knowledgebase_id, webpage_id).await
    }

    /// Removes the page and its entries (they leave the index through the outbox).
    pub async fn delete_webpage(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        webpage_id: &str,
    ) -> ServiceResult<Webpage> {
        let webpage = self.webpage(team_id, knowledgebase_id, webpage_id).await?;
        let mut tx = self.db.begin_write().await?;
        let owner = Owner { team_id, knowledgebase_id, kind: SourceKind::Webpage, source_id: webpage_id };
        remove_source(&mut tx, &owner).await?;
        tx.commit().await?;
        Ok(webpage)
    }

    /// The spec's refresh at time `now`: 409 while a scrape is under way, 429 (with the time
    /// it is allowed again) within 24 hours of the last accepted refresh, else the page
    /// turns `refreshing` and a scrape is queued.
    pub async fn request_refresh(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        webpage_id: &str,
        now: i64,
    ) -> ServiceResult<Webpage> {
        self.webpage(team_id, knowledgebase_id, webpage_id).await?;
        let mut tx = self.db.begin_write().await?;
        let accepted = sqlx::query(
            "UPDATE webpages SET status = $5, last_refresh_requested_at = $1, updated_at = $1 \
             WHERE id = $2 AND team_id = $3 AND status NOT IN ($6, $5) \
             AND (last_refresh_requested_at IS NULL OR last_refresh_requested_at <= $4)",
        )
        .bind(now)
        .bind(webpage_id)
        .bind(team_id)
        .bind(now - self.refresh_day_ms)
        .bind(SourceStatus::Refreshing.as_str())
        .bind(SourceStatus::Pending.as_str())
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if accepted {
            enqueue_scrape(&mut tx, team_id, webpage_id).await?;
            tx.commit().await?;
            return self.webpage(team_id, knowledgebase_id, webpage_id).await;
        }
        tx.rollback().await?;
        let current = self.webpage(team_id, knowledgebase_id, webpage_id).await?;
        if SourceStatus::of_stored(&current.status).is_updating() {
            return Err(ServiceError::conflict("Webpage is already being refreshed")
                .with_hint("Wait for the current refresh to finish; its status turns ready or failed."));
        }
        let next = current.last_refresh_requested_at_ms.unwrap_or(now) + self.refresh_day_ms;
        Err(ServiceError::limited_until("Webpage was refreshed within the last 24 hours", next)
            .with_hint("A webpage can be refreshed once every 24 hours; see nextAvailableAt."))
    }

    /// Pages whose scheduled refresh is due at `now` (at most `limit`), longest overdue first:
    /// a schedule set, no scrape under way, and a day (daily) or seven (weekly) since the
    /// last refresh, or since the page was added.
    pub async fn due_refreshes(&self, now: i64, limit: i64) -> ServiceResult<Vec<ScheduledRefresh>> {
        let rows = sqlx::query(
            "SELECT team_id, knowledgebase_id, id FROM webpages \
             WHERE refresh_interval <> 'off' AND status NOT IN ($4, $5) \
             AND ((refresh_interval = 'daily' AND COALESCE(last_refresh_requested_at, created_at) <= $1) \
               OR (refresh_interval = 'weekly' AND COALESCE(last_refresh_requested_at, created_at) <= $2)) \
             ORDER BY COALESCE(last_refresh_requested_at, created_at), id LIMIT $3",
        )
        .bind(now - self.refresh_day_ms)
        .bind(now - 7 * self.refresh_day_ms)
        .bind(limit)
        .bind(SourceStatus::Pending.as_str())
        .bind(SourceStatus::Refreshing.as_str())
        .fetch_all(self.db.pool())
        .await?;
        rows.iter()
            .map(|row| {
                Ok(ScheduledRefresh {
                    team_id: row.try_get("team_id")?,
                    knowledgebase_id: row.try_get("knowledgebase_id")?,
                    webpage_id: row.try_get("id")?,
                })
            })
            .collect()
    }

    /// A 409 when another webpage of the knowledge base names the same page as `url` (see
    /// [`page_key`]); `except` is the webpage being changed. The check and the write that follows
    /// are serialised per knowledge base, so two adds of one page at once cannot both pass.
    async fn refuse_duplicate_page(
        &self,
        tx: &mut sqlx::AnyConnection,
        team_id: &str,
        knowledgebase_id: &str,
        url: &str,
        except: Option<&str>,
    ) -> ServiceResult<()> {
        self.db.lock_scope(tx, &format!("webpages:{knowledgebase_id}")).await?;
        let key = page_key(url);
        let rows = sqlx::query("SELECT id, url FROM webpages WHERE knowledgebase_id = $1 AND team_id = $2")
            .bind(knowledgebase_id)
            .bind(team_id)
            .fetch_all(&mut *tx)
            .await?;
        for row in rows {
            let (id, existing): (String, String) = (row.try_get("id")?, row.try_get("url")?);
            if Some(id.as_str()) != except && page_key(&existing) == key {
                return Err(duplicate_page(&existing));
            }
        }
        Ok(())
    }

    /// The knowledge base exists for the team, checked inside a write.
    pub(crate) async fn knowledgebase_in(
        &self,
        conn: &mut sqlx::AnyConnection,
        team_id: &str,
        knowledgebase_id: &str,
    ) -> ServiceResult<()> {
        sqlx::query("SELECT id FROM knowledgebases WHERE id = $1 AND team_id = $2")
            .bind(knowledgebase_id)
            .bind(team_id)
            .fetch_optional(conn)
            .await?
            .ok_or_else(knowledgebase_not_found)?;
        Ok(())
    }
}

async fn enqueue_scrape(conn: &mut sqlx::AnyConnection, team_id: &str, webpage_id: &str) -> ServiceResult<()> {
    jobs::enqueue(
        conn,
        NewJob {
            kind: SCRAPE_WEBPAGE,
            team_id,
            subject_id: webpage_id,
            payload: serde_json::json!({ "webpageId": webpage_id }),
            max_attempts: SCRAPE_ATTEMPTS,
        },
    )
    .await?;
    Ok(())
}

impl Source for Webpage {
    const KIND: SourceKind = SourceKind::Webpage;
    const COLUMNS: &'static str = WEBPAGE_COLUMNS;
    const ALIAS: &'static str = "w";
    const ID_FIELD: &'static str = "webpageId";

    fn from_row(row: &AnyRow, day_ms: i64) -> Result<Self, sqlx::Error> {
        webpage_from_row(row, day_ms)
    }

    fn not_found() -> ServiceError {
        webpage_not_found()
    }
}

#[cfg(test)]
mod tests {
    use super::page_key;

    #[test]
    fn a_page_is_its_url_without_the_fragment_and_with_a_lowercase_host() {
        let faq = page_key("https://example.com/faq");
        for same in [
            "https://example.com/faq#2",
            "HTTPS://Example.COM/faq#top",
            "https://example.com:443/faq",
            " https://example.com/faq ",
        ] {
            assert_eq!(page_key(same), faq, "{same}");
        }
        for other in [
            "https://example.com/faq/",
            "https://example.com/FAQ",
            "https://example.com/faq?page=2",
            "http://example.com/faq",
        ] {
            assert_ne!(page_key(other), faq, "{other}");
        }
        assert_eq!(page_key("https://example.com"), page_key("https://example.com/#top"));
    }
}
