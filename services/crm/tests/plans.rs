//! How PostgreSQL plans the contact lists: searches and tag filters (PostgreSQL only: skipped,
//! like the store tests' PostgreSQL pass, when `TEST_DATABASE_URL` is not set, and failing then
//! when `SWITCHBOARD_REQUIRE_POSTGRES` is).
//!
//! The test fills a fresh database with tens of thousands of contacts of three teams, their
//! search text and tags (`VACUUM ANALYZE`d, so that the planner sees what a real database shows
//! it), runs lists through the store while `listing::recorded` catches every statement they
//! run, and checks the plan each statement gets for its own values: the index it was shaped
//! for is read, and the big tables are never read whole. Why the lists are shaped so, with the
//! measurements: BENCHMARKS.md, "Why the lists are planned the way they are".

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use sqlx::Row;
use switchboard_crm::CrmStore;
use switchboard_crm::store::{ContactFilter, ContactSort};
use switchboard_kit::listing::{self, Step};
use switchboard_kit::phone::PhoneRules;
use switchboard_kit::testdb::{self, Explainer};
use switchboard_proto::v1::CreateTagRequest;

/// The teams of the test and their contacts, the measured one first (fixed, like everything
/// seeded, so that every run plans the same data). The measured team holds under half of each
/// table, as one team of many does: with the table nearly all its own, reading the whole table
/// is what the planner rightly prefers for a frequent tag or search.
const TEAMS: &[(&str, usize)] = &[
    ("0b9a3d52-6a4e-4c51-9d0f-3f6f2c1e7a10", 30_000),
    ("7c2e91f4-1d38-4b7a-8e65-b0a4d9c3f281", 20_000),
    ("e4f1c9a0-52b7-4d6e-9a13-8c0d2f7b6e45", 20_000),
];
const MEASURED: &str = TEAMS[0].0;
const START_MS: i64 = 1_700_000_000_000;
/// Rows per INSERT while seeding.
const CHUNK: usize = 1_000;
/// How long the test may take in all.
const DEADLINE: Duration = Duration::from_secs(180);

static FIRST_NAMES: LazyLock<Vec<&str>> = LazyLock::new(|| {
    "Ada Grace Alan Linus Margaret Dennis Barbara Ken Frances Edsger Radia John Hedy Tim Katherine Donald \
     Anita Niklaus Sophie Guido Joan Bjarne Karen Rob"
        .split_whitespace()
        .collect()
});
static LAST_NAMES: LazyLock<Vec<&str>> = LazyLock::new(|| {
    "Lovelace Hopper Turing Torvalds Hamilton Ritchie Liskov Thompson Allen Dijkstra Perlman McCarthy \
     Lamarr Berners-Lee Johnson Knuth Borg Wirth Wilson Rossum Clarke Stroustrup Jones Pike Shaw Carter \
     Nguyen Garcia Smith Brown Miller Davis"
        .split_whitespace()
        .collect()
});
/// About 0.2 % of the contacts have this last name: a rare search, its matches carried by id.
const RARE_NAME: &str = "Quokkason";
/// About 45 % of the e-mails: a search too frequent to carry.
const FREQUENT_DOMAIN: &str = "gmail.com";
const DOMAINS: &[&str] = &["gmail.com", "gmail.com", "gmail.com", "outlook.com", "example.org", "acme.io", "post.de"];

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

    fn pick(&mut self, from: &[&'static str]) -> &'static str {
        from[self.below(from.len())]
    }
}

/// Each team's tags, and how many contacts in 10,000 carry each: `churned` is rare, yet its
/// first page is still a short walk of the sort index; `blocked` is too rare for that, and a
/// list of it starts from the tag's links (see `TAG_WALK_CONTACTS` in the store).
const TAGS: &[(&str, usize)] = &[("customer", 5_000), ("vip", 2_000), ("churned", 20), ("blocked", 5)];

/// Inserts `rows` (each a parenthesised list of SQL literals) into `head`'s table, a chunk at a time.
async fn insert(store: &CrmStore, head: &str, rows: &[String]) {
    for chunk in rows.chunks(CHUNK) {
        sqlx::query(&format!("{head} VALUES {}", chunk.join(", "))).execute(store.db().pool()).await.unwrap();
    }
}

/// `count` contacts of `team` as the store writes them: the contact (with the OR of its tags'
/// bits), its search row, its tags (created by the store, each with its random bit). Returns
/// the tags' ids by name.
async fn seed_contacts(store: &CrmStore, team: &str, count: usize, rng: &mut Rng) -> HashMap<&'static str, String> {
    let mut tags = HashMap::new();
    let mut masks = HashMap::new();
    for (name, _) in TAGS {
        let request = CreateTagRequest { team_id: team.into(), name: (*name).into(), color: String::new() };
        let tag = store.create_tag(&request).await.unwrap();
        let mask: i64 = sqlx::query("SELECT bit_mask FROM tags WHERE id = $1")
            .bind(tag.id.as_str())
            .fetch_one(store.db().pool())
            .await
            .unwrap()
            .try_get(0)
            .unwrap();
        masks.insert(*name, mask);
        tags.insert(*name, tag.id);
    }
    let (mut contacts, mut search, mut links) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..count {
        let contact_id = uuid::Uuid::from_u64_pair(rng.next(), rng.next()).to_string();
        let first = rng.pick(&FIRST_NAMES);
        let last = if rng.chance(20) { RARE_NAME } else { rng.pick(&LAST_NAMES) };
        let email = format!("{}.{}{}@{}", first, last, rng.below(1_000), rng.pick(DOMAINS)).to_lowercase();
        let number = format!("+1415{:07}", n);
        let created_at = START_MS + i64::try_from(n).unwrap() * 60_000;
        let mut bits = 0i64;
        for (name, per_10000) in TAGS {
            if rng.chance(*per_10000) {
                links.push(format!("('{contact_id}', '{}', '{team}')", tags[name]));
                bits |= masks[name];
            }
        }
        contacts.push(format!(
            "('{contact_id}', '{team}', '{number}', '{first}', '{last}', '{email}', '{first_key}', '{last_key}', \
             {created_at}, {created_at}, {bits})",
            first_key = first.to_lowercase(),
            last_key = last.to_lowercase(),
        ));
        let body = format!("{first} {last}\n{email}\n{number}").to_lowercase();
        search.push(format!("('{contact_id}', '{team}', '{body}')"));
    }
    let head = "INSERT INTO contacts (id, team_id, number, first_name, last_name, email, first_name_key, \
                last_name_key, created_at, updated_at, tag_bits)";
    insert(store, head, &contacts).await;
    insert(store, "INSERT INTO contact_search (contact_id, team_id, body)", &search).await;
    insert(store, "INSERT INTO contact_tags (contact_id, tag_id, team_id)", &links).await;
    tags
}

/// For each step a list must take, the indexes its plans must read.
type Expected = &'static [(Step, &'static [&'static str])];

/// Fails with every failure at once, each with its statement and whole plan.
fn assert_no_failures(failures: &[String]) {
    assert!(failures.is_empty(), "{} list statement(s) lost their plan:\n\n{}", failures.len(), failures.join("\n\n"));
}

const CONTACT_TABLES: &[&str] = &["contacts", "contact_search", "contact_tags"];

#[tokio::test]
async fn contact_lists_keep_their_plans() {
    tokio::time::timeout(DEADLINE, async {
        let Some(database) = testdb::postgres().await.unwrap() else { return };
        let store = CrmStore::open(&database.url, PhoneRules::default()).await.unwrap();
        let mut explainer = Explainer::connect(&database.url, store.db().pool()).await.unwrap();
        let started = Instant::now();
        let mut rng = Rng(0x5eed_c0de);
        let mut tags = HashMap::new();
        for (team, contacts) in TEAMS {
            let team_tags = seed_contacts(&store, team, *contacts, &mut rng).await;
            if *team == MEASURED {
                tags = team_tags;
            }
        }
        // What autovacuum would have done by the time a real table is this big: statistics for
        // the planner, and the visibility map that makes index-only scans cheap.
        // ANALYZE samples 300 rows per point of the statistics target: at 1,000 it reads all of
        // the 70,000 rows, so that every run plans from the same statistics (the default, 100,
        // samples 30,000 at random, and a search's plan then changed from run to run).
        let mut conn = store.db().pool().acquire().await.unwrap();
        sqlx::raw_sql("SET default_statistics_target = 1000").execute(&mut *conn).await.unwrap();
        sqlx::raw_sql("VACUUM ANALYZE contacts, contact_search, contact_tags, tags").execute(&mut *conn).await.unwrap();
        sqlx::raw_sql("RESET default_statistics_target").execute(&mut *conn).await.unwrap();
        drop(conn);
        let seeded: usize = TEAMS.iter().map(|(_, contacts)| contacts).sum();
        eprintln!("seeded {seeded} contacts in {:?}", started.elapsed());

        let tagged = |names: &[&str]| names.iter().map(|name| tags[name].clone()).collect::<Vec<_>>();
        let searched = |query: &str| Some(query.to_owned());
        // A rare search looks its carried ids up by id; a frequent one (no signatures here)
        // walks the sort index probing each contact's search row; a tag filter alone walks the
        // sort index testing tag bits and probing the tags' links of the contacts that pass,
        // unless the walk would be long, when it starts from the tag's links. Counts of tags
        // read the links alone. None reads a whole table.
        let cases: &[(&str, ContactFilter, Expected)] = &[
            (
                "contacts searched for a rare name, by last name",
                ContactFilter { search: searched(RARE_NAME), sort: ContactSort::LastName, ..ContactFilter::default() },
                &[(Step::SearchMatches, &["contact_search_body"]), (Step::Page, &["contacts_pkey"])],
            ),
            (
                "contacts searched for a part of a number, by number",
                ContactFilter {
                    search: searched("(415) 000-12"),
                    sort: ContactSort::Number,
                    ..ContactFilter::default()
                },
                &[(Step::SearchMatches, &["contact_search_body"]), (Step::Page, &["contacts_pkey"])],
            ),
            (
                "contacts searched for a frequent e-mail domain, newest first",
                ContactFilter { search: searched(FREQUENT_DOMAIN), ..ContactFilter::default() },
                &[
                    // Stopping at the 10,000th match, walking the team's rows, or from the text index.
                    (Step::SearchMatches, &["contact_search_team|contact_search_body"]),
                    (Step::CountSampled, &["contacts_pkey|contacts_created|contacts_number"]),
                    (Step::Page, &["contacts_created", "contact_search_contact_id_key"]),
                ],
            ),
            (
                "contacts with a frequent tag, newest first",
                ContactFilter { tag_ids: tagged(&["customer"]), ..ContactFilter::default() },
                &[
                    (Step::Store("count tagged"), &["contact_tags_tag"]),
                    (Step::Page, &["contacts_created", "contact_tags_tag|contact_tags_pkey"]),
                ],
            ),
            (
                "contacts with two tags, by last name, page 10",
                ContactFilter {
                    tag_ids: tagged(&["customer", "vip"]),
                    sort: ContactSort::LastName,
                    ascending: true,
                    page: 10,
                    ..ContactFilter::default()
                },
                &[
                    (Step::Store("count tagged"), &["contact_tags_tag"]),
                    (Step::Page, &["contacts_last_name", "contact_tags_tag|contact_tags_pkey"]),
                ],
            ),
            (
                "contacts with a rare tag, by e-mail",
                ContactFilter { tag_ids: tagged(&["churned"]), sort: ContactSort::Email, ..ContactFilter::default() },
                &[
                    (Step::Store("count tagged"), &["contact_tags_tag"]),
                    (Step::Page, &["contacts_email", "contact_tags_tag|contact_tags_pkey"]),
                ],
            ),
            (
                "contacts with a tag too rare to walk to, by number",
                ContactFilter { tag_ids: tagged(&["blocked"]), sort: ContactSort::Number, ..ContactFilter::default() },
                &[
                    (Step::Store("count tagged"), &["contact_tags_tag"]),
                    (Step::Page, &["contact_tags_tag", "contacts_pkey"]),
                ],
            ),
            (
                "contacts with a tag and a rare name",
                ContactFilter {
                    tag_ids: tagged(&["customer"]),
                    search: searched(RARE_NAME),
                    ..ContactFilter::default()
                },
                &[
                    (Step::SearchMatches, &["contact_search_body"]),
                    (Step::Count, &["contacts_pkey"]),
                    (Step::Page, &["contacts_pkey"]),
                ],
            ),
        ];
        let mut failures = Vec::new();
        for (name, filter, expected) in cases {
            let (listed, statements) = listing::recorded(store.list_contacts(MEASURED, filter)).await;
            let listed = listed.unwrap();
            assert!(!listed.contacts.is_empty(), "{name}: listed no contact");
            eprintln!("{name}: {} contacts of {}", listed.contacts.len(), listed.page.unwrap().total_count);
            failures.extend(explainer.check_list(name, &statements, expected, CONTACT_TABLES).await.unwrap());
        }
        assert_no_failures(&failures);
        eprintln!("contact lists checked in {:?}", started.elapsed());
        drop(explainer);
        store.db().close().await;
        testdb::drop_postgres(database).await.unwrap();
    })
    .await
    .expect("the test took too long");
}
