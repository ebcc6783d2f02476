//! The shared encoder as a resource a team spends (issue 53, finding 5): a request may make at
//! most so many passages to embed, and a team at most so many a minute, counted on every path
//! that embeds for it (single and bulk references, updates), in Redis when there is one. Access
//! checks still come first.

use serde_json::{Value, json};

use crate::common::{Api, Redis, Stack};

/// Answers of this many one-letter words make `ceil(25_000 / 128) = 196` passages each.
const LONG_ANSWER_WORDS: usize = 25_000;
const PASSAGES_OF_A_LONG_ANSWER: usize = 196;

fn long_answer() -> String {
    vec!["w"; LONG_ANSWER_WORDS].join(" ")
}

/// `count` short references, one passage each.
fn short_items(prefix: &str, count: usize) -> Value {
    let items: Vec<Value> = (0..count)
        .map(|i| json!({ "question": format!("{prefix} question {i}?"), "answer": format!("{prefix} answer {i}.") }))
        .collect();
    json!({ "references": items })
}

async fn knowledgebase(api: &Api, suffix: &str) -> String {
    let made = api.post(&format!("/knowledgebase{suffix}"), json!({ "name": "FAQ" })).await;
    made.expect(201)["data"]["id"].as_str().unwrap().to_owned()
}

async fn reference_count(api: &Api, kb: &str, suffix: &str) -> usize {
    let kb = api.get(&format!("/knowledgebase/{kb}{suffix}")).await;
    kb.expect(200)["data"]["references"].as_array().unwrap().len()
}

/// The 429 of a spent budget: `Retry-After` and `retryAfter` agree, within the minute, and the
/// message names the budget.
#[track_caller]
fn assert_budget_spent(answer: &crate::common::Response, budget: u64) {
    assert_eq!(answer.error_code(429), "RATE_LIMITED", "{}", answer.text);
    let retry_after = answer.body["retryAfter"].as_u64().unwrap_or_else(|| panic!("no retryAfter: {}", answer.text));
    assert!((1..=60).contains(&retry_after), "{}", answer.text);
    assert_eq!(answer.header("retry-after"), Some(retry_after.to_string().as_str()));
    let error = answer.body["error"].as_str().unwrap();
    assert!(error.contains(&budget.to_string()), "the message names the budget: {error}");
}

/// The default bound, 1,000 passages a request: six answers of 196 passages each and a short
/// one (1,177) are refused whole with 413, the body naming the bound and the count, before
/// anything is embedded, and nothing is written, not even the short item.
#[tokio::test]
async fn a_bulk_request_over_the_passage_bound_is_refused_and_writes_nothing() {
    let stack = Stack::start_with(&[("SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE", "100000")]).await;
    let team = stack.team("Bound", false, 0).await;
    let api = stack.client(&team.key);
    let kb = knowledgebase(&api, "").await;
    let bulk = format!("/knowledgebase/{kb}/references/bulk");
    let long = long_answer();
    let mut items: Vec<Value> =
        (0..6).map(|i| json!({ "question": format!("Long {i}?"), "answer": long.clone() })).collect();
    items.push(json!({ "question": "Short?", "answer": "Short." }));
    let count = 6 * PASSAGES_OF_A_LONG_ANSWER + 1;

    let refused = api.post(&bulk, json!({ "references": items })).await;
    assert_eq!(refused.error_code(413), "PAYLOAD_TOO_LARGE", "{}", refused.text);
    let error = refused.body["error"].as_str().unwrap();
    assert!(error.contains(&count.to_string()) && error.contains("1000"), "bound and count: {error}");
    assert_eq!(refused.fields(), ["references"], "{}", refused.text);
    assert_eq!(reference_count(&api, &kb, "").await, 0, "nothing written");

    // Within the bound the same request shape goes in (embedding 1,000 long passages would take
    // this machine minutes, so the short item alone shows it).
    let written = api.post(&bulk, json!({ "references": [{ "question": "Short?", "answer": "Short." }] })).await;
    assert_eq!(written.expect(200)["data"]["created"].as_array().unwrap().len(), 1);
    assert_eq!(reference_count(&api, &kb, "").await, 1);
}

/// A team's budget of passages a minute is spent by single creates, bulk creates and updates
/// alike; past it each is 429 with `Retry-After` and writes nothing. Another team's writes and
/// searches go on.
#[tokio::test]
async fn the_teams_embedding_budget_answers_429_and_other_teams_are_unaffected() {
    let stack = Stack::start_with(&[
        ("SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE", "10"),
        ("SWITCHBOARD_RATE_LIMIT_WRITE", "1000"),
        ("SWITCHBOARD_RATE_LIMIT_BULK", "1000"),
    ])
    .await;
    let team = stack.team("Importer", false, 0).await;
    let api = stack.client(&team.key);
    let kb = knowledgebase(&api, "").await;
    let (single, bulk) = (format!("/knowledgebase/{kb}/references"), format!("/knowledgebase/{kb}/references/bulk"));

    assert_eq!(
        api.post(&bulk, short_items("first", 6)).await.expect(200)["data"]["created"].as_array().unwrap().len(),
        6
    );
    let one = api.post(&single, json!({ "question": "Seventh?", "answer": "Seven." })).await;
    let seventh = one.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    // 7 of 10 spent: 4 more is too many, and the request writes none of them.
    assert_budget_spent(&api.post(&bulk, short_items("over", 4)).await, 10);
    assert_eq!(reference_count(&api, &kb, "").await, 7);
    assert_eq!(
        api.post(&bulk, short_items("fits", 3)).await.expect(200)["data"]["created"].as_array().unwrap().len(),
        3
    );

    // Spent: a single create and an update that changes the text are refused, and change nothing.
    assert_budget_spent(&api.post(&single, json!({ "question": "Eleventh?", "answer": "Eleven." })).await, 10);
    let item = format!("{single}/{seventh}");
    assert_budget_spent(&api.put(&item, json!({ "answer": "Seven, changed." })).await, 10);
    assert_eq!(api.get(&item).await.expect(200)["data"]["answer"], "Seven.");
    assert_eq!(reference_count(&api, &kb, "").await, 10);
    // An update that leaves the text as it is embeds nothing.
    assert_eq!(api.put(&item, json!({ "answer": "Seven." })).await.status, 200);

    let other = stack.team("Neighbour", false, 5).await;
    let theirs = stack.client(&other.key);
    let their_kb = knowledgebase(&theirs, "").await;
    let their_bulk = format!("/knowledgebase/{their_kb}/references/bulk");
    assert_eq!(
        theirs.post(&their_bulk, short_items("theirs", 9)).await.expect(200)["data"]["created"]
            .as_array()
            .unwrap()
            .len(),
        9
    );
    let their_single = format!("/knowledgebase/{their_kb}/references");
    assert_eq!(theirs.post(&their_single, json!({ "question": "Q?", "answer": "A." })).await.status, 201);
    let search = theirs.get(&format!("/knowledgebase/{their_kb}/search?query=theirs%20answer%203&limit=1")).await;
    assert_eq!(search.expect(200)["data"].as_array().unwrap().len(), 1);
}

/// With Redis, the count of passages is one per team for every replica: what another replica
/// spent (written here into the team's key, as that replica's script would) is refused here.
#[tokio::test]
async fn the_embedding_budget_is_counted_in_redis_for_every_replica() {
    let redis = Redis::start().await;
    let url = redis.url();
    let stack = Stack::start_with(&[("REDIS_URL", &url), ("SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE", "10")]).await;
    let team = stack.team("Shared", false, 0).await;
    let api = stack.client(&team.key);
    let kb = knowledgebase(&api, "").await;
    let single = format!("/knowledgebase/{kb}/references");
    assert_eq!(api.post(&single, json!({ "question": "One?", "answer": "One." })).await.status, 201);
    let key = format!("switchboard:embed-passages:{}", team.id);
    assert_eq!(redis.cli(&["GET", &key]).trim(), "1", "the passage is counted in Redis");
    let ttl: i64 = redis.cli(&["PTTL", &key]).trim().parse().unwrap();
    assert!((1..=60_000).contains(&ttl), "the count lasts the minute: {ttl}");

    redis.cli(&["INCRBY", &key, "9"]);
    assert_budget_spent(&api.post(&single, json!({ "question": "Two?", "answer": "Two." })).await, 10);
    assert_eq!(reference_count(&api, &kb, "").await, 1);

    let other = stack.team("Other", false, 0).await;
    let theirs = stack.client(&other.key);
    let their_kb = knowledgebase(&theirs, "").await;
    let their_single = format!("/knowledgebase/{their_kb}/references");
    assert_eq!(theirs.post(&their_single, json!({ "question": "Q?", "answer": "A." })).await.status, 201);
}

/// The bound and the budget are the service's, after every check of the gateway: the agency's
/// read-only key and the subteam's own key (its `accessConfig` switches the knowledge base off)
/// are 403 whatever the passages, and nothing is written; the agency's full key acting on its
/// subteam meets the bound and the subteam's budget.
#[tokio::test]
async fn access_checks_run_before_the_passage_bound_and_the_budget() {
    let stack =
        Stack::start_with(&[("SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE", "10"), ("SWITCHBOARD_RATE_LIMIT_BULK", "1000")])
            .await;
    let agency = stack.team("Agency", true, 10).await;
    let agency_api = stack.client(&agency.key);
    let mut body = crate::auth::subteam_body("Client");
    body["accessConfig"] = json!({ "knowledgeBase": false });
    let subteam = agency_api.post("/agency/subteams", body).await.expect(201)["data"].clone();
    let subteam_id = subteam["id"].as_str().unwrap().to_owned();
    let scoped = format!("?teamId={subteam_id}");
    let kb = knowledgebase(&agency_api, &scoped).await;
    let bulk = format!("/knowledgebase/{kb}/references/bulk");
    let own_key = stack.client(&stack.key(&subteam_id, false).await);
    let reader = stack.client(&stack.key(&agency.id, true).await);

    // Over the bound (10 a request here: the bound is never above the minute's budget).
    let over = short_items("over", 11);
    assert_eq!(own_key.post(&bulk, over.clone()).await.error_code(403), "FORBIDDEN");
    assert_eq!(reader.post(&format!("{bulk}{scoped}"), over.clone()).await.error_code(403), "FORBIDDEN");
    let refused = agency_api.post(&format!("{bulk}{scoped}"), over).await;
    assert_eq!(refused.error_code(413), "PAYLOAD_TOO_LARGE", "{}", refused.text);
    assert_eq!(reference_count(&agency_api, &kb, &scoped).await, 0);

    // The subteam's budget spent by its agency: still 403 for the subteam's own keys.
    let spent = agency_api.post(&format!("{bulk}{scoped}"), short_items("fits", 10)).await;
    assert_eq!(spent.expect(200)["data"]["created"].as_array().unwrap().len(), 10);
    let one = short_items("one", 1);
    assert_eq!(own_key.post(&bulk, one.clone()).await.error_code(403), "FORBIDDEN");
    assert_eq!(reader.post(&format!("{bulk}{scoped}"), one.clone()).await.error_code(403), "FORBIDDEN");
    assert_budget_spent(&agency_api.post(&format!("{bulk}{scoped}"), one).await, 10);
    assert_eq!(reference_count(&agency_api, &kb, &scoped).await, 10);
}
