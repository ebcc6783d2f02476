#![allow(clippy::unwrap_used)]
//! The vector index against a real qdrant-edge shard in a temporary directory. The contract
//! tests (those using `each_index`) also run against a Qdrant server, in a new collection per
//! test, when `SWITCHBOARD_TEST_QDRANT_URL` names one (and `SWITCHBOARD_TEST_QDRANT_API_KEY` its
//! key, if any); CI has no Qdrant server, so there they cover the embedded index only.

use std::collections::HashMap;
use std::sync::Arc;

use switchboard_knowledgebase::index::{
    self, EdgeIndex, Hit, IndexConfig, Point, RemoteIndex, SearchQuery, Terms, VectorIndex,
};
use uuid::Uuid;

const DIMS: usize = 384;
const TEAM: &str = "team-1";

/// A unit vector with the given components (the rest zero).
fn unit(components: &[(usize, f32)]) -> Vec<f32> {
    let mut vector = vec![0.0; DIMS];
    for &(i, value) in components {
        vector[i] = value;
    }
    normalise(vector)
}

fn normalise(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    vector.iter_mut().for_each(|x| *x /= norm);
    vector
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Deterministic pseudo-random unit vectors (splitmix64), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit_vector(&mut self) -> Vec<f32> {
        let vector = (0..DIMS).map(|_| (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0).collect();
        normalise(vector)
    }
}

/// A one-passage entry without lexical terms: these tests are of the dense half.
fn point(knowledgebase_id: &str, vector: Vec<f32>) -> Point {
    let id = Uuid::new_v4();
    Point {
        id,
        entry_id: id,
        knowledgebase_id: knowledgebase_id.to_owned(),
        team_id: TEAM.to_owned(),
        vector,
        terms: Terms::default(),
    }
}

/// A search by vector alone (no lexical list), so the order is by cosine similarity.
#[async_trait::async_trait]
trait DenseSearch {
    async fn dense_search(
        &self,
        knowledgebase_id: &str,
        vector: Vec<f32>,
        limit: usize,
        threshold: f32,
    ) -> anyhow::Result<Vec<Hit>>;
}

#[async_trait::async_trait]
impl<T: VectorIndex + ?Sized> DenseSearch for T {
    async fn dense_search(
        &self,
        knowledgebase_id: &str,
        vector: Vec<f32>,
        limit: usize,
        threshold: f32,
    ) -> anyhow::Result<Vec<Hit>> {
        self.search(knowledgebase_id, &SearchQuery::dense(vector), limit, threshold).await
    }
}

fn open(dir: &tempfile::TempDir) -> EdgeIndex {
    EdgeIndex::open(dir.path(), DIMS).unwrap()
}

/// Runs `test` on an embedded index, then on a Qdrant server's index when one is configured.
async fn each_index<F, Fut>(test: F)
where
    F: Fn(Arc<dyn VectorIndex>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    test(Arc::new(open(&dir))).await;
    if let Ok(url) = std::env::var("SWITCHBOARD_TEST_QDRANT_URL") {
        let key = std::env::var("SWITCHBOARD_TEST_QDRANT_API_KEY").ok();
        let collection = format!("switchboard_test_{}", Uuid::new_v4().simple());
        let remote = RemoteIndex::open(&url, key.as_deref(), &collection, DIMS).await.unwrap();
        eprintln!("also on the Qdrant server at {url}, collection {collection}");
        test(Arc::new(remote)).await;
    }
}

fn ids(hits: &[Hit]) -> Vec<Uuid> {
    hits.iter().map(|hit| hit.id).collect()
}

fn assert_close(actual: f32, expected: f32) {
    assert!((actual - expected).abs() < 1e-4, "score {actual}, expected {expected}");
}

#[tokio::test]
async fn search_returns_nearest_first_with_cosine_scores() {
    each_index(|index| async move {
        let far = point("kb", unit(&[(0, 1.0), (1, 3.0)]));
        let exact = point("kb", unit(&[(0, 1.0)]));
        let near = point("kb", unit(&[(0, 1.0), (1, 1.0)]));
        let opposite = point("kb", unit(&[(0, -1.0)]));
        index.upsert(vec![far.clone(), exact.clone(), near.clone(), opposite.clone()]).await.unwrap();

        let hits = index.dense_search("kb", unit(&[(0, 1.0)]), 10, 0.0).await.unwrap();

        assert_eq!(ids(&hits), vec![exact.id, near.id, far.id]);
        assert_close(hits[0].score, 1.0);
        assert_close(hits[1].score, std::f32::consts::FRAC_1_SQRT_2);
        assert_close(hits[2].score, 1.0 / 10f32.sqrt());
    })
    .await;
}

#[tokio::test]
async fn search_never_returns_another_knowledgebases_points() {
    each_index(|index| async move {
        let vector = unit(&[(3, 1.0)]);
        let a: Vec<Point> = (0..5).map(|_| point("kb-a", vector.clone())).collect();
        let b: Vec<Point> = (0..5).map(|_| point("kb-b", vector.clone())).collect();
        index.upsert(a.iter().chain(&b).cloned().collect()).await.unwrap();

        let mut found_a = ids(&index.dense_search("kb-a", vector.clone(), 100, 0.0).await.unwrap());
        let mut found_b = ids(&index.dense_search("kb-b", vector.clone(), 100, 0.0).await.unwrap());
        found_a.sort();
        found_b.sort();
        let mut expected_a: Vec<Uuid> = a.iter().map(|p| p.id).collect();
        let mut expected_b: Vec<Uuid> = b.iter().map(|p| p.id).collect();
        expected_a.sort();
        expected_b.sort();
        assert_eq!(found_a, expected_a);
        assert_eq!(found_b, expected_b);
        assert!(index.dense_search("kb-c", vector, 100, -1.0).await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test]
async fn limit_and_threshold_are_respected() {
    each_index(|index| async move {
        // cos(query, points[t]) = 1 / sqrt(1 + t²): 1, 0.707, 0.447, 0.316, 0.243, ...
        let points: Vec<Point> = (0..10).map(|t| point("kb", unit(&[(0, 1.0), (1, t as f32)]))).collect();
        index.upsert(points.clone()).await.unwrap();
        let query = unit(&[(0, 1.0)]);

        let hits = index.dense_search("kb", query.clone(), 3, -1.0).await.unwrap();
        assert_eq!(ids(&hits), points[..3].iter().map(|p| p.id).collect::<Vec<_>>());

        let hits = index.dense_search("kb", query.clone(), 100, 0.3).await.unwrap();
        assert_eq!(ids(&hits), points[..4].iter().map(|p| p.id).collect::<Vec<_>>());
        assert!(hits.iter().all(|hit| hit.score >= 0.3));

        let hits = index.dense_search("kb", query.clone(), 2, 0.3).await.unwrap();
        assert_eq!(ids(&hits), points[..2].iter().map(|p| p.id).collect::<Vec<_>>());

        assert!(index.dense_search("kb", query.clone(), 0, -1.0).await.unwrap().is_empty());
        assert!(index.dense_search("kb", unit(&[(2, 1.0)]), 10, 0.5).await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test]
async fn a_hit_scoring_exactly_the_threshold_is_kept() {
    each_index(|index| async move {
        let points: Vec<Point> = (1..4).map(|t| point("kb", unit(&[(0, 1.0), (1, t as f32)]))).collect();
        index.upsert(points.clone()).await.unwrap();
        let query = unit(&[(0, 1.0)]);
        let all = index.dense_search("kb", query.clone(), 10, -1.0).await.unwrap();
        // The threshold is a minimum: each hit's own score keeps it and everything above.
        for (rank, hit) in all.iter().enumerate() {
            let kept = index.dense_search("kb", query.clone(), 10, hit.score).await.unwrap();
            assert_eq!(ids(&kept), ids(&all[..=rank]), "threshold {}", hit.score);
        }
    })
    .await;
}

#[tokio::test]
async fn upserting_an_id_again_replaces_its_vector_and_payload() {
    each_index(|index| async move {
        let mut entry = point("kb-a", unit(&[(0, 1.0)]));
        index.upsert(vec![entry.clone()]).await.unwrap();

        entry.vector = unit(&[(1, 1.0)]);
        index.upsert(vec![entry.clone()]).await.unwrap();
        assert_eq!(index.count().await.unwrap(), 1);
        let hits = index.dense_search("kb-a", unit(&[(1, 1.0)]), 10, 0.5).await.unwrap();
        assert_eq!(ids(&hits), vec![entry.id]);
        assert_close(hits[0].score, 1.0);
        assert!(index.dense_search("kb-a", unit(&[(0, 1.0)]), 10, 0.5).await.unwrap().is_empty());

        entry.knowledgebase_id = "kb-b".to_owned();
        index.upsert(vec![entry.clone()]).await.unwrap();
        assert!(index.dense_search("kb-a", entry.vector.clone(), 10, 0.5).await.unwrap().is_empty());
        assert_eq!(ids(&index.dense_search("kb-b", entry.vector.clone(), 10, 0.5).await.unwrap()), vec![entry.id]);
        assert_eq!(index.count().await.unwrap(), 1);
    })
    .await;
}

/// The passages of one entry, each along its own axis.
fn passages_of(entry_id: Uuid, knowledgebase_id: &str, axes: &[usize]) -> Vec<Point> {
    (0u32..)
        .zip(axes)
        .map(|(passage, &axis)| Point {
            id: index::passage_id(entry_id, passage),
            entry_id,
            knowledgebase_id: knowledgebase_id.to_owned(),
            team_id: TEAM.to_owned(),
            vector: unit(&[(axis, 1.0)]),
            terms: Terms::default(),
        })
        .collect()
}

#[tokio::test]
async fn an_entry_is_found_once_by_its_best_passage_and_loses_passages_it_no_longer_has() {
    each_index(|index| async move {
        let long = Uuid::new_v4();
        let short = point("kb", unit(&[(0, 1.0), (1, 1.0)]));
        index.upsert(passages_of(long, "kb", &[0, 1, 2])).await.unwrap();
        index.upsert(vec![short.clone()]).await.unwrap();
        assert_eq!(index.count().await.unwrap(), 4);

        // Its third passage matches exactly; the entry comes back once, with that similarity.
        let hits = index.dense_search("kb", unit(&[(2, 1.0)]), 10, 0.5).await.unwrap();
        assert_eq!(ids(&hits), vec![long]);
        assert_close(hits[0].score, 1.0);
        // Passages 0 and 1 both match (0, 1) at 0.707, and so does the short entry.
        let hits = index.dense_search("kb", unit(&[(0, 1.0), (1, 1.0)]), 10, 0.0).await.unwrap();
        assert_eq!(ids(&hits), vec![short.id, long]);
        assert_close(hits[1].score, std::f32::consts::FRAC_1_SQRT_2);

        // The text got shorter: one passage left, the others gone from every search.
        index.upsert(passages_of(long, "kb", &[3])).await.unwrap();
        assert_eq!(index.count().await.unwrap(), 2);
        assert!(index.dense_search("kb", unit(&[(2, 1.0)]), 10, 0.5).await.unwrap().is_empty());
        assert_eq!(ids(&index.dense_search("kb", unit(&[(3, 1.0)]), 10, 0.5).await.unwrap()), vec![long]);

        index.upsert(passages_of(long, "kb", &[4, 5])).await.unwrap();
        assert_eq!(index.count().await.unwrap(), 3);
        index.delete(vec![long]).await.unwrap();
        assert_eq!(index.count().await.unwrap(), 1);
        assert!(index.dense_search("kb", unit(&[(5, 1.0)]), 10, 0.5).await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test]
async fn delete_by_ids_and_by_knowledgebase() {
    each_index(|index| async move {
        let vector = unit(&[(5, 1.0)]);
        let a: Vec<Point> = (0..4).map(|_| point("kb-a", vector.clone())).collect();
        let b: Vec<Point> = (0..3).map(|_| point("kb-b", vector.clone())).collect();
        index.upsert(a.iter().chain(&b).cloned().collect()).await.unwrap();
        assert_eq!(index.count().await.unwrap(), 7);

        // Unknown ids are ignored.
        index.delete(vec![a[0].id, a[1].id, Uuid::new_v4()]).await.unwrap();
        index.delete(Vec::new()).await.unwrap();
        assert_eq!(index.count().await.unwrap(), 5);
        let mut left = ids(&index.dense_search("kb-a", vector.clone(), 10, 0.0).await.unwrap());
        left.sort();
        let mut expected = vec![a[2].id, a[3].id];
        expected.sort();
        assert_eq!(left, expected);

        index.delete_knowledgebase("kb-a").await.unwrap();
        assert!(index.dense_search("kb-a", vector.clone(), 10, -1.0).await.unwrap().is_empty());
        assert_eq!(index.dense_search("kb-b", vector.clone(), 10, -1.0).await.unwrap().len(), 3);
        assert_eq!(index.count().await.unwrap(), 3);
        // Deleting a knowledge base with no points is fine.
        index.delete_knowledgebase("kb-missing").await.unwrap();
        assert_eq!(index.count().await.unwrap(), 3);
    })
    .await;
}

#[tokio::test]
async fn count_counts_every_knowledgebase() {
    each_index(|index| async move {
        assert_eq!(index.count().await.unwrap(), 0);
        let mut rng = Rng(7);
        let points: Vec<Point> = (0..30).map(|i| point(&format!("kb-{}", i % 3), rng.unit_vector())).collect();
        index.upsert(points[..20].to_vec()).await.unwrap();
        assert_eq!(index.count().await.unwrap(), 20);
        index.upsert(points.clone()).await.unwrap();
        assert_eq!(index.count().await.unwrap(), 30);
    })
    .await;
}

/// An index made before hybrid search (one unnamed dense vector per entry) is replaced by an
/// empty one of the current layout, which the service then fills from SQL.
#[tokio::test]
async fn an_index_of_the_single_vector_layout_is_replaced_on_open() {
    use qdrant_edge::{DEFAULT_VECTOR_NAME, Distance, EdgeConfigBuilder, EdgeShard, EdgeVectorParamsBuilder};
    let dir = tempfile::tempdir().unwrap();
    let old = EdgeConfigBuilder::new()
        .vector(DEFAULT_VECTOR_NAME, EdgeVectorParamsBuilder::new(DIMS, Distance::Cosine).build())
        .build();
    drop(EdgeShard::new(dir.path(), old).unwrap());

    let index = open(&dir);
    assert_eq!(index.count().await.unwrap(), 0);
    let entry = point("kb", unit(&[(0, 1.0)]));
    index.upsert(vec![entry.clone()]).await.unwrap();
    drop(index);
    let index = open(&dir);
    assert_eq!(ids(&index.dense_search("kb", entry.vector.clone(), 10, 0.5).await.unwrap()), vec![entry.id]);
}

/// An index made for another embedding model (vectors of another size) is replaced by an empty
/// one when opened, on both backends: `reindex` then fills it with the new model's vectors.
#[tokio::test]
async fn an_index_of_another_dimension_is_replaced_on_open() {
    let wide_point =
        || Point { vector: vec![1.0 / ((2 * DIMS) as f32).sqrt(); 2 * DIMS], ..point("kb", unit(&[(0, 1.0)])) };
    let dir = tempfile::tempdir().unwrap();
    {
        let wider = EdgeIndex::open(dir.path(), 2 * DIMS).unwrap();
        wider.upsert(vec![wide_point()]).await.unwrap();
        assert_eq!(wider.count().await.unwrap(), 1);
    }
    let index = open(&dir);
    assert_eq!(index.count().await.unwrap(), 0);
    let entry = point("kb", unit(&[(0, 1.0)]));
    index.upsert(vec![entry.clone()]).await.unwrap();
    assert_eq!(ids(&index.dense_search("kb", entry.vector.clone(), 10, 0.5).await.unwrap()), vec![entry.id]);

    if let Ok(url) = std::env::var("SWITCHBOARD_TEST_QDRANT_URL") {
        let key = std::env::var("SWITCHBOARD_TEST_QDRANT_API_KEY").ok();
        let collection = format!("switchboard_test_{}", Uuid::new_v4().simple());
        let wider = RemoteIndex::open(&url, key.as_deref(), &collection, 2 * DIMS).await.unwrap();
        wider.upsert(vec![wide_point()]).await.unwrap();
        assert_eq!(wider.count().await.unwrap(), 1);
        let remote = RemoteIndex::open(&url, key.as_deref(), &collection, DIMS).await.unwrap();
        assert_eq!(remote.count().await.unwrap(), 0);
        remote.upsert(vec![entry.clone()]).await.unwrap();
        assert_eq!(remote.count().await.unwrap(), 1);
    }
}

#[tokio::test]
async fn writes_survive_dropping_and_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let config = IndexConfig {
        path: dir.path().join("index"),
        qdrant_url: None,
        qdrant_api_key: None,
        collection: "knowledge".to_owned(),
        dimensions: DIMS,
    };
    let kept = point("kb", unit(&[(0, 1.0)]));
    let deleted = point("kb", unit(&[(0, 1.0), (1, 1.0)]));
    let other = point("kb-2", unit(&[(1, 1.0)]));
    {
        let index = index::open(&config).await.unwrap();
        index.upsert(vec![kept.clone(), deleted.clone(), other.clone()]).await.unwrap();
        index.delete(vec![deleted.id]).await.unwrap();
    }

    let index = index::open(&config).await.unwrap();
    assert_eq!(index.count().await.unwrap(), 2);
    let hits = index.dense_search("kb", unit(&[(0, 1.0)]), 10, -1.0).await.unwrap();
    assert_eq!(ids(&hits), vec![kept.id]);
    assert_close(hits[0].score, 1.0);
    assert_eq!(ids(&index.dense_search("kb-2", unit(&[(1, 1.0)]), 10, 0.5).await.unwrap()), vec![other.id]);

    // And the reopened index still takes writes that survive the next reopen.
    let later = point("kb", unit(&[(2, 1.0)]));
    index.upsert(vec![later.clone()]).await.unwrap();
    drop(index);
    let index = index::open(&config).await.unwrap();
    assert_eq!(index.count().await.unwrap(), 3);
    assert_eq!(ids(&index.dense_search("kb", unit(&[(2, 1.0)]), 1, 0.5).await.unwrap()), vec![later.id]);
}

const CRASH_DIR: &str = "SWITCHBOARD_INDEX_TEST_CRASH_DIR";

fn crash_point(n: u128, knowledgebase_id: &str, axis: usize) -> Point {
    Point {
        id: Uuid::from_u128(n),
        entry_id: Uuid::from_u128(n),
        terms: Terms::default(),
        knowledgebase_id: knowledgebase_id.to_owned(),
        team_id: TEAM.to_owned(),
        vector: unit(&[(axis, 1.0)]),
    }
}

/// `EdgeShard` flushes when dropped, so a clean drop proves little: a child process writes and
/// then aborts, as a crash would, and the parent reopens the directory.
#[tokio::test]
async fn writes_are_durable_without_a_clean_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_after_writes", "--ignored", "--nocapture"])
        .env(CRASH_DIR, dir.path())
        .status()
        .unwrap();
    assert!(!status.success(), "the child was meant to abort");

    let index = open(&dir);
    assert_eq!(index.count().await.unwrap(), 1);
    let hits = index.dense_search("kb", unit(&[(0, 1.0)]), 10, -1.0).await.unwrap();
    assert_eq!(ids(&hits), vec![Uuid::from_u128(1)]);
    assert!(index.dense_search("kb-gone", unit(&[(2, 1.0)]), 10, -1.0).await.unwrap().is_empty());
}

/// The crashing half of `writes_are_durable_without_a_clean_shutdown`.
#[tokio::test]
#[ignore = "run as a child process by writes_are_durable_without_a_clean_shutdown"]
async fn crash_after_writes() {
    let Some(dir) = std::env::var_os(CRASH_DIR) else {
        return;
    };
    let index = EdgeIndex::open(std::path::Path::new(&dir), DIMS).unwrap();
    index.upsert(vec![crash_point(1, "kb", 0), crash_point(2, "kb", 1)]).await.unwrap();
    index.delete(vec![Uuid::from_u128(2)]).await.unwrap();
    index.upsert(vec![crash_point(3, "kb-gone", 2)]).await.unwrap();
    index.delete_knowledgebase("kb-gone").await.unwrap();
    // No destructor runs, so nothing gets flushed on the way out.
    std::process::abort();
}

#[tokio::test]
async fn vectors_of_the_wrong_size_are_refused_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(&dir);
    index.upsert(vec![point("kb", unit(&[(0, 1.0)]))]).await.unwrap();
    let mut bad = point("kb", vec![1.0; 3]);
    assert!(index.upsert(vec![bad.clone()]).await.is_err());
    bad.vector = vec![1.0; DIMS + 1];
    assert!(index.upsert(vec![bad]).await.is_err());
    assert!(index.dense_search("kb", vec![1.0; 3], 10, 0.0).await.is_err());
    assert_eq!(index.count().await.unwrap(), 1);
}

#[tokio::test]
async fn clear_leaves_a_usable_empty_index() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(&dir);
    let mut rng = Rng(11);
    let points: Vec<Point> = (0..50).map(|i| point(&format!("kb-{}", i % 2), rng.unit_vector())).collect();
    index.upsert(points.clone()).await.unwrap();
    assert_eq!(index.count().await.unwrap(), 50);

    index.clear().await.unwrap();
    assert_eq!(index.count().await.unwrap(), 0);
    assert!(index.dense_search("kb-0", points[0].vector.clone(), 10, -1.0).await.unwrap().is_empty());

    // Rebuild: the same ids come back.
    index.upsert(points[..10].to_vec()).await.unwrap();
    assert_eq!(index.count().await.unwrap(), 10);
    let hits = index.dense_search(&points[0].knowledgebase_id, points[0].vector.clone(), 1, 0.0).await.unwrap();
    assert_eq!(ids(&hits), vec![points[0].id]);

    drop(index);
    let index = open(&dir);
    assert_eq!(index.count().await.unwrap(), 10);
    index.clear().await.unwrap();
    index.clear().await.unwrap();
    assert_eq!(index.count().await.unwrap(), 0);
}

/// qdrant-edge's `flush` and `optimize` panic when they race an `update`; the index must
/// serialise them while searches carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_and_searches_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let index = Arc::new(open(&dir));
    let mut tasks = Vec::new();
    for writer in 0..8u64 {
        let index = Arc::clone(&index);
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(100 + writer);
            for batch in 0..20 {
                let points: Vec<Point> = (0..10).map(|_| point(&format!("kb-{writer}"), rng.unit_vector())).collect();
                let doomed = points[0].id;
                index.upsert(points).await.unwrap();
                if batch % 5 == 0 {
                    index.delete(vec![doomed]).await.unwrap();
                }
            }
        }));
    }
    for searcher in 0..8u64 {
        let index = Arc::clone(&index);
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(200 + searcher);
            for _ in 0..100 {
                let hits =
                    index.dense_search(&format!("kb-{}", searcher % 8), rng.unit_vector(), 5, -1.0).await.unwrap();
                assert!(hits.windows(2).all(|pair| pair[0].score >= pair[1].score));
                index.count().await.unwrap();
            }
        }));
    }
    {
        let index = Arc::clone(&index);
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                index.optimize().await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    // 8 writers × 20 batches × 10 points, one point deleted in every fifth batch.
    assert_eq!(index.count().await.unwrap(), 8 * 20 * 10 - 8 * 4);
}

/// Enough points for the optimizer to build an HNSW index: one knowledge base large enough for
/// its graph links to be searched, two small ones searched exactly by full scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_points_stay_searchable_after_optimize() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(&dir);
    let mut rng = Rng(42);
    let points: Vec<Point> = (0..10_000)
        .map(|i| {
            // The big one first, so that the segment the optimizer indexes holds more of it than
            // the full-scan threshold (about 6,500 vectors) and its searches use the graph.
            let knowledgebase = match i {
                ..8_000 => "big",
                8_000..9_000 => "small-1",
                _ => "small-2",
            };
            point(knowledgebase, rng.unit_vector())
        })
        .collect();
    for batch in points.chunks(500) {
        index.upsert(batch.to_vec()).await.unwrap();
    }
    index.optimize().await.unwrap();
    assert_eq!(index.count().await.unwrap(), 10_000);
    let info = index.info().await.unwrap();
    assert!(info.indexed_vectors > 0, "optimize built no vector index: {info:?}");

    check_searches(&index, &points, &mut rng).await;

    drop(index);
    let index = open(&dir);
    assert_eq!(index.count().await.unwrap(), 10_000);
    check_searches(&index, &points, &mut rng).await;

    // Clearing indexed segments (which vacuums them) still leaves a usable index.
    index.clear().await.unwrap();
    assert_eq!(index.count().await.unwrap(), 0);
    assert!(index.dense_search("big", points[0].vector.clone(), 5, -1.0).await.unwrap().is_empty());
    index.upsert(points[..100].to_vec()).await.unwrap();
    assert_eq!(ids(&index.dense_search("big", points[0].vector.clone(), 1, 0.5).await.unwrap()), vec![points[0].id]);
    assert_eq!(index.count().await.unwrap(), 100);
}

async fn check_searches(index: &EdgeIndex, points: &[Point], rng: &mut Rng) {
    let knowledgebase_of: HashMap<Uuid, &str> = points.iter().map(|p| (p.id, p.knowledgebase_id.as_str())).collect();
    // A stored vector finds its own point first, and never a point of another knowledge base.
    let mut found_itself = 0;
    let samples: Vec<&Point> = points.iter().step_by(97).collect();
    for sample in &samples {
        let hits = index.dense_search(&sample.knowledgebase_id, sample.vector.clone(), 5, 0.0).await.unwrap();
        assert!(hits.iter().all(|hit| knowledgebase_of[&hit.id] == sample.knowledgebase_id));
        assert!(hits.windows(2).all(|pair| pair[0].score >= pair[1].score));
        if hits.first().is_some_and(|hit| hit.id == sample.id && (hit.score - 1.0).abs() < 1e-4) {
            found_itself += 1;
        }
    }
    assert!(found_itself * 100 >= samples.len() * 95, "{found_itself} of {} found themselves", samples.len());

    // The big one is searched through per-knowledge-base graph links, so it is approximate.
    // Uniformly random 384-dimensional vectors are the worst case for HNSW (about 0.78 recall@5
    // measured here, where real embeddings do far better); the bound only catches a broken graph.
    let big: Vec<&Point> = points.iter().filter(|p| p.knowledgebase_id == "big").collect();
    let mut agree = 0;
    for _ in 0..50 {
        let query = rng.unit_vector();
        let mut expected: Vec<(f32, Uuid)> = big.iter().map(|p| (dot(&p.vector, &query), p.id)).collect();
        expected.sort_by(|x, y| y.0.total_cmp(&x.0));
        let expected: Vec<Uuid> = expected[..5].iter().map(|(_, id)| *id).collect();
        let hits = index.dense_search("big", query, 5, -1.0).await.unwrap();
        assert_eq!(hits.len(), 5);
        agree += hits.iter().filter(|hit| expected.contains(&hit.id)).count();
    }
    assert!(agree * 2 >= 250, "recall@5 of the big knowledge base: {agree}/250");

    // The small ones are scanned exactly: the top 5 match a brute-force search.
    for knowledgebase in ["small-1", "small-2"] {
        for _ in 0..10 {
            let query = rng.unit_vector();
            let mut expected: Vec<(f32, Uuid)> = points
                .iter()
                .filter(|p| p.knowledgebase_id == knowledgebase)
                .map(|p| (dot(&p.vector, &query), p.id))
                .collect();
            expected.sort_by(|x, y| y.0.total_cmp(&x.0));
            let hits = index.dense_search(knowledgebase, query, 5, -1.0).await.unwrap();
            assert_eq!(ids(&hits), expected[..5].iter().map(|(_, id)| *id).collect::<Vec<_>>());
            for (hit, (score, _)) in hits.iter().zip(&expected) {
                assert_close(hit.score, *score);
            }
        }
    }
}

fn closed_wal_segments(index_dir: &std::path::Path) -> usize {
    std::fs::read_dir(index_dir.join("wal"))
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().starts_with("closed-"))
        .count()
}

#[tokio::test]
async fn reopening_deletes_old_wal_segments_and_later_writes_still_apply() {
    // Segments of 64 kB: a batch of 40 points (about 80 kB) fills one.
    const SEGMENT: usize = 64 << 10;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(7);
    let mut points: Vec<Point> = (0..40).map(|_| point("kb", rng.unit_vector())).collect();
    {
        let index = EdgeIndex::open_with_wal_segments(dir.path(), DIMS, SEGMENT).unwrap();
        for _ in 0..12 {
            index.upsert(points.clone()).await.unwrap();
        }
    }
    assert!(closed_wal_segments(dir.path()) >= 10, "twelve batches of 80 kB close as many 64 kB segments");

    let index = EdgeIndex::open_with_wal_segments(dir.path(), DIMS, SEGMENT).unwrap();
    // The newest closed segment stays; loading may close a segment the last run left open.
    assert!(closed_wal_segments(dir.path()) <= 2, "reopening deletes the closed WAL segments but the newest");
    assert_eq!(index.count().await.unwrap(), 40);

    // Writes after the pruning replace what is there: their versions carry on from the WAL's.
    for entry in &mut points {
        entry.vector = rng.unit_vector();
    }
    index.upsert(points.clone()).await.unwrap();
    for entry in points.iter().take(5) {
        let hits = index.dense_search("kb", entry.vector.clone(), 1, 0.0).await.unwrap();
        assert_eq!(ids(&hits), vec![entry.id], "the new vector of a point rewritten after reopening is found");
        assert_close(hits[0].score, 1.0);
    }
    drop(index);

    let index = EdgeIndex::open_with_wal_segments(dir.path(), DIMS, SEGMENT).unwrap();
    assert_eq!(index.count().await.unwrap(), 40);
    let last = &points[39];
    let hits = index.dense_search("kb", last.vector.clone(), 1, 0.0).await.unwrap();
    assert_eq!(ids(&hits), vec![last.id]);
    assert_close(hits[0].score, 1.0);
}
