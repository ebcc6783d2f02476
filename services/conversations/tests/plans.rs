//! How PostgreSQL plans the lists of calls and chats (PostgreSQL only: skipped, like the store
//! tests' PostgreSQL pass, when `TEST_DATABASE_URL` is not set, and failing then when
//! `SWITCHBOARD_REQUIRE_POSTGRES` is).
//!
//! Each test fills a fresh database with tens of thousands of conversations of two teams and
//! their search text (`VACUUM ANALYZE`d, so that the planner sees what a real database shows
//! it), runs lists through the store while `listing::recorded` catches every statement they
//! run, and checks the plan each statement gets for its own values: the index it was shaped
//! for is read, and the big tables are never read whole. Why the lists are shaped so, with
//! the measurements: BENCHMARKS.md, "Why the lists are planned the way they are".

#![allow(clippy::unwrap_used)]

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use switchboard_conversations::ConversationStore;
use switchboard_conversations::store::{CallFilter, CallSort, Channel, ChatFilter, ChatSort, ChatStatus, Direction};
use switchboard_kit::listing::{self, Step};
use switchboard_kit::signature::Signature;
use switchboard_kit::testdb::{self, Explainer, TestDatabase};

/// The measured team's calls (and chats); the other team has half as many.
const CONVERSATIONS: usize = 30_000;
const START_MS: i64 = 1_700_000_000_000;
/// A call (a chat) starts every 30 s.
const SPACING_MS: i64 = 30_000;
/// Rows per INSERT while seeding.
const CHUNK: usize = 1_000;
/// How long a test may take in all.
const DEADLINE: Duration = Duration::from_secs(180);

/// In about half of the transcript rows: frequent enough that the planner's estimate alone
/// tells (a frequent search, matched inside the list's statements).
const FREQUENT: &str = "thanks";
/// In about 4 % of the transcript rows: more matches than are carried, found by reading them.
const SAMPLED: &str = "parking";
/// In about 0.15 % of them: rare, its matches carried by id.
const RARE: &str = "quokka";

/// What callers and agents say, besides the searched words.
static WORDS: LazyLock<Vec<&str>> = LazyLock::new(|| {
    "hello calling about my order delivery tomorrow morning account invoice refund please could you check \
     address number appointment monday friday weekend opening hours price booking table cancel change \
     email password reset card payment late early store branch manager question answer help today later \
     again great fine sure okay right wait moment transfer team support service plan upgrade"
        .split_whitespace()
        .collect()
});

/// A small deterministic generator (xorshift64*), so that every run seeds the same data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap()
    }

    /// True `per_10000` times in 10,000.
    fn chance(&mut self, per_10000: usize) -> bool {
        self.below(10_000) < per_10000
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.below(WORDS.len())]
    }
}

/// A line of what was said: a few words, sometimes one of the searched ones.
fn utterance(rng: &mut Rng) -> String {
    let mut words: Vec<&str> = (0..6 + rng.below(8)).map(|_| rng.word()).collect();
    for (word, per_10000) in [(FREQUENT, 5_000), (SAMPLED, 400), (RARE, 15)] {
        if rng.chance(per_10000) {
            let at = rng.below(words.len());
            words.insert(at, word);
        }
    }
    words.join(" ")
}

fn number(rng: &mut Rng) -> String {
    format!("+1415555{:04}", rng.below(10_000))
}

/// The id of the `n`th conversation of a team: a UUID like the store's.
fn id(team: &str, n: usize) -> String {
    let team = uuid::Uuid::parse_str(team).unwrap().as_u128();
    uuid::Uuid::from_u128(team ^ (u128::try_from(n).unwrap() + 1).rotate_left(64)).to_string()
}

/// A signature as a PostgreSQL hex bit string (`X'...'`, 4 bits a digit, bit 0 first).
fn hex_signature(signature: &Signature) -> String {
    let bits = signature.bit_string();
    let digits: String = bits
        .as_bytes()
        .chunks(4)
        .map(|nibble| {
            let value = nibble.iter().fold(0u32, |value, bit| value * 2 + u32::from(*bit == b'1'));
            char::from_digit(value, 16).unwrap()
        })
        .collect();
    format!("X'{digits}'")
}

/// Inserts `rows` (each a parenthesised list of SQL literals) into `head`'s table, a chunk at a time.
async fn insert(store: &ConversationStore, head: &str, rows: &[String]) {
    for chunk in rows.chunks(CHUNK) {
        sqlx::query(&format!("{head} VALUES {}", chunk.join(", "))).execute(store.db().pool()).await.unwrap();
    }
}

/// A fresh PostgreSQL database with the store's tables, and an [`Explainer`] on it; `None`
/// when PostgreSQL is not configured (and not required).
async fn postgres_store() -> Option<(TestDatabase, ConversationStore, Explainer)> {
    let database = testdb::postgres().await.unwrap()?;
    let store = ConversationStore::open(&database.url).await.unwrap();
    let explainer = Explainer::connect(&database.url, store.db().pool()).await.unwrap();
    Some((database, store, explainer))
}

/// The teams of the test (fixed, like everything seeded, so that every run plans the same data).
const MEASURED: &str = "0b9a3d52-6a4e-4c51-9d0f-3f6f2c1e7a10";
const OTHER: &str = "7c2e91f4-1d38-4b7a-8e65-b0a4d9c3f281";

/// `count` calls of `team` with their search rows (a meta row, two transcript rows) and
/// signatures, as the store writes them. About 3 % are in progress (no end, no duration).
async fn seed_calls(store: &ConversationStore, team: &str, count: usize, rng: &mut Rng) {
    let agents: Vec<String> = (0..5).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let (mut calls, mut search) = (Vec::with_capacity(count), Vec::with_capacity(count * 3));
    for n in 0..count {
        let call_id = id(team, n);
        let started_at = START_MS + i64::try_from(n).unwrap() * SPACING_MS + i64::try_from(rng.below(20_000)).unwrap();
        let ended = !rng.chance(300);
        let duration = i64::try_from(5 + rng.below(1_800)).unwrap();
        let (ended_at, duration_seconds, status) = if ended {
            ((started_at + duration * 1_000).to_string(), duration.to_string(), "completed")
        } else {
            ("NULL".to_owned(), "NULL".to_owned(), "in-progress")
        };
        let direction = if rng.chance(6_000) { Direction::Incoming } else { Direction::Outgoing };
        let (from, to) = (number(rng), "+14155550100".to_owned());
        let summary = format!("caller asked about the {} {}", rng.word(), rng.word());
        let texts = [format!("{from}\n{to}\n{summary}"), utterance(rng), utterance(rng)];
        let mut signature = String::new();
        for (index, body) in texts.iter().enumerate() {
            let source = if index == 0 { "meta" } else { "transcript" };
            search.push(format!("('{call_id}', '{team}', '{source}', '{body}')"));
            signature.push_str(body);
            signature.push('\n');
        }
        calls.push(format!(
            "('{call_id}', '{team}', 'ext-{n}', '{agent}', '{from}', '{to}', '{direction}', '{status}', {started_at}, \
             {ended_at}, {duration_seconds}, '{summary}', 0, 0, 0, {started_at}, {started_at}, {signature})",
            agent = agents[rng.below(agents.len())],
            direction = direction.as_str(),
            signature = hex_signature(&Signature::of(&signature)),
        ));
    }
    let head = "INSERT INTO calls (id, team_id, external_id, agent_id, from_number, to_number, direction, status, \
                started_at, ended_at, duration_seconds, summary, flagged, favorite, spam, created_at, updated_at, \
                text_signature)";
    insert(store, head, &calls).await;
    insert(store, "INSERT INTO call_search (call_id, team_id, source, body)", &search).await;
}

/// `count` chats of `team` with their search rows (a contact row, one or two rows of
/// messages) and signatures. About 5 % have no message yet (no `last_message_at`).
async fn seed_chats(store: &ConversationStore, team: &str, count: usize, rng: &mut Rng) {
    let agents: Vec<String> = (0..5).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let (mut chats, mut search) = (Vec::with_capacity(count), Vec::with_capacity(count * 3));
    for n in 0..count {
        let chat_id = id(team, n);
        let created_at = START_MS + i64::try_from(n).unwrap() * SPACING_MS;
        let channel = Channel::ALL[rng.below(Channel::ALL.len())];
        let status = if rng.chance(2_000) { ChatStatus::Active } else { ChatStatus::Ended };
        let (contact_number, contact_email) = (number(rng), format!("user{}@example.com", rng.below(50_000)));
        let mut texts = vec![format!("{contact_number}\n{contact_email}")];
        let messages = if rng.chance(500) { 0 } else { 1 + rng.below(2) };
        texts.extend((0..messages).map(|_| utterance(rng)));
        let last_message_at = if messages == 0 {
            "NULL".to_owned()
        } else {
            (created_at + i64::try_from(rng.below(3_600_000)).unwrap()).to_string()
        };
        let mut signature = String::new();
        for (index, body) in texts.iter().enumerate() {
            let source = if index == 0 { "contact" } else { "messages" };
            search.push(format!("('{chat_id}', '{team}', '{source}', '{body}')"));
            signature.push_str(body);
            signature.push('\n');
        }
        chats.push(format!(
            "('{chat_id}', '{team}', 'ext-{n}', '{agent}', '{channel}', '{status}', '{contact_number}', \
             '{contact_email}', {count}, {last_message_at}, {created_at}, {created_at}, {signature})",
            agent = agents[rng.below(agents.len())],
            channel = channel.as_str(),
            status = status.as_str(),
            count = messages * 4,
            signature = hex_signature(&Signature::of(&signature)),
        ));
    }
    let head = "INSERT INTO chats (id, team_id, external_id, agent_id, channel, status, contact_number, \
                contact_email, message_count, last_message_at, created_at, updated_at, text_signature)";
    insert(store, head, &chats).await;
    insert(store, "INSERT INTO chat_search (chat_id, team_id, source, body)", &search).await;
}

/// What autovacuum would have done by the time a real table is this big: statistics for the
/// planner, and the visibility map that makes index-only scans cheap.
async fn vacuum_analyze(store: &ConversationStore, tables: &str) {
    sqlx::raw_sql(&format!("VACUUM ANALYZE {tables}")).execute(store.db().pool()).await.unwrap();
}

/// Drops the test's database once it passed (a failing test leaves it for a look).
async fn dropped(database: TestDatabase, store: ConversationStore, explainer: Explainer) {
    drop(explainer);
    store.db().close().await;
    testdb::drop_postgres(database).await.unwrap();
}

fn calls_filter() -> CallFilter {
    CallFilter {
        page: 1,
        limit: 20,
        search: None,
        direction: None,
        agent_id: None,
        min_duration: None,
        max_duration: None,
        created_from_ms: None,
        created_to_ms: None,
        number: None,
        sentiment: None,
        successful: None,
        disconnection_reason: None,
        sort: CallSort::CreatedAt,
        ascending: false,
    }
}

fn chats_filter() -> ChatFilter {
    ChatFilter {
        page: 1,
        limit: 20,
        search: None,
        channel: None,
        agent_id: None,
        status: None,
        created_from_ms: None,
        created_to_ms: None,
        sort: ChatSort::CreatedAt,
        ascending: false,
    }
}

/// Where a day of the measured team's conversations starts and ends, `days` after the first.
fn day(days: i64) -> (Option<i64>, Option<i64>) {
    let from = START_MS + days * 86_400_000;
    (Some(from), Some(from + 86_400_000 - 1))
}

/// For each step a list must take, the indexes its plans must read.
type Expected = &'static [(Step, &'static [&'static str])];

/// Fails with every failure at once, each with its statement and whole plan.
fn assert_no_failures(failures: &[String]) {
    assert!(failures.is_empty(), "{} list statement(s) lost their plan:\n\n{}", failures.len(), failures.join("\n\n"));
}

const CALL_TABLES: &[&str] = &["calls", "call_search"];

#[tokio::test]
async fn call_lists_keep_their_plans() {
    tokio::time::timeout(DEADLINE, async {
        let Some((database, store, mut explainer)) = postgres_store().await else { return };
        let started = Instant::now();
        let mut rng = Rng(0x5eed_ca11);
        seed_calls(&store, MEASURED, CONVERSATIONS, &mut rng).await;
        seed_calls(&store, OTHER, CONVERSATIONS / 2, &mut rng).await;
        vacuum_analyze(&store, "calls, call_search").await;
        eprintln!("seeded {} calls in {:?}", CONVERSATIONS * 3 / 2, started.elapsed());

        let (from, to) = day(3);
        // A count is read from any index led by the team and its filters (the smallest one
        // wins); a page walks the index of its sort key, or of its sort key and its selective
        // filter, to the page; a rare search looks its carried ids up by id; a frequent one
        // walks the sort index probing each row's text (after its signature), and counts its
        // first 1,001 matches as a semi-join, never reading either table whole.
        let cases: &[(&str, CallFilter, Expected)] = &[
            (
                "calls by callType, newest first",
                CallFilter { direction: Some(Direction::Incoming), ..calls_filter() },
                &[
                    (Step::Count, &["calls_direction|calls_direction_duration"]),
                    (Step::Page, &["calls_started|calls_direction"]),
                ],
            ),
            (
                "calls by duration range, shortest first",
                CallFilter {
                    min_duration: Some(60),
                    max_duration: Some(300),
                    sort: CallSort::Duration,
                    ascending: true,
                    ..calls_filter()
                },
                &[(Step::Count, &["calls_duration"]), (Step::Page, &["calls_duration"])],
            ),
            (
                "calls of one day, page 3",
                CallFilter { created_from_ms: from, created_to_ms: to, page: 3, ..calls_filter() },
                &[(Step::Count, &["calls_started"]), (Step::Page, &["calls_started"])],
            ),
            (
                "incoming calls of one day by duration, longest first",
                CallFilter {
                    direction: Some(Direction::Incoming),
                    created_from_ms: from,
                    created_to_ms: to,
                    min_duration: Some(30),
                    sort: CallSort::Duration,
                    ..calls_filter()
                },
                &[(Step::Count, &["calls_direction"]), (Step::Page, &["calls_direction_duration"])],
            ),
            (
                "calls searched for a rare word",
                CallFilter { search: Some(RARE.to_uppercase()), ..calls_filter() },
                &[
                    (Step::SearchMatches, &["call_search_body"]),
                    (Step::Count, &["calls_pkey"]),
                    (Step::Page, &["calls_pkey"]),
                ],
            ),
            (
                "incoming calls searched for a word too frequent to carry, by duration",
                CallFilter {
                    search: Some(SAMPLED.into()),
                    direction: Some(Direction::Incoming),
                    sort: CallSort::Duration,
                    ..calls_filter()
                },
                &[
                    (Step::SearchMatches, &["call_search_body"]),
                    (Step::CountSampled, &["calls_pkey|calls_direction|calls_direction_duration"]),
                    (Step::Page, &["calls_direction_duration|calls_duration", "call_search_call"]),
                ],
            ),
            (
                "calls searched for a frequent word, newest first",
                CallFilter { search: Some(FREQUENT.into()), ..calls_filter() },
                &[
                    (Step::CountUpTo, &["call_search_body|call_search_call"]),
                    (Step::Page, &["calls_started", "call_search_call"]),
                ],
            ),
        ];
        let mut failures = Vec::new();
        for (name, filter, expected) in cases {
            let (listed, statements) = listing::recorded(store.list_calls(MEASURED, filter)).await;
            let (calls, page) = listed.unwrap();
            assert!(!calls.is_empty(), "{name}: listed no call");
            eprintln!("{name}: {} calls of {}", calls.len(), page.total_count);
            failures.extend(explainer.check_list(name, &statements, expected, CALL_TABLES).await.unwrap());
        }
        assert_no_failures(&failures);
        eprintln!("call lists checked in {:?}", started.elapsed());
        dropped(database, store, explainer).await;
    })
    .await
    .expect("the test took too long");
}

const CHAT_TABLES: &[&str] = &["chats", "chat_search"];

/// A count of all the team's chats may read any index led by the team.
const ANY_CHATS_INDEX: &str = "chats_created|chats_last_message|chats_agent|chats_channel|chats_status";

#[tokio::test]
async fn chat_lists_keep_their_plans() {
    tokio::time::timeout(DEADLINE, async {
        let Some((database, store, mut explainer)) = postgres_store().await else { return };
        let started = Instant::now();
        let mut rng = Rng(0x5eed_c4a7);
        seed_chats(&store, MEASURED, CONVERSATIONS, &mut rng).await;
        seed_chats(&store, OTHER, CONVERSATIONS / 2, &mut rng).await;
        vacuum_analyze(&store, "chats, chat_search").await;
        eprintln!("seeded {} chats in {:?}", CONVERSATIONS * 3 / 2, started.elapsed());

        // As for calls (see call_lists_keep_their_plans).
        let cases: &[(&str, ChatFilter, Expected)] = &[
            (
                "chats, newest first",
                chats_filter(),
                &[(Step::Count, &[ANY_CHATS_INDEX]), (Step::Page, &["chats_created"])],
            ),
            (
                "chats by last message, page 5",
                ChatFilter { sort: ChatSort::LastMessageAt, page: 5, ..chats_filter() },
                &[(Step::Count, &[ANY_CHATS_INDEX]), (Step::Page, &["chats_last_message"])],
            ),
            (
                "whatsapp chats",
                ChatFilter { channel: Some(Channel::Whatsapp), ..chats_filter() },
                &[(Step::Count, &["chats_channel"]), (Step::Page, &["chats_channel"])],
            ),
            (
                "active chats by last message",
                ChatFilter { status: Some(ChatStatus::Active), sort: ChatSort::LastMessageAt, ..chats_filter() },
                &[(Step::Count, &["chats_status"]), (Step::Page, &["chats_last_message|chats_status"])],
            ),
            (
                "chats searched for a rare word",
                ChatFilter { search: Some(RARE.into()), ..chats_filter() },
                &[
                    (Step::SearchMatches, &["chat_search_body"]),
                    (Step::Count, &["chats_pkey"]),
                    (Step::Page, &["chats_pkey"]),
                ],
            ),
            (
                "chats searched for a frequent word, by last message",
                ChatFilter { search: Some(FREQUENT.into()), sort: ChatSort::LastMessageAt, ..chats_filter() },
                &[
                    (Step::CountUpTo, &["chat_search_body|chat_search_chat"]),
                    (Step::Page, &["chats_last_message", "chat_search_chat"]),
                ],
            ),
        ];
        let mut failures = Vec::new();
        for (name, filter, expected) in cases {
            let (listed, statements) = listing::recorded(store.list_chats(MEASURED, filter)).await;
            let (chats, page) = listed.unwrap();
            assert!(!chats.is_empty(), "{name}: listed no chat");
            eprintln!("{name}: {} chats of {}", chats.len(), page.total_count);
            failures.extend(explainer.check_list(name, &statements, expected, CHAT_TABLES).await.unwrap());
        }
        assert_no_failures(&failures);
        eprintln!("chat lists checked in {:?}", started.elapsed());
        dropped(database, store, explainer).await;
    })
    .await
    .expect("the test took too long");
}
