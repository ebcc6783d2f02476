//! The lexical half of a search: BM25 as sparse vectors.
//!
//! One `EdgeBm25` (qdrant-edge's port of the server's `qdrant/bm25`: word tokenizer, English
//! stopwords and Snowball stemmer, murmur3 token ids) makes the vectors for both index
//! backends, so the Qdrant server and the embedded shard score the same terms. A document
//! vector holds BM25's term-frequency part; the inverse document frequency comes from the
//! index (`Modifier::Idf` on the sparse vector), over every point it holds.

use anyhow::anyhow;
use qdrant_edge::bm25_embed::{EdgeBm25, EdgeBm25Config};
use qdrant_edge::external::ordered_float::NotNan;

/// Sparse term weights: token ids and their weights, ids ascending and unique.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Terms {
    pub indices: Vec<u32>,
    pub values: Vec<f32>,
}

impl Terms {
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }
}

/// BM25's length normalisation compares a passage with this many tokens (after stopwords and
/// stemming): about the middle of a full passage (see `passages`). Stored vectors depend on it,
/// so it changes only together with a reindex.
const AVG_LEN: f64 = 80.0;

#[derive(Debug)]
pub struct Lexical(EdgeBm25);

impl Lexical {
    pub fn new() -> anyhow::Result<Self> {
        let config = EdgeBm25Config {
            avg_len: NotNan::new(AVG_LEN).map_err(|e| anyhow!("{e}"))?,
            language: Some("english".to_owned()),
            ..EdgeBm25Config::default()
        };
        Ok(Self(EdgeBm25::new(config).map_err(|e| anyhow!("building the BM25 model: {e}"))?))
    }

    /// The stored vector of a passage.
    pub fn document(&self, text: &str) -> Terms {
        let vector = self.0.embed_document(text);
        Terms { indices: vector.indices, values: vector.values }
    }

    /// The query vector: one per distinct term.
    pub fn query(&self, text: &str) -> Terms {
        let vector = self.0.embed_query(text);
        Terms { indices: vector.indices, values: vector.values }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_drop_and_stems_match() {
        let lexical = Lexical::new().unwrap();
        assert!(lexical.query("the and of").is_empty());
        let document = lexical.document("Refunds are processed within five days");
        let query = lexical.query("refund processing");
        assert_eq!(query.indices.len(), 2);
        assert!(query.indices.iter().all(|id| document.indices.contains(id)), "{document:?} {query:?}");
        assert!(lexical.query("SKU-4471-XB").indices.len() >= 2);
    }
}
