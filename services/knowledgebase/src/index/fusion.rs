//! From the two candidate lists of a search to ranked entries, the same for both backends.
//!
//! Each list is ordered by its own score (ties by entry id, so that both backends and repeated
//! calls agree); an entry's rank in a list is that of its best passage there. Entries are
//! ordered by reciprocal rank fusion, `Σ weight / (k + rank)` over the lists (rank from 1),
//! then by similarity, then by id. An entry's similarity is the best cosine similarity among
//! its passages either list returned, and `threshold` is its floor.
//!
//! An entry's relevance is its fused score divided by the best one possible with the lists
//! that answered (first in each of them), so it runs from 0 to 1 and orders the hits: the
//! number a person is shown beside a result explains why it is where it is.
//!
//! The fusion runs here rather than in Qdrant's `Fusion::Rrf` because a hit is an entry, not a
//! passage: an entry whose lexical match is one passage and whose semantic match is another
//! must get both contributions, and Qdrant fuses by point.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use super::{Candidate, Candidates, Hit};

/// The fusion's settings. The defaults were chosen on the SciFact train split
/// (bench/retrieval.sh, BENCHMARKS.md); `SWITCHBOARD_SEARCH_TUNING` (e.g.
/// `k=60,dense=1,lexical=1,candidates=40`) overrides them for such benchmark runs only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    /// RRF's `k`: larger flattens the difference between the first ranks.
    pub k: f32,
    /// Weight of the dense list.
    pub dense: f32,
    /// Weight of the lexical list.
    pub lexical: f32,
    /// Passages each list contributes, at least (more for a large `limit`, see [`Self::per_list`]).
    pub candidates: usize,
}

impl Default for Tuning {
    fn default() -> Self {
        Self { k: 60.0, dense: 1.0, lexical: 1.0, candidates: 40 }
    }
}

/// The most passages one list contributes.
const MAX_PER_LIST: usize = 200;

impl Tuning {
    pub fn get() -> &'static Tuning {
        static TUNING: OnceLock<Tuning> = OnceLock::new();
        TUNING.get_or_init(|| match std::env::var("SWITCHBOARD_SEARCH_TUNING") {
            Ok(value) => Self::parse(&value).unwrap_or_else(|error| {
                tracing::warn!(%error, "ignoring SWITCHBOARD_SEARCH_TUNING");
                Self::default()
            }),
            Err(_) => Self::default(),
        })
    }

    pub fn parse(value: &str) -> Result<Self, String> {
        fn number<T: std::str::FromStr>(pair: &str, text: &str) -> Result<T, String> {
            text.trim().parse().map_err(|_| format!("{pair:?} is not a number"))
        }
        let mut tuning = Self::default();
        for pair in value.split(',').filter(|pair| !pair.trim().is_empty()) {
            let (key, text) = pair.split_once('=').ok_or_else(|| format!("{pair:?} is not key=value"))?;
            match key.trim() {
                "k" => tuning.k = number(pair, text)?,
                "dense" => tuning.dense = number(pair, text)?,
                "lexical" => tuning.lexical = number(pair, text)?,
                "candidates" => tuning.candidates = number(pair, text)?,
                other => return Err(format!("unknown setting {other:?}")),
            }
        }
        Ok(tuning)
    }

    /// Passages to ask each list for: several per wanted entry, since an entry can fill
    /// several places with its passages.
    pub fn per_list(&self, limit: usize) -> usize {
        limit.saturating_mul(4).max(self.candidates).min(MAX_PER_LIST)
    }
}

struct Fused {
    rrf: f32,
    similarity: f32,
}

pub fn fuse(candidates: &Candidates, tuning: &Tuning, limit: usize, threshold: f32) -> Vec<Hit> {
    let mut entries: HashMap<uuid::Uuid, Fused> = HashMap::new();
    for (list, weight) in [(&candidates.dense, tuning.dense), (&candidates.lexical, tuning.lexical)] {
        let mut list: Vec<&Candidate> = list.iter().collect();
        list.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.entry_id.cmp(&b.entry_id)));
        let mut ranked = HashSet::new();
        for candidate in list {
            let entry = entries.entry(candidate.entry_id).or_insert(Fused { rrf: 0.0, similarity: f32::MIN });
            entry.similarity = entry.similarity.max(candidate.similarity);
            if ranked.insert(candidate.entry_id) {
                entry.rrf += weight / (tuning.k + ranked.len() as f32);
            }
        }
    }
    // The best fused score possible: first in every list that answered (a query of stopwords
    // only has no lexical list, and its best hit is then as relevant as can be).
    let best: f32 = [(&candidates.dense, tuning.dense), (&candidates.lexical, tuning.lexical)]
        .iter()
        .filter(|(list, _)| !list.is_empty())
        .map(|(_, weight)| weight / (tuning.k + 1.0))
        .sum();
    let mut hits: Vec<Hit> = entries
        .into_iter()
        .filter(|(_, fused)| super::reaches(fused.similarity, threshold))
        .map(|(id, fused)| {
            let relevance = if best > 0.0 { (fused.rrf / best).clamp(0.0, 1.0) } else { 0.0 };
            Hit { id, score: fused.similarity, relevance }
        })
        .collect();
    // By relevance (the rounding of the division keeps the fused order, as it is monotonic),
    // then similarity, then id.
    hits.sort_by(|a, b| b.relevance.total_cmp(&a.relevance).then(b.score.total_cmp(&a.score)).then(a.id.cmp(&b.id)));
    hits.truncate(limit);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> uuid::Uuid {
        uuid::Uuid::from_u128(n)
    }

    fn candidate(n: u128, score: f32, similarity: f32) -> Candidate {
        Candidate { entry_id: id(n), score, similarity }
    }

    fn ids(hits: &[Hit]) -> Vec<uuid::Uuid> {
        hits.iter().map(|hit| hit.id).collect()
    }

    #[test]
    fn without_a_lexical_list_the_order_is_by_similarity() {
        let candidates = Candidates {
            dense: vec![candidate(2, 0.5, 0.5), candidate(1, 0.9, 0.9), candidate(3, 0.7, 0.7)],
            lexical: Vec::new(),
        };
        let hits = fuse(&candidates, &Tuning::default(), 10, 0.0);
        assert_eq!(ids(&hits), vec![id(1), id(3), id(2)]);
        assert_eq!(hits[0].score, 0.9);
    }

    #[test]
    fn an_entry_found_by_both_lists_beats_one_found_by_either() {
        let candidates = Candidates {
            dense: vec![candidate(1, 0.9, 0.9), candidate(2, 0.8, 0.8)],
            lexical: vec![candidate(3, 12.0, 0.3), candidate(2, 9.0, 0.8)],
        };
        let hits = fuse(&candidates, &Tuning::default(), 10, 0.0);
        assert_eq!(ids(&hits), vec![id(2), id(1), id(3)]);
    }

    #[test]
    fn passages_count_once_per_list_and_the_best_similarity_is_the_entrys() {
        // Entry 1 holds the three best dense passages; entry 2 is still second, not fourth.
        let candidates = Candidates {
            dense: vec![
                candidate(1, 0.9, 0.9),
                candidate(1, 0.85, 0.85),
                candidate(1, 0.8, 0.8),
                candidate(2, 0.7, 0.7),
            ],
            lexical: vec![candidate(2, 5.0, 0.6)],
        };
        let hits = fuse(&candidates, &Tuning::default(), 10, 0.0);
        assert_eq!(ids(&hits), vec![id(2), id(1)]);
        assert_eq!(hits[0].score, 0.7);
        assert_eq!(hits[1].score, 0.9);
    }

    #[test]
    fn the_threshold_floors_the_entrys_best_similarity_and_limit_cuts() {
        let candidates = Candidates {
            dense: vec![candidate(1, 0.9, 0.9), candidate(2, 0.5, 0.5)],
            lexical: vec![candidate(3, 12.0, 0.2), candidate(2, 11.0, 0.5)],
        };
        assert_eq!(ids(&fuse(&candidates, &Tuning::default(), 10, 0.5)), vec![id(2), id(1)]);
        assert_eq!(ids(&fuse(&candidates, &Tuning::default(), 1, 0.0)), vec![id(2)]);
    }

    #[test]
    fn relevance_orders_the_hits_even_when_similarity_does_not() {
        // Issue 40: entry 3 is far less similar than entry 1 but above it; its relevance says why.
        let candidates = Candidates {
            dense: vec![candidate(1, 0.44, 0.44), candidate(3, 0.19, 0.19)],
            lexical: vec![candidate(3, 12.0, 0.19)],
        };
        let hits = fuse(&candidates, &Tuning::default(), 10, 0.0);
        assert_eq!(ids(&hits), vec![id(3), id(1)]);
        assert!(hits[0].score < hits[1].score);
        assert!(hits.windows(2).all(|pair| pair[0].relevance >= pair[1].relevance), "{hits:?}");
        assert!(hits.iter().all(|hit| (0.0..=1.0).contains(&hit.relevance)), "{hits:?}");
        // Without a lexical list the first by meaning is as relevant as can be.
        let dense_only = Candidates { dense: candidates.dense.clone(), lexical: Vec::new() };
        assert_eq!(fuse(&dense_only, &Tuning::default(), 10, 0.0)[0].relevance, 1.0);
    }

    #[test]
    fn equal_fused_ranks_break_by_similarity_then_id() {
        let candidates = Candidates {
            dense: vec![candidate(5, 0.9, 0.9)],
            lexical: vec![candidate(4, 3.0, 0.9), candidate(9, 3.0, 0.1)],
        };
        // 5 (dense rank 1) and 4 (lexical rank 1) tie on RRF and similarity: the lower id first.
        assert_eq!(ids(&fuse(&candidates, &Tuning::default(), 10, 0.0)), vec![id(4), id(5), id(9)]);
    }

    #[test]
    fn tuning_parses_and_sizes_the_lists() {
        let tuning = Tuning::parse("k=20, lexical=0.5,candidates=60").unwrap();
        assert_eq!(tuning, Tuning { k: 20.0, dense: 1.0, lexical: 0.5, candidates: 60 });
        assert!(Tuning::parse("k=x").is_err());
        assert!(Tuning::parse("depth=3").is_err());
        assert_eq!(Tuning::default().per_list(5), 40);
        assert_eq!(Tuning::default().per_list(20), 80);
        assert_eq!(Tuning::default().per_list(1000), MAX_PER_LIST);
    }
}
