#![allow(clippy::unwrap_used)]
//! How hybrid search ranks, with the real all-MiniLM-L6-v2 model, the real BM25 vectors and
//! passages, on the embedded index and (when `SWITCHBOARD_TEST_QDRANT_URL` names one) on a
//! Qdrant server: what the lexical half finds that the dense half alone misses, a fact near the
//! end of a long entry, the same order from both backends, and `threshold` as the floor.

use std::sync::{Arc, OnceLock};

use switchboard_knowledgebase::embed::{self, BertEmbedder, Embedder};
use switchboard_knowledgebase::index::{EdgeIndex, Hit, RemoteIndex, SearchQuery, VectorIndex};
use switchboard_knowledgebase::lexical::Lexical;
use switchboard_knowledgebase::passages::{self, embed_entries};
use switchboard_knowledgebase::store::{EntryText, IndexedEntry};
use switchboard_knowledgebase::sync::entry_points;
use uuid::Uuid;

const KB: &str = "kb-ranking";

fn model() -> Arc<BertEmbedder> {
    static MODEL: OnceLock<Arc<BertEmbedder>> = OnceLock::new();
    MODEL
        .get_or_init(|| Arc::new(BertEmbedder::load(&embed::default_model_dir()).unwrap_or_else(|e| panic!("{e:#}"))))
        .clone()
}

/// A support knowledge base where the part list and the staff entry hold a code and a surname
/// among other words, while other entries say what such questions mean; and one long entry
/// whose last line holds a fact.
fn corpus() -> Vec<(&'static str, String)> {
    let filler = "Our office follows the building rules for visitors, deliveries and quiet hours. \
                  Meeting rooms are booked through reception and cleaned every evening. ";
    vec![
        (
            "Which parts make up the countertop purifier?",
            "The housing is FX-2210-QB, the carbon cartridge FX-4471-ZQ, the sediment pre-filter FX-9034-LM \
             and the seal FX-5518-TR."
                .into(),
        ),
        ("What do spare components cost?", "Spare components cost between 5 and 40 euros each.".into()),
        ("Can I order a single cartridge?", "Cartridges are sold in packs of three only.".into()),
        ("Who handles deliveries?", "Tomasz Wierzbicki-Lund looks after delivery delays and lost parcels.".into()),
        ("Can I call somebody?", "Yes: our hotline takes calls on weekdays from eight to six.".into()),
        ("Who answers billing questions?", "The accounts team answers invoices and refunds by e-mail.".into()),
        (
            "What should new tenants know about the building?",
            format!(
                "{}The spare key to the bicycle storage room is kept in the red lockbox behind the security desk.",
                filler.repeat(12)
            ),
        ),
        ("Do you ship abroad?", "We ship to every country in the European Union within five days.".into()),
    ]
}

struct Indexed {
    ids: Vec<Uuid>,
    long_entry: Uuid,
}

async fn fill(index: &dyn VectorIndex, lexical: &Lexical) -> Indexed {
    let model = model();
    let corpus = corpus();
    let texts: Vec<EntryText> =
        corpus.iter().map(|(q, a)| EntryText { question: (*q).to_owned(), answer: a.clone() }).collect();
    let vectors = embed_entries(model.as_ref(), switchboard_knowledgebase::embed::NO_TEAM, &texts).await.unwrap();
    // Fixed ids, so that ties break the same way in every run and on both backends.
    let ids: Vec<Uuid> = (1..=texts.len() as u128).map(|n| Uuid::from_u128(n << 8)).collect();
    let mut points = Vec::new();
    for ((text, embedding), id) in texts.iter().zip(vectors).zip(&ids) {
        let entry = IndexedEntry {
            id: id.to_string(),
            knowledgebase_id: KB.to_owned(),
            team_id: "team".to_owned(),
            text: text.clone(),
            embedding,
            model: passages::embedding_tag(model.model()),
        };
        points.extend(entry_points(lexical, model.dimensions(), entry).unwrap());
    }
    index.upsert(points).await.unwrap();
    let long_entry = ids[texts.iter().position(|t| t.answer.contains("lockbox")).unwrap()];
    Indexed { ids, long_entry }
}

async fn query(lexical: &Lexical, text: &str) -> SearchQuery {
    let vector = model().embed(vec![text.to_owned()]).await.unwrap().pop().unwrap();
    SearchQuery { vector, terms: lexical.query(text) }
}

fn position(hits: &[Hit], id: Uuid) -> Option<usize> {
    hits.iter().position(|hit| hit.id == id)
}

/// The queries every backend answers, with the entry (index into `corpus`) each must find first.
const QUERIES: [(&str, usize); 4] = [
    ("How much is FX-4471-ZQ?", 0),
    ("Can I phone Wierzbicki-Lund?", 3),
    // Not "spare key": "Spare components" then ties it by meaning and by the word (measured:
    // the fused ranks tie, and the long entry won by 0.0005 of similarity under the old
    // passage rule, lost by 0.1 under the even cut). Nor "room": the filler has "rooms".
    ("where do I find the bicycle key", 6),
    ("shipping to Germany", 7),
];

async fn check_ranking(index: &dyn VectorIndex) -> Vec<Vec<Hit>> {
    let lexical = Lexical::new().unwrap();
    let indexed = fill(index, &lexical).await;
    let mut answers = Vec::new();
    for (text, expected) in QUERIES {
        let query = query(&lexical, text).await;
        let hybrid = index.search(KB, &query, 5, 0.0).await.unwrap();
        assert_eq!(position(&hybrid, indexed.ids[expected]), Some(0), "{text}: {hybrid:?}");
        answers.push(hybrid);
    }

    // The lexical half is what finds a part number or a surname: by meaning alone the part
    // entries (and the staff entries) are all alike.
    for (text, expected) in &QUERIES[..2] {
        let dense = index.search(KB, &SearchQuery::dense(query(&lexical, text).await.vector), 5, 0.0).await.unwrap();
        assert_ne!(position(&dense, indexed.ids[*expected]), Some(0), "dense alone found {text:?} first: {dense:?}");
    }

    // The fact sits past the model's window: the entry's first passage alone barely matches,
    // its last one does.
    let spare_key = query(&lexical, QUERIES[2].0).await;
    let hit = index.search(KB, &spare_key, 1, 0.0).await.unwrap()[0];
    assert_eq!(hit.id, indexed.long_entry);
    let first_passage = corpus().into_iter().nth(QUERIES[2].1).unwrap();
    let head = model().embed(vec![format!("{}\n{}", first_passage.0, first_passage.1)]).await.unwrap().pop().unwrap();
    let head_similarity: f32 = head.iter().zip(&spare_key.vector).map(|(a, b)| a * b).sum();
    assert!(hit.score > head_similarity + 0.1, "best passage {} vs first window {head_similarity}", hit.score);

    // `threshold` floors the similarity, whatever found the entry.
    let code = query(&lexical, QUERIES[0].0).await;
    let all = index.search(KB, &code, 10, 0.0).await.unwrap();
    // The results are in fused order: the median similarity is a floor that keeps some.
    let mut similarities: Vec<f32> = all.iter().map(|hit| hit.score).collect();
    similarities.sort_by(f32::total_cmp);
    let floor = similarities[similarities.len() / 2];
    let kept = index.search(KB, &code, 10, floor).await.unwrap();
    assert!(!kept.is_empty() && kept.len() < all.len(), "{all:?} at {floor}: {kept:?}");
    assert!(kept.iter().all(|hit| hit.score >= floor));
    let high = all.iter().map(|hit| hit.score).fold(f32::MIN, f32::max) + 0.01;
    assert!(index.search(KB, &code, 10, high).await.unwrap().is_empty());
    answers
}

#[tokio::test]
async fn hybrid_search_ranks_the_same_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let edge = EdgeIndex::open(dir.path(), 384).unwrap();
    let on_edge = check_ranking(&edge).await;
    let Ok(url) = std::env::var("SWITCHBOARD_TEST_QDRANT_URL") else {
        eprintln!("no SWITCHBOARD_TEST_QDRANT_URL: the embedded index only");
        return;
    };
    let key = std::env::var("SWITCHBOARD_TEST_QDRANT_API_KEY").ok();
    let collection = format!("switchboard_test_{}", Uuid::new_v4().simple());
    let remote = RemoteIndex::open(&url, key.as_deref(), &collection, 384).await.unwrap();
    let on_server = check_ranking(&remote).await;
    for ((text, _), (edge, server)) in QUERIES.iter().zip(on_edge.iter().zip(&on_server)) {
        let ids = |hits: &[Hit]| hits.iter().map(|hit| hit.id).collect::<Vec<_>>();
        assert_eq!(ids(edge), ids(server), "{text}");
        for (a, b) in edge.iter().zip(server) {
            assert!((a.score - b.score).abs() < 1e-4, "{text}: {} vs {}", a.score, b.score);
        }
    }
}
