//! Flat combining: requests that need the same kind of upstream call while one is in flight
//! for their key wait for it to end, and are then served together by one call that the first
//! of them makes with every waiting request's input. Each request gets its share of that
//! call's result.
//!
//! The call a request is served by always *starts after the request arrived*, so nothing
//! it returns is older than the request: a batch only ever merges requests that were all
//! waiting when the call began. Under load, a key costs one upstream call per batch instead
//! of one per request; a lone request pays nothing but a map lookup.
//!
//! Keys are not tenants: the Redis rate limiter and the identity reads of `GET /me` put the
//! requests of every team under one key, so that a batch carries the requests of many teams
//! (one script call for many buckets, one read for many teams). One queue measured best:
//! with the keys of 64 teams `GET /me` did 18,735 requests/s, and 15,695 with the teams spread
//! over four queues (smaller batches, more round trips; bench/gateway-me.sh).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::Hash;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// What a waiting request is told when the call in flight for its key ends.
enum Turn<I, O> {
    /// Served by the batch that just ended.
    Done(O),
    /// First in line: it makes the next call, with its own input back, for everyone queued
    /// behind it.
    Lead(I),
}

struct Waiting<I, O> {
    input: I,
    reply: oneshot::Sender<Turn<I, O>>,
}

type Queue<I, O> = VecDeque<Waiting<I, O>>;

pub struct Combiner<K, I, O> {
    /// One entry per key with a call in flight: the requests waiting for the next call.
    queues: Mutex<HashMap<K, Queue<I, O>>>,
    /// The most inputs one call carries; later arrivals wait for the next call.
    most: usize,
}

impl<K, I, O> Combiner<K, I, O> {
    /// A combiner whose calls carry at most `most` inputs (at least 1).
    pub fn new(most: usize) -> Self {
        Self { queues: Mutex::new(HashMap::new()), most: most.max(1) }
    }
}

impl<K, I, O> Default for Combiner<K, I, O> {
    fn default() -> Self {
        Self::new(usize::MAX)
    }
}

impl<K: Hash + Eq + Clone, I: Clone, O> Combiner<K, I, O> {
    /// Serves this request: alone (`call(vec![input])`) when no call for `key` is in flight,
    /// else in a later batch. A batch runs `call(inputs)` once, its maker's input first;
    /// request `i` of the batch gets `share(&result, i)`.
    pub async fn run<R, Fut>(
        &self,
        key: K,
        input: I,
        call: impl FnOnce(Vec<I>) -> Fut,
        share: impl Fn(&R, usize) -> O,
    ) -> O
    where
        Fut: Future<Output = R>,
    {
        let (reply, receiver) = oneshot::channel();
        let waits = {
            let mut queues = self.queues.lock();
            match queues.get_mut(&key) {
                Some(queue) => {
                    queue.push_back(Waiting { input: input.clone(), reply });
                    true
                }
                None => {
                    queues.insert(key.clone(), VecDeque::new());
                    false
                }
            }
        };
        let input = if waits {
            match receiver.await {
                Ok(Turn::Done(output)) => return output,
                Ok(Turn::Lead(input)) => input,
                // The request that made the call went away before it shared the result (its
                // client disconnected): this one makes its own call, outside any batch.
                Err(_) => return share(&call(vec![input]).await, 0),
            }
        } else {
            input
        };
        let _handover = Handover { queues: &self.queues, key: &key };
        let followers: Vec<Waiting<I, O>> = {
            let mut queues = self.queues.lock();
            match queues.get_mut(&key) {
                Some(queue) => {
                    let taken = queue.len().min(self.most - 1);
                    queue.drain(..taken).collect()
                }
                None => Vec::new(),
            }
        };
        let mut inputs = Vec::with_capacity(followers.len() + 1);
        inputs.push(input);
        let mut replies = Vec::with_capacity(followers.len());
        for follower in followers {
            inputs.push(follower.input);
            replies.push(follower.reply);
        }
        let result = call(inputs).await;
        for (index, reply) in (1..).zip(replies) {
            // A follower whose client went away no longer listens; nothing is lost.
            let _ = reply.send(Turn::Done(share(&result, index)));
        }
        share(&result, 0)
    }
}

/// Hands the key to the first request still waiting for it, or marks it idle; runs when the
/// leader is done, and also when its future is dropped half-way.
struct Handover<'a, K: Hash + Eq, I, O> {
    queues: &'a Mutex<HashMap<K, Queue<I, O>>>,
    key: &'a K,
}

impl<K: Hash + Eq, I, O> Drop for Handover<'_, K, I, O> {
    fn drop(&mut self) {
        let mut queues = self.queues.lock();
        while let Some(queue) = queues.get_mut(self.key) {
            let Some(next) = queue.pop_front() else {
                queues.remove(self.key);
                return;
            };
            if next.reply.send(Turn::Lead(next.input)).is_ok() {
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
        let combiner = Combiner::<&str, (), usize>::default();
        assert_eq!(combiner.run("k", (), |n: Vec<()>| async move { n.len() * 10 }, |r, i| r + i).await, 10);
        assert_eq!(combiner.run("k", (), |n: Vec<()>| async move { n.len() * 10 }, |r, i| r + i).await, 10);
        assert!(combiner.queues.lock().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_arriving_during_a_call_share_the_next_one() {
        let combiner = Arc::new(Combiner::<&str, (), (usize, usize)>::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        // The first request's call blocks until released, so the others queue behind it.
        let first = {
            let (combiner, calls, mut released) = (combiner.clone(), calls.clone(), released.clone());
            tokio::spawn(async move {
                combiner
                    .run(
                        "k",
                        (),
                        |n: Vec<()>| async move {
                            calls.fetch_add(1, Ordering::SeqCst);
                            let _ = released.wait_for(|r| *r).await;
                            n.len()
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
                            (),
                            |n: Vec<()>| async move {
                                calls.fetch_add(1, Ordering::SeqCst);
                                n.len()
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
        let combiner = Arc::new(Combiner::<&str, (), usize>::default());
        let calling = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let leader = {
            let (combiner, calling) = (combiner.clone(), calling.clone());
            let call = move |_: Vec<()>| {
                calling.store(true, Ordering::SeqCst);
                std::future::pending::<usize>()
            };
            tokio::spawn(async move { combiner.run("k", (), call, |r, _| *r).await })
        };
        // The leader has taken its (empty) batch: the follower queues for the next call.
        while !calling.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        let follower = {
            let combiner = combiner.clone();
            tokio::spawn(async move { combiner.run("k", (), |n: Vec<()>| async move { n.len() }, |r, _| *r).await })
        };
        while combiner.queues.lock().get("k").map_or(0, VecDeque::len) < 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        leader.abort();
        assert_eq!(follower.await.unwrap(), 1, "the follower led a batch of its own");
        assert!(combiner.queues.lock().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_carries_every_input_up_to_its_most() {
        let combiner = Arc::new(Combiner::<u8, u32, Vec<u32>>::new(3));
        let (release, released) = tokio::sync::watch::channel(false);
        let calling = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let first = {
            let (combiner, calling, mut released) = (combiner.clone(), calling.clone(), released.clone());
            tokio::spawn(async move {
                let call = |inputs: Vec<u32>| async move {
                    calling.store(true, Ordering::SeqCst);
                    let _ = released.wait_for(|r| *r).await;
                    inputs
                };
                combiner.run(0, 0, call, |inputs, _| inputs.clone()).await
            })
        };
        while !calling.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        let mut others = Vec::new();
        for input in 1..=4u32 {
            let shared = combiner.clone();
            others.push(tokio::spawn(async move {
                shared.run(0, input, |inputs: Vec<u32>| async move { inputs }, |inputs, _| inputs.clone()).await
            }));
            // In order of arrival, so that the batches are known.
            while combiner.queues.lock().get(&0).map_or(0, VecDeque::len) < usize::try_from(input).unwrap() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        release.send(true).unwrap();
        assert_eq!(first.await.unwrap(), [0]);
        let mut batches = Vec::new();
        for other in others {
            batches.push(other.await.unwrap());
        }
        assert_eq!(batches, [vec![1, 2, 3], vec![1, 2, 3], vec![1, 2, 3], vec![4]], "three inputs per call, in order");
        assert!(combiner.queues.lock().is_empty());
    }
}
