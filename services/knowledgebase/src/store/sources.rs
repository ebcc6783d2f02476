//! What webpages and documents share as sources of extracted entries: their kind, whose they
//! are, a partial change of one, and the URL check.

use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, limits, validate};

pub(crate) use super::extracted::Owner;
pub use super::extracted::SourceKind;
use super::{KnowledgeStore, check_ids, extracted};

/// An absolute http or https URL with a host, within [`limits::URL`].
pub fn url_violation(url: &str) -> Option<FieldViolation> {
    let problem = || Some(FieldViolation::new("url", "must be an absolute http or https URL"));
    if let Some(violation) = limits::URL.check("url", url) {
        return Some(violation);
    }
    match url::Url::parse(url.trim()) {
        Ok(parsed)
            if matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some_and(|h| !h.is_empty()) =>
        {
            None
        }
        _ => problem(),
    }
}

/// A partial change of a webpage or document: `None` keeps the value.
#[derive(Debug, Clone, Default)]
pub struct SourcePatch {
    pub name: Option<String>,
    pub url: Option<String>,
    /// `Some(None)` clears the notes.
    pub notes: Option<Option<String>>,
    /// Webpages only.
    pub refresh_interval: Option<RefreshInterval>,
}

impl SourcePatch {
    pub(crate) fn validate(&self) -> ServiceResult<()> {
        validate([
            self.name.as_deref().and_then(|name| limits::NAME.check("name", name)),
            self.url.as_deref().and_then(url_violation),
            self.notes.as_ref().and_then(|notes| notes.as_deref()).and_then(|n| limits::NOTES.check("notes", n)),
        ])
    }
}

/// How often the service refreshes a page itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RefreshInterval {
    #[default]
    Off,
    Daily,
    Weekly,
}

impl RefreshInterval {
    pub fn as_str(self) -> &'static str {
        match self {
            RefreshInterval::Off => "off",
            RefreshInterval::Daily => "daily",
            RefreshInterval::Weekly => "weekly",
        }
    }

    /// `off`, `daily` or `weekly`; anything else is a 400 on `refreshInterval`.
    pub fn parse(text: &str) -> ServiceResult<Self> {
        match text {
            "off" => Ok(RefreshInterval::Off),
            "daily" => Ok(RefreshInterval::Daily),
            "weekly" => Ok(RefreshInterval::Weekly),
            _ => Err(ServiceError::invalid_field("refreshInterval", "must be off, daily or weekly")),
        }
    }

    /// Refresh days between two scheduled refreshes.
    pub(super) fn days(self) -> Option<i64> {
        match self {
            RefreshInterval::Off => None,
            RefreshInterval::Daily => Some(1),
            RefreshInterval::Weekly => Some(7),
        }
    }
}

/// A kind of source as its rows are read: what webpages and documents share in the store.
pub(crate) trait Source: Sized {
    const KIND: SourceKind;
    /// Its columns, its table aliased [`Source::ALIAS`].
    const COLUMNS: &'static str;
    const ALIAS: &'static str;
    /// Its id's name in requests and violations (`webpageId`).
    const ID_FIELD: &'static str;

    /// The row as the service answers it; `day_ms` is the refresh day (webpages count their
    /// next refresh in it).
    fn from_row(row: &AnyRow, day_ms: i64) -> Result<Self, sqlx::Error>;
    fn not_found() -> ServiceError;
}

impl KnowledgeStore {
    /// The source of the team's knowledge base, or 404 (the knowledge base's own 404 first).
    pub(crate) async fn source<S: Source>(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        source_id: &str,
    ) -> ServiceResult<S> {
        check_ids(&[("teamId", team_id), ("knowledgebaseId", knowledgebase_id), (S::ID_FIELD, source_id)])?;
        self.knowledgebase(team_id, knowledgebase_id).await?;
        let (alias, table) = (S::ALIAS, S::KIND.table());
        let row = sqlx::query(&format!(
            "SELECT {} FROM {table} {alias} WHERE {alias}.id = $1 AND {alias}.knowledgebase_id = $2 \
             AND {alias}.team_id = $3",
            S::COLUMNS
        ))
        .bind(source_id)
        .bind(knowledgebase_id)
        .bind(team_id)
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(S::not_found)?;
        Ok(S::from_row(&row, self.refresh_day_ms)?)
    }

    /// The knowledge base's sources of one kind, oldest first.
    pub(crate) async fn sources<S: Source>(&self, team_id: &str, knowledgebase_id: &str) -> ServiceResult<Vec<S>> {
        let (alias, table) = (S::ALIAS, S::KIND.table());
        let rows = sqlx::query(&format!(
            "SELECT {} FROM {table} {alias} WHERE {alias}.knowledgebase_id = $1 AND {alias}.team_id = $2 \
             ORDER BY {alias}.created_at, {alias}.id",
            S::COLUMNS
        ))
        .bind(knowledgebase_id)
        .bind(team_id)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.iter().map(|row| S::from_row(row, self.refresh_day_ms)).collect::<Result<_, _>>()?)
    }
}

/// A source by id alone, read in the caller's transaction (for its event).
pub(super) async fn source_in<S: Source>(conn: &mut AnyConnection, source_id: &str, day_ms: i64) -> ServiceResult<S> {
    let (alias, table) = (S::ALIAS, S::KIND.table());
    let row = sqlx::query(&format!("SELECT {} FROM {table} {alias} WHERE {alias}.id = $1", S::COLUMNS))
        .bind(source_id)
        .fetch_optional(conn)
        .await?
        .ok_or_else(S::not_found)?;
    Ok(S::from_row(&row, day_ms)?)
}

/// Removes a source's entries (they leave the index through the outbox) and its row, in the
/// caller's transaction.
pub(super) async fn remove_source(conn: &mut AnyConnection, owner: &Owner<'_>) -> ServiceResult<()> {
    extracted::remove_entries(conn, owner).await?;
    sqlx::query(&format!("DELETE FROM {} WHERE id = $1 AND team_id = $2", owner.kind.table()))
        .bind(owner.source_id)
        .bind(owner.team_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use switchboard_kit::vocabulary::{SourceStatus, checked_values};

    #[test]
    fn the_tables_allow_exactly_the_source_statuses() {
        let all: Vec<String> = SourceStatus::ALL.iter().map(ToString::to_string).collect();
        let documents: Vec<String> =
            all.iter().filter(|status| *status != SourceStatus::Refreshing.as_str()).cloned().collect();
        for sql in [
            include_str!("../../migrations/sqlite/0002_sources.sql"),
            include_str!("../../migrations/postgres/0002_sources.sql"),
        ] {
            // Webpages, then documents (which are never refreshing).
            assert_eq!(checked_values(sql, "status"), vec![all.clone(), documents.clone()]);
        }
    }
}
