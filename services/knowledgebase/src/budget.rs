//! The encoder is shared by every team, and what a team asks of it is measured in passages
//! (`passages.rs`): an answer of 50,000 characters can make about 200, each up to the model's
//! 256 tokens. Before issue 53 a bulk create of four such answers held both cores of a small
//! machine for more than a minute, at no cost and within every request limit.
//!
//! So every path that embeds for a team counts the passages it is about to embed, once they are
//! known and before the model is asked: a request (a single or bulk create, an update that
//! changes the text) of more than [`EmbeddingBudget::per_request`] passages is refused whole
//! (413), and one that would take the team past its passages a minute is refused whole (429, with
//! when the budget is full again). Background ingestion (webpages, documents) has no client to
//! answer: it waits for the budget instead. Searches' queries are not counted: a query is one
//! passage of at most 2,000 characters, and each costs a credit and counts in the `search` rate
//! class.

use std::sync::Arc;
use std::time::Duration;

use switchboard_kit::redis_client::RedisClient;
use switchboard_kit::window_budget::WindowBudget;
use switchboard_kit::{ErrorKind, FieldViolation, ServiceError, ServiceResult, limits};

/// The Redis key of a team's count is `switchboard:embed-passages:{team id}`.
const KEY_PREFIX: &str = "switchboard:embed-passages";

#[derive(Debug, Clone)]
pub struct BudgetSettings {
    /// `SWITCHBOARD_EMBED_PASSAGES_PER_REQUEST`.
    pub per_request: i64,
    /// `SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE`.
    pub per_minute: i64,
    /// One minute; `SWITCHBOARD_EMBED_BUDGET_WINDOW_MS` shortens it for tests.
    pub window_ms: i64,
    /// The platform's Redis (`REDIS_URL`), shared by every replica; without it each replica
    /// counts alone.
    pub redis_url: Option<String>,
    pub redis_timeout: Duration,
}

impl Default for BudgetSettings {
    fn default() -> Self {
        Self {
            per_request: limits::EMBED_PASSAGES_PER_REQUEST,
            per_minute: limits::EMBED_PASSAGES_PER_MINUTE,
            window_ms: 60_000,
            redis_url: None,
            redis_timeout: switchboard_kit::redis_client::DEFAULT_TIMEOUT,
        }
    }
}

pub struct EmbeddingBudget {
    per_request: i64,
    window: WindowBudget,
}

impl EmbeddingBudget {
    /// Connects to Redis lazily: a Redis that is down at start is tried again at later takes.
    pub fn open(settings: &BudgetSettings) -> anyhow::Result<Self> {
        let redis = match &settings.redis_url {
            Some(url) => {
                let fallback = "embedding budgets are counted per knowledgebase replica";
                Some(RedisClient::connect(url, settings.redis_timeout, fallback)?)
            }
            None => None,
        };
        Ok(Self::new(settings, redis))
    }

    pub fn new(settings: &BudgetSettings, redis: Option<Arc<RedisClient>>) -> Self {
        let per_minute = settings.per_minute.max(1);
        Self {
            // A request larger than the minute's budget could never be granted.
            per_request: settings.per_request.clamp(1, per_minute),
            window: WindowBudget::new(KEY_PREFIX, per_minute, settings.window_ms, redis),
        }
    }

    /// The most passages one request may make.
    pub fn per_request(&self) -> i64 {
        self.window.limit().min(self.per_request)
    }

    /// Spends `passages` of the team's budget for a request whose input is `field` (what the
    /// 413 names), or refuses the request whole: 413 over the per-request bound, 429 when the
    /// team's minute has too few passages left.
    pub async fn spend(&self, team_id: &str, passages: usize, field: &str) -> ServiceResult<()> {
        let count = i64::try_from(passages).unwrap_or(i64::MAX);
        if count == 0 {
            return Ok(());
        }
        let bound = self.per_request();
        if count > bound {
            let message = format!("The request makes {count} passages to embed; at most {bound} a request");
            let mut error = ServiceError::new(ErrorKind::PayloadTooLarge, message).with_hint(
                "Send the references in several requests: an answer is embedded as one passage per 128 words.",
            );
            error.details =
                vec![FieldViolation::new(field, format!("make {count} passages; at most {bound} a request"))];
            return Err(error);
        }
        let take = self.window.take(team_id, count).await;
        if take.granted {
            return Ok(());
        }
        let limit = self.window.limit();
        let message = format!(
            "The team's embedding budget is spent: {} of {limit} passages used this minute, and this request makes \
             {count}",
            take.used
        );
        Err(ServiceError::limited_until(message, take.reset_at_ms)
            .with_hint("Retry when the minute is over (`retryAfter`), or send fewer or shorter references."))
    }

    /// Spends `passages` for background work of the team (a webpage's or document's entries),
    /// waiting for the budget as it refills: in parts of at most one request's bound, each
    /// taken as soon as the minute has room for it.
    pub async fn spend_waiting(&self, team_id: &str, passages: usize) {
        let mut left = i64::try_from(passages).unwrap_or(i64::MAX);
        let mut part = self.per_request();
        while left > 0 {
            let want = left.min(part);
            let take = self.window.take(team_id, want).await;
            if take.granted {
                left -= want;
                part = self.per_request();
                continue;
            }
            let room = self.window.limit() - take.used;
            if room > 0 && room < want {
                // What the minute still has is taken now, the rest after it.
                part = room;
                continue;
            }
            let wait = (take.reset_at_ms - switchboard_kit::time::now_ms()).clamp(1, 60_000);
            tracing::debug!(
                team_id,
                left,
                wait_ms = wait,
                "background ingestion waits for the team's embedding budget"
            );
            tokio::time::sleep(Duration::from_millis(wait.unsigned_abs())).await;
            part = self.per_request();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(per_request: i64, per_minute: i64, window_ms: i64) -> EmbeddingBudget {
        let settings = BudgetSettings { per_request, per_minute, window_ms, ..BudgetSettings::default() };
        EmbeddingBudget::new(&settings, None)
    }

    #[tokio::test]
    async fn a_request_over_the_bound_is_413_and_takes_nothing() {
        let budget = budget(5, 10, 60_000);
        let error = budget.spend("a", 6, "references").await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::PayloadTooLarge);
        assert!(error.message.contains('6') && error.message.contains('5'), "{}", error.message);
        assert_eq!(error.details[0].field, "references");
        budget.spend("a", 5, "references").await.unwrap();
        budget.spend("a", 5, "references").await.unwrap();
    }

    #[tokio::test]
    async fn a_spent_budget_is_429_with_the_time_it_refills_and_other_teams_keep_theirs() {
        let budget = budget(10, 10, 60_000);
        budget.spend("a", 8, "references").await.unwrap();
        let error = budget.spend("a", 3, "references").await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::RateLimited);
        let retry_in = error.retry_at_ms.unwrap() - switchboard_kit::time::now_ms();
        assert!((1..=60_000).contains(&retry_in), "{retry_in}");
        assert!(error.message.contains("8 of 10"), "{}", error.message);
        budget.spend("a", 2, "answer").await.unwrap();
        budget.spend("b", 10, "answer").await.unwrap();
    }

    #[test]
    fn the_bound_is_never_above_the_budget() {
        assert_eq!(budget(1_000, 10, 60_000).per_request(), 10);
        assert_eq!(budget(5, 10, 60_000).per_request(), 5);
    }

    #[tokio::test]
    async fn background_work_waits_for_the_budget_and_uses_what_the_window_has_left() {
        let budget = budget(4, 4, 50);
        budget.spend("a", 3, "answer").await.unwrap();
        // 1 left in this window, then 4 in each of the next two: more than a window's budget
        // still goes through, a part a window.
        tokio::time::timeout(Duration::from_secs(10), budget.spend_waiting("a", 9))
            .await
            .expect("the waits end with their windows");
    }
}
