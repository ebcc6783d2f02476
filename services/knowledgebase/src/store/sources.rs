//! What webpages and documents share as sources of extracted entries: their kind, whose they
//! are, a partial change of one, and the URL check.

use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, limits, validate};

/// Where extracted entries come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Webpage,
    Document,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Webpage => "webpage",
            SourceKind::Document => "document",
        }
    }

    /// The column set when the source's content was last rebuilt.
    pub(crate) fn rebuilt_column(self) -> &'static str {
        match self {
            SourceKind::Webpage => "last_scraped_at",
            SourceKind::Document => "extracted_at",
        }
    }

    pub(crate) fn table(self) -> &'static str {
        match self {
            SourceKind::Webpage => "webpages",
            SourceKind::Document => "documents",
        }
    }
}

/// Who a source belongs to.
pub(crate) struct Owner<'a> {
    pub team_id: &'a str,
    pub knowledgebase_id: &'a str,
    pub kind: SourceKind,
    pub source_id: &'a str,
}

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
