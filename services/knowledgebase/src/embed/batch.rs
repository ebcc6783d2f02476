//! Queues small embedding requests for the model, queries and passages apart, gathers
//! passages that arrive together into model calls, and lets teams take turns with passages.
//!
//! Searches embed one query each, and single references, webpages and documents a few
//! passages each; run side by side without limit, each call would fight the others for the
//! same cores. Each kind has a worker that keeps at most as many model calls running as the
//! model can use side by side (one per core for the local model):
//! - queries: one search's query a call, first come first served, so a lone search waits for
//!   nothing. They are not gathered: a query is more tokens than the products' tiles are rows
//!   (8), so a batch of them was no cheaper a query, and each gathered query waited for the
//!   slowest of its batch. (Measured with 8 search clients during a bulk import of SciFact:
//!   search p99 59.5 and 61 ms gathered, 50 and 53 ms one a call; BENCHMARKS.md, issue 43.)
//! - passages: every request names its team, and is cut into pieces of at most [`PIECE`]
//!   texts (a long one sorted by length first, so that a piece's texts pad little). Each team
//!   has a queue of pieces; a free call takes the first piece of the team served longest ago
//!   (a team that arrives with nothing queued before it goes first), so a team's single write
//!   is in the next model call however many pieces another team's import has queued (issue 53:
//!   with one queue, it waited behind the whole import). A call that is smaller than about one
//!   model batch ([`FULL_TEXTS`] texts or [`FULL_CHARS`] characters) takes the next turns'
//!   pieces too while they fit, waiting up to [`GATHER`] for more: a write takes tens of
//!   milliseconds to embed, so the wait is small against it and makes concurrent short writes
//!   one call. It keeps two calls per core going: while the writes of one call are stored and
//!   answered, and their clients send the next, the cores work on the other. (Measured before:
//!   with every waiting write in one call, four clients left 14 % of two cores idle.) A piece
//!   whose caller has gone (a cancelled request) is dropped unembedded.
//!
//! - writes: a request of at most [`SMALL_WRITE`] passages (a single reference, a short page)
//!   goes to a line of its own, handled as the passages' but run on threads of its own. Taking
//!   turns alone did not keep another team's single writes quick during an import: each
//!   waited for a free call behind the import's pieces, and then shared the cores with them at
//!   the same priority (p50 0.6-1.2 s against 50 ms idle; BENCHMARKS.md, issue 53).
//!
//! The model runs writes at a lower priority than queries, and bulk passages lower still
//! (`threads.rs`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::anyhow;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::{Embedder, NO_TEAM};

/// Queries of at most this many texts are queued; larger calls go to the model at once.
const SMALL_QUERY: usize = 4;
/// The most texts of a passage request in one model call: a request of more is cut into pieces
/// of this many, each a turn of its team. One of the model's batches, 0.1 to 0.15 s of SciFact
/// passages on one core: what another team's write may wait behind, per call in flight. (At 32,
/// another team's single writes took 0.8 s at the median and up to 3.5 s during an import, with
/// four such calls in flight on two cores; BENCHMARKS.md, issue 53.)
const PIECE: usize = 8;
/// A gathered passage call stops taking pieces at this many texts (the model's batch)...
const FULL_TEXTS: usize = 8;
/// ... or this many characters, about 400 tokens: products of that many rows already run at
/// the model's full speed, so gathering more would only hold the writes back.
const FULL_CHARS: usize = 2_000;
/// Passage requests of at most this many texts are single writes: they go to the writes' line.
const SMALL_WRITE: usize = FULL_TEXTS;
/// How long the passage worker waits for more requests to fill a batch.
const GATHER: Duration = Duration::from_millis(5);

type Reply = oneshot::Sender<anyhow::Result<Vec<Vec<f32>>>>;
type Query = (Vec<String>, Reply);

/// A team's passages to embed.
struct Passages {
    team_id: String,
    texts: Vec<String>,
    reply: Reply,
}

/// A request's vectors, filled in by its pieces as their calls end.
struct Assembly {
    vectors: Vec<Vec<f32>>,
    missing: usize,
    /// Taken by the answer: `None` once answered (or failed).
    reply: Option<Reply>,
}

/// Some texts of a request, and their places in it.
struct Piece {
    texts: Vec<String>,
    positions: Vec<usize>,
    assembly: Arc<Mutex<Assembly>>,
}

impl Piece {
    fn len(&self) -> usize {
        self.positions.len()
    }

    fn chars(&self) -> usize {
        self.texts.iter().map(String::len).sum()
    }

    fn assembly(&self) -> std::sync::MutexGuard<'_, Assembly> {
        // A poisoned lock only means a delivery panicked; the vectors are still in place.
        self.assembly.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Its request failed already, or its caller stopped waiting: embedding it helps no one.
    fn abandoned(&self) -> bool {
        self.assembly().reply.as_ref().is_none_or(oneshot::Sender::is_closed)
    }

    /// Puts the piece's vectors in place, and answers the request once it has them all.
    fn deliver(&self, embedded: Result<Vec<Vec<f32>>, String>) {
        let mut assembly = self.assembly();
        let vectors = match embedded {
            Ok(vectors) if vectors.len() == self.len() => vectors,
            Ok(vectors) => {
                let reason = format!("the embedder returned {} vectors for {} texts", vectors.len(), self.len());
                if let Some(reply) = assembly.reply.take() {
                    let _ = reply.send(Err(anyhow!(reason)));
                }
                return;
            }
            Err(reason) => {
                if let Some(reply) = assembly.reply.take() {
                    let _ = reply.send(Err(anyhow!(reason)));
                }
                return;
            }
        };
        for (&position, vector) in self.positions.iter().zip(vectors) {
            assembly.vectors[position] = vector;
        }
        assembly.missing = assembly.missing.saturating_sub(self.len());
        if assembly.missing == 0
            && let Some(reply) = assembly.reply.take()
        {
            let vectors = std::mem::take(&mut assembly.vectors);
            let _ = reply.send(Ok(vectors));
        }
    }
}

/// Cuts a request into pieces of at most [`PIECE`] texts; a request of more is sorted by length
/// first.
fn pieces(request: Passages) -> Vec<Piece> {
    let Passages { texts, reply, .. } = request;
    let count = texts.len();
    let assembly =
        Arc::new(Mutex::new(Assembly { vectors: vec![Vec::new(); count], missing: count, reply: Some(reply) }));
    let mut order: Vec<usize> = (0..count).collect();
    if count > PIECE {
        order.sort_by_key(|&i| texts[i].len());
    }
    let mut texts: Vec<Option<String>> = texts.into_iter().map(Some).collect();
    order
        .chunks(PIECE)
        .map(|positions| Piece {
            texts: positions.iter().map(|&i| texts[i].take().unwrap_or_default()).collect(),
            positions: positions.to_vec(),
            assembly: assembly.clone(),
        })
        .collect()
}

/// A team's pieces, and when it was last served.
struct TeamQueue {
    pieces: VecDeque<Piece>,
    /// The turn it was last served in (0: not since it queued).
    served: u64,
    /// When it queued, to order teams never served.
    arrived: u64,
}

/// The passages waiting for the model: a queue per team, the team served longest ago first.
#[derive(Default)]
struct Turns {
    teams: HashMap<String, TeamQueue>,
    clock: u64,
}

impl Turns {
    fn push(&mut self, request: Passages) {
        if request.texts.is_empty() {
            let _ = request.reply.send(Ok(Vec::new()));
            return;
        }
        self.clock += 1;
        let arrived = self.clock;
        let queue = self.teams.entry(request.team_id.clone()).or_insert_with(|| TeamQueue {
            pieces: VecDeque::new(),
            served: 0,
            arrived,
        });
        queue.pieces.extend(pieces(request));
    }

    fn is_empty(&self) -> bool {
        self.teams.is_empty()
    }

    /// The next turn's piece if it has at most `room` texts; `None` when nothing waits or the
    /// piece is larger (it then keeps its turn for the next call).
    fn next_within(&mut self, room: usize) -> Option<Piece> {
        loop {
            let team =
                self.teams.iter().min_by_key(|(_, queue)| (queue.served, queue.arrived)).map(|(t, _)| t.clone())?;
            let queue = self.teams.get_mut(&team)?;
            while queue.pieces.front().is_some_and(Piece::abandoned) {
                queue.pieces.pop_front();
            }
            let Some(front) = queue.pieces.front() else {
                self.teams.remove(&team);
                continue;
            };
            if front.len() > room {
                return None;
            }
            let piece = queue.pieces.pop_front()?;
            self.clock += 1;
            queue.served = self.clock;
            if queue.pieces.is_empty() {
                self.teams.remove(&team);
            }
            return Some(piece);
        }
    }

    fn next(&mut self) -> Option<Piece> {
        self.next_within(usize::MAX)
    }
}

pub struct Coalescing {
    inner: Arc<dyn Embedder>,
    queries: mpsc::Sender<Query>,
    passages: mpsc::Sender<Passages>,
    writes: mpsc::Sender<Passages>,
}

/// Which of the model's passage paths a line of passages takes.
#[derive(Clone, Copy)]
enum Line {
    /// [`Embedder::embed`]: imports, webpages, documents.
    Bulk,
    /// [`Embedder::embed_writes`]: single writes.
    Writes,
}

impl Coalescing {
    /// Starts the workers on the current tokio runtime; they end when the embedder is dropped.
    pub fn new(inner: Arc<dyn Embedder>) -> Arc<Self> {
        let queries = start_queries(inner.clone());
        let passages = start_passages(inner.clone(), Line::Bulk);
        let writes = start_passages(inner.clone(), Line::Writes);
        Arc::new(Self { inner, queries, passages, writes })
    }
}

fn start_queries(model: Arc<dyn Embedder>) -> mpsc::Sender<Query> {
    let (queue, mut waiting) = mpsc::channel::<Query>(1024);
    let slots = Arc::new(Semaphore::new(model.parallelism().max(1)));
    tokio::spawn(async move {
        // A free slot first, then the query: while every slot is busy, queries queue up.
        while let Ok(slot) = slots.clone().acquire_owned().await {
            let Some((texts, reply)) = waiting.recv().await else { return };
            let model = model.clone();
            tokio::spawn(async move {
                let _ = reply.send(model.embed_queries(texts).await);
                drop(slot);
            });
        }
    });
    queue
}

fn start_passages(model: Arc<dyn Embedder>, line: Line) -> mpsc::Sender<Passages> {
    let (queue, mut waiting) = mpsc::channel::<Passages>(1024);
    let slots = Arc::new(Semaphore::new(2 * model.parallelism().max(1)));
    tokio::spawn(async move {
        let mut turns = Turns::default();
        while let Ok(slot) = slots.clone().acquire_owned().await {
            // What arrived while every slot was busy joins the line before the turn is chosen.
            while let Ok(request) = waiting.try_recv() {
                turns.push(request);
            }
            let first = loop {
                if let Some(piece) = turns.next() {
                    break piece;
                }
                let Some(request) = waiting.recv().await else { return };
                turns.push(request);
            };
            let call = gather(&mut waiting, &mut turns, first).await;
            let model = model.clone();
            tokio::spawn(async move {
                embed_pieces(model.as_ref(), line, call).await;
                drop(slot);
            });
        }
    });
    queue
}

/// Adds the next turns' pieces to a call until it is about one model batch ([`FULL_TEXTS`]
/// texts or [`FULL_CHARS`] characters), while they fit in a [`PIECE`], waiting up to
/// [`GATHER`] for more when none waits.
async fn gather(waiting: &mut mpsc::Receiver<Passages>, turns: &mut Turns, first: Piece) -> Vec<Piece> {
    let (mut texts, mut chars) = (first.len(), first.chars());
    let mut call = vec![first];
    let deadline = tokio::time::Instant::now() + GATHER;
    while texts < FULL_TEXTS && chars < FULL_CHARS {
        while let Ok(request) = waiting.try_recv() {
            turns.push(request);
        }
        if let Some(piece) = turns.next_within(PIECE - texts) {
            texts += piece.len();
            chars += piece.chars();
            call.push(piece);
            continue;
        }
        if !turns.is_empty() {
            // The next turn's piece is too large to share this call: it gets the next one.
            break;
        }
        let Ok(Some(request)) = tokio::time::timeout_at(deadline, waiting.recv()).await else { break };
        turns.push(request);
    }
    call
}

/// Embeds the texts of every piece of the call at once and hands each piece its vectors.
async fn embed_pieces(model: &dyn Embedder, line: Line, mut call: Vec<Piece>) {
    let all: Vec<String> = call.iter_mut().flat_map(|piece| std::mem::take(&mut piece.texts)).collect();
    let embedded = match line {
        Line::Bulk => model.embed(all).await,
        Line::Writes => model.embed_writes(all).await,
    };
    match embedded {
        Ok(mut vectors) => {
            for piece in call {
                let rest = vectors.split_off(piece.len().min(vectors.len()));
                piece.deliver(Ok(std::mem::replace(&mut vectors, rest)));
            }
        }
        Err(error) => {
            let reason = format!("{error:#}");
            for piece in call {
                piece.deliver(Err(reason.clone()));
            }
        }
    }
}

#[async_trait::async_trait]
impl Embedder for Coalescing {
    async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        self.embed_for(NO_TEAM, texts).await
    }

    async fn embed_for(&self, team_id: &str, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        let (reply, answer) = oneshot::channel();
        let line = if texts.len() <= SMALL_WRITE { &self.writes } else { &self.passages };
        let request = Passages { team_id: team_id.to_owned(), texts, reply };
        line.send(request).await.map_err(|_| anyhow!("the embedding worker has stopped"))?;
        answer.await.map_err(|_| anyhow!("the embedding worker has stopped"))?
    }

    async fn embed_queries(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.len() > SMALL_QUERY {
            return self.inner.embed_queries(texts).await;
        }
        let (reply, answer) = oneshot::channel();
        self.queries.send((texts, reply)).await.map_err(|_| anyhow!("the embedding worker has stopped"))?;
        answer.await.map_err(|_| anyhow!("the embedding worker has stopped"))?
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn parallelism(&self) -> usize {
        self.inner.parallelism()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Records the size and kind of every model call; each text's vector is its length.
    #[derive(Default)]
    struct Recording(Mutex<Vec<(usize, &'static str)>>);

    #[async_trait::async_trait]
    impl Embedder for Recording {
        async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
            self.0.lock().unwrap().push((texts.len(), "ingest"));
            Ok(texts.iter().map(|text| vec![text.len() as f32]).collect())
        }

        async fn embed_writes(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
            self.0.lock().unwrap().push((texts.len(), "write"));
            Ok(texts.iter().map(|text| vec![text.len() as f32]).collect())
        }

        async fn embed_queries(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
            self.0.lock().unwrap().push((texts.len(), "query"));
            Ok(texts.iter().map(|text| vec![text.len() as f32]).collect())
        }

        fn dimensions(&self) -> usize {
            1
        }

        fn model(&self) -> &str {
            "recording"
        }
    }

    fn texts(sizes: &[usize]) -> Vec<String> {
        sizes.iter().map(|&size| "x".repeat(size)).collect()
    }

    #[tokio::test]
    async fn concurrent_writes_share_a_model_call_and_each_gets_its_own_vectors() {
        let model = Arc::new(Recording::default());
        let coalescing = Coalescing::new(model.clone());
        let writes = (1..=4).map(|i| {
            let coalescing = coalescing.clone();
            async move { coalescing.embed(texts(&[i, 10 * i])).await.unwrap() }
        });
        let answers = futures::future::join_all(writes).await;
        for (i, vectors) in (1..=4).zip(answers) {
            assert_eq!(vectors, vec![vec![i as f32], vec![10.0 * i as f32]]);
        }
        assert_eq!(*model.0.lock().unwrap(), [(8, "write")], "one call for the four writes");
    }

    #[tokio::test]
    async fn long_writes_are_shared_between_calls_so_the_cores_can_overlap_them() {
        let model = Arc::new(Recording::default());
        let coalescing = Coalescing::new(model.clone());
        let writes = (0..4).map(|_| {
            let coalescing = coalescing.clone();
            async move { coalescing.embed(texts(&[FULL_CHARS / 2, 10])).await.unwrap() }
        });
        futures::future::join_all(writes).await;
        assert_eq!(*model.0.lock().unwrap(), [(4, "write"), (4, "write")], "two writes a call");
    }

    #[tokio::test]
    async fn concurrent_queries_are_embedded_one_a_call() {
        let model = Arc::new(Recording::default());
        let coalescing = Coalescing::new(model.clone());
        let searches = (1..=4).map(|i| {
            let coalescing = coalescing.clone();
            async move { coalescing.embed_queries(texts(&[i])).await.unwrap() }
        });
        let answers = futures::future::join_all(searches).await;
        for (i, vectors) in (1..=4).zip(answers) {
            assert_eq!(vectors, vec![vec![i as f32]]);
        }
        assert_eq!(*model.0.lock().unwrap(), [(1, "query"); 4], "a call for each query");
    }

    #[tokio::test]
    async fn queries_go_to_the_query_path_and_big_calls_are_cut_into_pieces_in_their_order() {
        let model = Arc::new(Recording::default());
        let coalescing = Coalescing::new(model.clone());
        assert_eq!(coalescing.embed_queries(texts(&[3])).await.unwrap(), [[3.0]]);
        let sizes: Vec<usize> = (0..2 * PIECE + 1).map(|i| (i * 7) % 50 + 1).collect();
        let vectors = coalescing.embed(texts(&sizes)).await.unwrap();
        let expected: Vec<Vec<f32>> = sizes.iter().map(|&size| vec![size as f32]).collect();
        assert_eq!(vectors, expected, "each text's vector in its place");
        assert_eq!(*model.0.lock().unwrap(), [(1, "query"), (PIECE, "ingest"), (PIECE, "ingest"), (1, "ingest")]);
        assert!(coalescing.embed(Vec::new()).await.unwrap().is_empty());
        coalescing.embed(texts(&[5; SMALL_WRITE])).await.unwrap();
        coalescing.embed(texts(&[5; SMALL_WRITE + 1])).await.unwrap();
        let calls = model.0.lock().unwrap();
        assert_eq!(calls[4..], [(SMALL_WRITE, "write"), (PIECE, "ingest"), (1, "ingest")], "small requests are writes");
    }

    /// Records each call's texts and holds it until the test lets one through.
    struct Gated {
        calls: Mutex<Vec<Vec<String>>>,
        gate: Semaphore,
    }

    #[async_trait::async_trait]
    impl Embedder for Gated {
        async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
            self.calls.lock().unwrap().push(texts.clone());
            self.gate.acquire().await?.forget();
            Ok(texts.iter().map(|text| vec![text.len() as f32]).collect())
        }

        fn dimensions(&self) -> usize {
            1
        }

        fn model(&self) -> &str {
            "gated"
        }
    }

    /// Waits (at most 10 s) until the model has been called `count` times.
    async fn calls_reach(model: &Gated, count: usize) {
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while model.calls.lock().unwrap().len() < count {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        waited.await.unwrap_or_else(|_| panic!("the model was not called {count} times within 10 s"));
    }

    #[tokio::test]
    async fn another_teams_single_write_does_not_wait_for_an_imports_calls() {
        let model = Arc::new(Gated { calls: Mutex::new(Vec::new()), gate: Semaphore::new(0) });
        let coalescing = Coalescing::new(model.clone());
        let import: Vec<String> = (0..500).map(|i| format!("bulk passage {i:03}")).collect();
        let bulk = tokio::spawn({
            let (coalescing, import) = (coalescing.clone(), import.clone());
            async move { coalescing.embed_for("importer", import).await }
        });
        // Both of the bulk line's calls (two per core, one core) hold pieces of the import.
        calls_reach(&model, 2).await;
        let single = tokio::spawn({
            let coalescing = coalescing.clone();
            async move { coalescing.embed_for("neighbour", vec!["a single write".to_owned()]).await }
        });
        // No call of the import has ended, and the write's call has begun.
        calls_reach(&model, 3).await;
        assert_eq!(model.calls.lock().unwrap()[2], ["a single write"], "the write's call is its own");

        model.gate.add_permits(1_000);
        let single = tokio::time::timeout(Duration::from_secs(10), single).await.expect("the write is answered");
        assert_eq!(single.unwrap().unwrap(), [[14.0]]);
        let bulk = tokio::time::timeout(Duration::from_secs(10), bulk).await.expect("the import is answered");
        let expected: Vec<Vec<f32>> = import.iter().map(|text| vec![text.len() as f32]).collect();
        assert_eq!(bulk.unwrap().unwrap(), expected);
        let calls = model.calls.lock().unwrap();
        assert_eq!(calls.iter().map(Vec::len).sum::<usize>(), 501, "every text embedded once");
        assert!(calls.iter().all(|call| call.len() <= PIECE), "no call over a piece");
    }

    #[tokio::test]
    async fn teams_with_work_queued_take_turns() {
        let model = Arc::new(Gated { calls: Mutex::new(Vec::new()), gate: Semaphore::new(0) });
        let coalescing = Coalescing::new(model.clone());
        let a: Vec<String> = (0..3 * PIECE).map(|i| format!("a{i:03}")).collect();
        let b: Vec<String> = (0..3 * PIECE).map(|i| format!("b{i:03}")).collect();
        let first = tokio::spawn({
            let coalescing = coalescing.clone();
            async move { coalescing.embed_for("a", a).await }
        });
        calls_reach(&model, 2).await;
        let second = tokio::spawn({
            let coalescing = coalescing.clone();
            async move { coalescing.embed_for("b", b).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        model.gate.add_permits(1_000);
        for task in [first, second] {
            tokio::time::timeout(Duration::from_secs(10), task).await.expect("answered").unwrap().unwrap();
        }
        let teams: Vec<char> =
            model.calls.lock().unwrap().iter().map(|call| call[0].chars().next().unwrap_or('?')).collect();
        assert_eq!(teams, ['a', 'a', 'b', 'a', 'b', 'b'], "b's pieces alternate with a's once b queues");
    }
}
