//! Team versions pushed to this gateway: a subscriber on Redis's `switchboard:team-versions`
//! channel keeps the latest version of every team it has heard of, so that a request served
//! from a token lease (no script call) still knows whether the identity and sessions this
//! gateway keeps for its team are current.
//!
//! Exactness rests on the order of events. The identity service (or `admin`) publishes a new
//! version before it answers the change, so Redis has queued the message for every subscriber
//! before the caller hears back; a request the caller sends afterwards, through any gateway,
//! reads the subscription's socket itself before it looks at a version (`subscriber.rs`), and
//! finds the message there. What remains is the moment in which Redis, having answered the
//! publisher, has not yet written the message to the subscribers' sockets (one pass of its
//! event loop: microseconds), which docs/api-decisions.md states.
//!
//! A version is only known while subscribed. Before the first subscription and after a lost
//! connection the map is empty and [`VersionWatch::version`] answers `None`: requests then take
//! their tokens through the script, which reads the version as it always did, and
//! [`VersionWatch::learned`] keeps what such a read saw, but only if the subscription was live
//! for the whole read, so that no change can have slipped between the read and the map.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use switchboard_kit::backoff::Backoff;
use switchboard_kit::team_versions::CHANNEL;

use super::subscriber::{Event, Subscriber};

/// The versions heard, and which subscription they were heard on.
#[derive(Default)]
struct State {
    /// Counts subscriptions made and lost; odd while subscribed.
    generation: u64,
    versions: HashMap<String, i64>,
    subscriber: Option<Subscriber>,
}

#[derive(Default)]
pub struct VersionWatch {
    state: Mutex<State>,
}

/// A subscription's identity, taken before a script call that reads versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation(u64);

const RECONNECT: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
/// How often the subscription is read when no request reads it.
const POLL: Duration = Duration::from_millis(20);
/// How long connecting and subscribing may take before it counts as a failure.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

impl VersionWatch {
    /// Subscribes in a task of the current runtime; the task ends when the watch is dropped.
    pub fn start(url: &str) -> Arc<Self> {
        let url = url.to_owned();
        let watch = Arc::new(Self::default());
        let weak = Arc::downgrade(&watch);
        tokio::spawn(async move {
            let mut failures = 0;
            loop {
                match Subscriber::connect(&url, CHANNEL, CONNECT_TIMEOUT).await {
                    Ok(subscriber) => {
                        failures = 0;
                        tracing::info!("team versions: subscribed");
                        let Some(generation) = weak.upgrade().map(|watch| watch.subscribed(subscriber)) else { return };
                        // Takes messages off the socket when no request does, until it closes.
                        loop {
                            tokio::time::sleep(POLL).await;
                            let Some(watch) = weak.upgrade() else { return };
                            if !watch.follow(generation) {
                                break;
                            }
                        }
                        tracing::warn!("team versions: subscription lost; requests read versions from Redis");
                    }
                    Err(error) => {
                        failures += 1;
                        if failures == 1 {
                            tracing::warn!(%error, "team versions: not subscribed; requests read versions from Redis");
                        }
                    }
                }
                if weak.strong_count() == 0 {
                    return;
                }
                tokio::time::sleep(RECONNECT.after(failures.max(1))).await;
            }
        });
        watch
    }

    /// Starts a subscription's generation with an empty map.
    fn subscribed(&self, subscriber: Subscriber) -> Generation {
        let mut state = self.state.lock();
        state.versions.clear();
        state.generation += 1 + state.generation % 2;
        state.subscriber = Some(subscriber);
        Generation(state.generation)
    }

    /// Reads what the subscription received; false once that subscription is over.
    fn follow(&self, generation: Generation) -> bool {
        let mut state = self.state.lock();
        read(&mut state);
        state.generation == generation.0
    }

    /// The team's current version, when subscribed and known.
    pub fn version(&self, team_id: &str) -> Option<i64> {
        let mut state = self.state.lock();
        read(&mut state);
        if !live(state.generation) {
            return None;
        }
        state.versions.get(team_id).copied()
    }

    /// The live subscription, if any: taken before a script call whose versions are to be kept.
    pub fn generation(&self) -> Option<Generation> {
        let mut state = self.state.lock();
        read(&mut state);
        live(state.generation).then_some(Generation(state.generation))
    }

    /// Keeps a version a script call read, if the subscription that was live when the call
    /// started still is, and nothing newer was heard meanwhile.
    pub fn learned(&self, generation: Generation, team_id: &str, version: i64) {
        let mut state = self.state.lock();
        read(&mut state);
        if state.generation == generation.0 && !state.versions.contains_key(team_id) {
            state.versions.insert(team_id.to_owned(), version);
        }
    }
}

/// Generations count subscriptions made and lost: odd while one is live.
fn live(generation: u64) -> bool {
    generation & 1 == 1
}

/// Applies every message the subscription has received; ends it when its connection closed.
fn read(state: &mut State) {
    let Some(subscriber) = state.subscriber.as_mut() else { return };
    for event in subscriber.read() {
        match event {
            Event::Message(payload) => match std::str::from_utf8(&payload).ok().and_then(parse) {
                Some((team_id, version)) => {
                    state.versions.insert(team_id.to_owned(), version);
                }
                None => tracing::warn!("team versions: a message that is not `<team> <version>`"),
            },
            Event::Closed => {
                state.subscriber = None;
                state.versions.clear();
                state.generation += state.generation % 2;
                return;
            }
        }
    }
}

fn parse(payload: &str) -> Option<(&str, i64)> {
    let (team_id, version) = payload.split_once(' ')?;
    Some((team_id, version.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch whose subscription is live (no socket: what it hears is applied by hand).
    fn live() -> VersionWatch {
        let watch = VersionWatch::default();
        watch.state.lock().generation = 1;
        watch
    }

    fn heard(watch: &VersionWatch, team_id: &str, version: i64) {
        watch.state.lock().versions.insert(team_id.to_owned(), version);
    }

    fn lost(watch: &VersionWatch) {
        let mut state = watch.state.lock();
        state.versions.clear();
        state.generation += 1;
    }

    #[test]
    fn nothing_is_known_until_subscribed() {
        let watch = VersionWatch::default();
        heard(&watch, "a", 1);
        assert_eq!(watch.version("a"), None);
        assert_eq!(watch.generation(), None);
    }

    #[test]
    fn a_read_is_kept_only_if_the_subscription_lasted_and_nothing_newer_was_heard() {
        let watch = live();
        let during = watch.generation().expect("subscribed");
        heard(&watch, "a", 5);
        watch.learned(during, "a", 4);
        assert_eq!(watch.version("a"), Some(5), "a message heard during the read is newer");
        watch.learned(during, "b", 7);
        assert_eq!(watch.version("b"), Some(7));

        lost(&watch);
        assert_eq!(watch.version("b"), None);
        watch.state.lock().generation += 1;
        watch.learned(during, "c", 1);
        assert_eq!(watch.version("c"), None, "read under a subscription that was lost since");
    }

    #[test]
    fn messages_are_team_and_version() {
        assert_eq!(parse("team_1 42"), Some(("team_1", 42)));
        assert_eq!(parse("team_1"), None);
        assert_eq!(parse("team_1 x"), None);
    }
}
