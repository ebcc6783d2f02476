//! Flat combining per key: requests that need the same upstream call while one for their
//! key is in flight wait for it to end, and are then served together by one call that the
//! first of them makes. Each waiting request gets its share of that call's result.
//!
//! The call a request is served by always *starts after the request arrived*, so nothing
//! it returns is older than the request: a batch only ever merges requests that were all
//! waiting when the call began. Under load, a hot key costs one upstream call per batch
//! instead of one per request; a lone request pays nothing but a map lookup.
//!
//! Used by the Redis rate limiter (one script call takes the tokens of a whole batch) and
//! by reads that many clients of one team repeat (`GET /me`).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::Hash;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// What a waiting request is told when the call in flight for its key ends.
enum Turn<O> {
    /// Served by the batch that just ended.
    Done(O),
    /// First in line: it makes the next call for everyone queued behind it.
    Lead,
}

type Queue<O> = VecDeque<oneshot::Sender<Turn<O>>>;

pub struct Combiner<K, O> {
    /// One entry per key with a call in flight: the requests waiting for the next call.
    queues: Mutex<HashMap<K, Queue<O>>>,
}

impl<K, O> Default for Combiner<K, O> {
    fn default() -> Self {
        Self { queues: Mutex::new(HashMap::new()) }
    }
}

impl<K: Hash + Eq + Clone, O> Combiner<K, O> {
    /// Serves this request: alone (`call(1)`) when no call for `key` is in flight, else in the
    /// next batch. A batch of `n` requests runs `call(n)` once; request `i` of the batch
    /// (0 is the one that made the call) gets `share(&result, i)`.
    pub async fn run<R, Fut>(&self, key: K, call: impl FnOnce(usize) -> Fut, share: impl Fn(&R, usize) -> O) -> O
    where
        Fut: Future<Output = R>,
    {
        let (sender, receiver) = oneshot::channel();
        let waits = {
            let mut queues = self.queues.lock();
            match queues.get_mut(&key) {
                Some(queue) => {
                    queue.push_back(sender);
                    true
                }
                None => {
                    queues.insert(key.clone(), VecDeque::new());
                    false
                }
            }
        };
        if waits {
            match receiver.await {
                Ok(Turn::Done(output)) => return output,
                Ok(Turn::Lead) => {}
                // The request that made the call went away before it shared the result (its
                // client disconnected): this one makes its own call, outside any batch.
                Err(_) => return share(&call(1).await, 0),
            }
        }
        let _handover = Handover { queues: &self.queues, key: &key };
        let followers = self.queues.lock().get_mut(&key).map(std::mem::take).unwrap_or_default();
        let result = call(followers.len() + 1).await;
        for (index, follower) in (1..).zip(followers) {
            // A follower whose client went away no longer listens; nothing is lost.
            let _ = follower.send(Turn::Done(share(&result, index)));
        }
        share(&result, 0)
    }
}

/// Hands the key to the first request still waiting for it, or marks it idle; runs when the
/// leader is done, and also when its future is dropped half-way.
struct Handover<'a, K: Hash + Eq, O> {
    queues: &'a Mutex<HashMap<K, Queue<O>>>,
    key: &'a K,
}

impl<K: Hash + Eq, O> Drop for Handover<'_, K, O> {
    fn drop(&mut self) {
        let mut queues = self.queues.lock();
        while let Some(queue) = queues.get_mut(self.key) {
            let Some(next) = queue.pop_front() else {
                queues.remove(self.key);
                return;
            };
            if next.send(Turn::Lead).is_ok() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_lone_request_makes_its_own_call() {
        let combiner = Combiner::<&str, usize>::default();
        assert_eq!(combiner.run("k", |n| async move { n * 10 }, |r, i| r + i).await, 10);
        assert_eq!(combiner.run("k", |n| async move { n * 10 }, |r, i| r + i).await, 10);
        assert!(combiner.queues.lock().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_arriving_during_a_call_share_the_next_one() {
        let combiner = Arc::new(Combiner::<&str, (usize, usize)>::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        // The first request's call blocks until released, so the others queue behind it.
        let first = {
            let (combiner, calls, mut released) = (combiner.clone(), calls.clone(), released.clone());
            tokio::spawn(async move {
                combiner
                    .run(
                        "k",
                        |n| async move {
                            calls.fetch_add(1, Ordering::SeqCst);
                            let _ = released.wait_for(|r| *r).await;
                            n
                        },
                        |n, i| (*n, i),
                    )
                    .await
            })
        };
        // Wait until the first call has started: requests arriving before it took its
        // followers would join its batch instead of queueing for the next.
        while calls.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let others: Vec<_> = (0..5)
            .map(|_| {
                let (combiner, calls) = (combiner.clone(), calls.clone());
                tokio::spawn(async move {
                    combiner
                        .run(
                            "k",
                            |n| async move {
                                calls.fetch_add(1, Ordering::SeqCst);
                                n
                            },
                            |n, i| (*n, i),
                        )
                        .await
                })
            })
            .collect();
        while combiner.queues.lock().get("k").map_or(0, VecDeque::len) < 5 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        release.send(true).unwrap();
        assert_eq!(first.await.unwrap(), (1, 0));
        let mut shares = Vec::new();
        for other in others {
            shares.push(other.await.unwrap());
        }
        shares.sort();
        assert_eq!(shares, [(5, 0), (5, 1), (5, 2), (5, 3), (5, 4)], "one call of 5 served the five waiting requests");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(combiner.queues.lock().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_that_goes_away_hands_over_to_the_next_request() {
        let combiner = Arc::new(Combiner::<&str, usize>::default());
        let calling = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let leader = {
            let (combiner, calling) = (combiner.clone(), calling.clone());
            let call = move |_| {
                calling.store(true, Ordering::SeqCst);
                std::future::pending::<usize>()
            };
            tokio::spawn(async move { combiner.run("k", call, |r, _| *r).await })
        };
        // The leader has taken its (empty) batch: the follower queues for the next call.
        while !calling.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        let follower = {
            let combiner = combiner.clone();
            tokio::spawn(async move { combiner.run("k", |n| async move { n }, |r, _| *r).await })
        };
        while combiner.queues.lock().get("k").map_or(0, VecDeque::len) < 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        leader.abort();
        assert_eq!(follower.await.unwrap(), 1, "the follower led a batch of its own");
        assert!(combiner.queues.lock().is_empty());
    }
}
