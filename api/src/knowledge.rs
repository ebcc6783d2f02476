//! Knowledge bases, their Q&A entries and search results.

use schemars::JsonSchema;
use serde::Serialize;
use switchboard_proto::v1 as proto;

use crate::agents::AgentRef;
use crate::id::Id;
use crate::references::{EntryType, Reference, ReferenceSource};
use crate::sources::{Document, Webpage};
use crate::time::Timestamp;

/// A knowledge base with its content.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Knowledgebase {
    pub id: Id,
    pub name: Option<String>,
    pub description: Option<String>,
    /// Oldest first.
    pub webpages: Vec<Webpage>,
    /// Oldest first.
    pub documents: Vec<Document>,
    /// Manual references only, oldest first; entries extracted from webpages and documents are
    /// in their source's `content`.
    pub references: Vec<Reference>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<&proto::Knowledgebase> for Knowledgebase {
    fn from(knowledgebase: &proto::Knowledgebase) -> Self {
        Self {
            id: Id::stored(knowledgebase.id.clone()),
            name: knowledgebase.name.clone(),
            description: knowledgebase.description.clone(),
            webpages: knowledgebase.webpages.iter().map(Webpage::from).collect(),
            documents: knowledgebase.documents.iter().map(Document::from).collect(),
            references: knowledgebase.references.iter().map(Reference::from).collect(),
            created_at: Timestamp::from_ms(knowledgebase.created_at_ms),
            updated_at: Timestamp::from_ms(knowledgebase.updated_at_ms),
        }
    }
}

/// How much a knowledge base holds.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct KnowledgebaseCounts {
    pub webpages: u64,
    pub documents: u64,
    /// Manual references only.
    pub references: u64,
}

/// A knowledge base in a list: its counts instead of its content.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct KnowledgebaseSummary {
    pub id: Id,
    pub name: Option<String>,
    pub description: Option<String>,
    pub counts: KnowledgebaseCounts,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<&proto::Knowledgebase> for KnowledgebaseSummary {
    fn from(knowledgebase: &proto::Knowledgebase) -> Self {
        let counts = knowledgebase.counts.unwrap_or_default();
        let count = |n: i64| u64::try_from(n).unwrap_or_default();
        Self {
            id: Id::stored(knowledgebase.id.clone()),
            name: knowledgebase.name.clone(),
            description: knowledgebase.description.clone(),
            counts: KnowledgebaseCounts {
                webpages: count(counts.webpages),
                documents: count(counts.documents),
                references: count(counts.references),
            },
            created_at: Timestamp::from_ms(knowledgebase.created_at_ms),
            updated_at: Timestamp::from_ms(knowledgebase.updated_at_ms),
        }
    }
}

/// An agent and its linked knowledge base.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AgentKnowledgebase {
    pub agent: AgentRef,
    pub knowledgebase: Knowledgebase,
}

/// The matching entry (manual or extracted).
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SearchResultReference {
    pub id: Id,
    pub question: String,
    pub answer: String,
    #[serde(rename = "type")]
    pub kind: EntryType,
    pub source: ReferenceSource,
}

/// One search hit.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SearchResult {
    pub reference: SearchResultReference,
    /// Cosine similarity of the query's embedding and that of the entry's best-matching passage
    /// (at most 1, up to rounding); at least `threshold`.
    pub similarity: f32,
    /// The fused score of meaning and words, from 0 to 1: the results are in descending order
    /// of it (reciprocal rank fusion, divided by the best score possible), so a result can come
    /// before one of higher `similarity`. It is made of ranks, not of how well the texts match:
    /// the first result of almost any query has about 1, whatever it says. Compare results
    /// across queries by `similarity`; show the order by `rank`.
    pub relevance: f32,
    /// The result's place in the answer, from 1 (the results come in this order).
    pub rank: u32,
}

impl SearchResult {
    /// The result at `rank` (from 1) of the answer.
    pub fn ranked(rank: u32, hit: &proto::SearchHit) -> Self {
        let reference = hit.reference.clone().unwrap_or_default();
        Self {
            reference: SearchResultReference {
                id: Id::stored(reference.id),
                question: reference.question,
                answer: reference.answer,
                kind: EntryType::Qa,
                source: ReferenceSource::from(reference.source),
            },
            similarity: hit.similarity,
            relevance: hit.relevance,
            rank,
        }
    }
}

/// About a search.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SearchMeta {
    /// The query run.
    pub query: String,
    pub result_count: u64,
    /// The limit applied.
    pub limit: u32,
    /// The similarity threshold applied.
    pub threshold: f64,
    /// What the search cost.
    pub credits_used: i64,
}

/// About a search through an agent: the search meta with the agent and its knowledge base.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct AgentSearchMeta {
    /// The query run.
    pub query: String,
    pub result_count: u64,
    /// The limit applied.
    pub limit: u32,
    /// The similarity threshold applied.
    pub threshold: f64,
    /// What the search cost.
    pub credits_used: i64,
    pub agent_id: Id,
    /// The spec types it "string or null".
    pub agent_name: Option<String>,
    /// The agent's knowledge base.
    pub knowledgebase_id: Id,
}

/// Search hits, best first.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SearchAnswer {
    pub data: Vec<SearchResult>,
    pub meta: SearchMeta,
}

/// Search hits, best first, and the agent searched through.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AgentSearchAnswer {
    pub data: Vec<SearchResult>,
    pub meta: AgentSearchMeta,
}
