//! The webpages and documents of a knowledge base.

use schemars::JsonSchema;
use serde::Serialize;
use switchboard_kit::vocabulary::SourceStatus;
use switchboard_proto::v1 as proto;

use crate::id::Id;
use crate::references::Reference;
use crate::time::Timestamp;

/// A webpage source of a knowledge base.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Webpage {
    pub id: Id,
    pub name: String,
    #[schemars(extend("format" = "uri"))]
    pub url: String,
    /// Shown to the AI alongside the webpage.
    pub notes: Option<String>,
    /// pending: first scrape queued or running; refreshing: a refresh was accepted; ready; failed
    /// (`failureReason` says why; the entries of the last good scrape stay searchable).
    pub status: SourceStatus,
    /// True while `status` is pending or refreshing.
    pub is_updating: bool,
    /// When the page was last scraped successfully; null before the first success.
    pub last_scraped_at: Option<Timestamp>,
    /// Why the last scrape failed; null otherwise.
    pub failure_reason: Option<String>,
    /// Q&A entries extracted from the page.
    pub entry_count: u64,
    /// How often the page refreshes itself: off, daily or weekly.
    #[schemars(extend("enum" = ["off", "daily", "weekly"]))]
    pub refresh_interval: String,
    /// When its next scheduled refresh is due (it starts within a minute of that, unless a
    /// refresh is running); null when `refreshInterval` is off.
    pub next_refresh_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<&proto::Webpage> for Webpage {
    fn from(webpage: &proto::Webpage) -> Self {
        let status = SourceStatus::of_stored(&webpage.status);
        Self {
            id: Id::stored(webpage.id.clone()),
            name: webpage.name.clone(),
            url: webpage.url.clone(),
            notes: webpage.notes.clone(),
            status,
            is_updating: status.is_updating(),
            last_scraped_at: Timestamp::option(webpage.last_scraped_at_ms),
            failure_reason: webpage.failure_reason.clone(),
            entry_count: u64::try_from(webpage.entry_count).unwrap_or_default(),
            refresh_interval: if webpage.refresh_interval.is_empty() {
                "off".to_owned()
            } else {
                webpage.refresh_interval.clone()
            },
            next_refresh_at: Timestamp::option(webpage.next_refresh_at_ms),
            created_at: Timestamp::from_ms(webpage.created_at_ms),
            updated_at: Timestamp::from_ms(webpage.updated_at_ms),
        }
    }
}

/// A webpage with the Q&A entries extracted from it.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WebpageDetail {
    #[serde(flatten)]
    pub webpage: Webpage,
    /// The extracted entries, in page order.
    pub content: Vec<Reference>,
}

/// A webpage whose refresh was accepted.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WebpageRefresh {
    pub id: Id,
    /// Never null here; the spec allows null, so clients must accept it.
    #[schemars(extend("format" = "uri"))]
    pub url: Option<String>,
    /// Never null here; the spec allows null, so clients must accept it.
    pub name: Option<String>,
    /// `refreshing`: the scrape has been queued.
    pub status: SourceStatus,
}

/// An uploaded document of a knowledge base.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Document {
    pub id: Id,
    /// Display name; the file name unless one was given.
    pub name: String,
    /// Shown to the AI alongside the document.
    pub notes: Option<String>,
    /// The uploaded file's name (without any directory part).
    pub file_name: String,
    /// Known from the file's extension.
    #[schemars(extend("enum" = [
        "text/plain",
        "text/markdown",
        "text/html",
        "application/pdf",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "text/csv",
    ]))]
    pub content_type: String,
    /// File size in bytes.
    pub size: u64,
    /// pending: extraction queued or running; ready; failed (`failureReason` says why).
    pub status: SourceStatus,
    /// True while `status` is pending.
    pub is_updating: bool,
    /// When the text was last extracted; null before that.
    pub extracted_at: Option<Timestamp>,
    /// Why the extraction failed; null otherwise.
    pub failure_reason: Option<String>,
    /// Q&A entries extracted from the document.
    pub entry_count: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<&proto::Document> for Document {
    fn from(document: &proto::Document) -> Self {
        let status = SourceStatus::of_stored(&document.status);
        Self {
            id: Id::stored(document.id.clone()),
            name: document.name.clone(),
            notes: document.notes.clone(),
            file_name: document.file_name.clone(),
            content_type: document.content_type.clone(),
            size: u64::try_from(document.size_bytes).unwrap_or_default(),
            status,
            is_updating: status.is_updating(),
            extracted_at: Timestamp::option(document.extracted_at_ms),
            failure_reason: document.failure_reason.clone(),
            entry_count: u64::try_from(document.entry_count).unwrap_or_default(),
            created_at: Timestamp::from_ms(document.created_at_ms),
            updated_at: Timestamp::from_ms(document.updated_at_ms),
        }
    }
}

/// A document with the Q&A entries extracted from it.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DocumentDetail {
    #[serde(flatten)]
    pub document: Document,
    /// The extracted entries, in document order.
    pub content: Vec<Reference>,
}
