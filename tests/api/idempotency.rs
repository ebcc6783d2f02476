//! `Idempotency-Key` on writes, as a client retrying after a timeout meets it.

use serde_json::{Value, json};

use crate::common::{Api, Process, Redis, Response, Stack};

pub async fn post_with_key(api: &Api, path: &str, key: &str, body: Value) -> Response {
    api.send(api.request(reqwest::Method::POST, path).header("Idempotency-Key", key).json(&body)).await
}

async fn contact_count(api: &Api) -> u64 {
    api.get("/contacts").await.expect(200)["pagination"]["totalCount"].as_u64().unwrap()
}

#[tokio::test]
async fn a_retried_write_is_answered_once_and_a_reused_key_is_refused() {
    let stack = Stack::start_with(&[("SWITCHBOARD_RATE_LIMIT_WRITE", "3")]).await;
    let team = stack.team("Retries", false, 0).await;
    let api = stack.client(&team.key);
    let grace = json!({ "number": "+1 (415) 555-2671", "firstName": "Grace" });

    let first = post_with_key(&api, "/contacts", "create-grace", grace.clone()).await;
    let created = first.expect(201).clone();
    assert_eq!(first.header("idempotent-replayed"), None);
    assert_eq!(first.header("x-ratelimit-remaining"), Some("2"));
    // Replays neither reach the CRM (no CONTACT_EXISTS) nor spend the write limit of 3.
    for _ in 0..4 {
        let again = post_with_key(&api, "/contacts", "create-grace", grace.clone()).await;
        assert_eq!(again.expect(201), &created);
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
    }
    assert_eq!(contact_count(&api).await, 1);

    let other_body = post_with_key(&api, "/contacts", "create-grace", json!({ "number": "+14155550100" })).await;
    assert_eq!(other_body.error_code(422), "IDEMPOTENCY_KEY_REUSED");
    let other_path = post_with_key(&api, "/tags", "create-grace", grace.clone()).await;
    assert_eq!(other_path.error_code(422), "IDEMPOTENCY_KEY_REUSED");
    let put = api.send(api.request(reqwest::Method::PUT, "/contacts").header("Idempotency-Key", "create-grace")).await;
    assert_eq!(put.status, 405, "{}", put.text);

    // A kept error is the outcome of that request, replayed as it was.
    let invalid = post_with_key(&api, "/contacts", "bad-number", json!({ "number": "not a number" })).await;
    assert_eq!(invalid.error_code(400), "VALIDATION_ERROR");
    let replayed = post_with_key(&api, "/contacts", "bad-number", json!({ "number": "not a number" })).await;
    assert_eq!((replayed.status, &replayed.body), (400, &invalid.body));
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));

    // The limit is spent by the two requests that did work plus this one; a 429 is not kept,
    // so the same key works once the window allows.
    let third = post_with_key(&api, "/contacts", "third", json!({ "number": "+14155550101" })).await;
    third.expect(201);
    let limited = post_with_key(&api, "/contacts", "fourth", json!({ "number": "+14155550102" })).await;
    assert_eq!(limited.error_code(429), "RATE_LIMITED");
    let still_limited = post_with_key(&api, "/contacts", "fourth", json!({ "number": "+14155550102" })).await;
    assert_eq!(still_limited.status, 429, "a 429 must not be replayed as kept: {}", still_limited.text);
    assert_eq!(still_limited.header("idempotent-replayed"), None);
}

#[tokio::test]
async fn keys_are_checked_belong_to_their_team_and_reads_ignore_them() {
    let stack = Stack::start().await;
    let (one, two) = (stack.team("One", false, 0).await, stack.team("Two", false, 0).await);
    let (api_one, api_two) = (stack.client(&one.key), stack.client(&two.key));
    let body = json!({ "number": "+14155552671" });

    for bad in ["".to_owned(), "k".repeat(256)] {
        let refused = post_with_key(&api_one, "/contacts", &bad, body.clone()).await;
        assert_eq!(refused.error_code(400), "VALIDATION_ERROR", "key {bad:?}");
        assert_eq!(refused.fields(), ["Idempotency-Key"]);
    }
    assert_eq!(contact_count(&api_one).await, 0, "a refused key must not let the write through");

    let mine = post_with_key(&api_one, "/contacts", "shared-key", body.clone()).await.expect(201).clone();
    let theirs = post_with_key(&api_two, "/contacts", "shared-key", body.clone()).await.expect(201).clone();
    assert_ne!(mine["data"]["id"], theirs["data"]["id"], "another team's key must not replay this team's answer");

    let read = api_one.send(api_one.request(reqwest::Method::GET, "/contacts").header("Idempotency-Key", "r")).await;
    read.expect(200);
    assert_eq!(read.header("idempotent-replayed"), None);
}

#[tokio::test]
async fn concurrent_identical_requests_create_one_contact() {
    let stack = Stack::start_with(&[("SWITCHBOARD_RATE_LIMIT_WRITE", "100")]).await;
    let team = stack.team("Burst", false, 0).await;
    let api = stack.client(&team.key);
    let body = json!({ "number": "+14155552671", "firstName": "Grace" });
    let requests = (0..20).map(|_| post_with_key(&api, "/contacts", "one-grace", body.clone()));
    let answers = futures::future::join_all(requests).await;

    let created: Vec<&Response> = answers.iter().filter(|answer| answer.status == 201).collect();
    assert!(!created.is_empty(), "no request created the contact");
    for answer in &answers {
        match answer.status {
            201 => assert_eq!(answer.body, created[0].body),
            409 => assert_eq!(answer.body["code"], "IDEMPOTENCY_KEY_IN_USE", "{}", answer.text),
            status => panic!("unexpected status {status}: {}", answer.text),
        }
    }
    assert_eq!(created.iter().filter(|answer| answer.header("idempotent-replayed").is_none()).count(), 1);
    assert_eq!(contact_count(&api).await, 1);
}

#[tokio::test]
async fn two_gateways_on_one_redis_agree() {
    let redis = Redis::start().await;
    let url = redis.url();
    let stack = Stack::start_with(&[("REDIS_URL", &url)]).await;
    let crm_url = stack.process.line_after("crm gRPC:").expect("crm gRPC line");
    let second = Process::start(
        &["serve", "gateway"],
        &[
            ("SWITCHBOARD_LISTEN", "127.0.0.1:0"),
            ("SWITCHBOARD_IDENTITY_URL", &stack.identity_url),
            ("SWITCHBOARD_CRM_URL", &crm_url),
            ("SWITCHBOARD_SERVICE_TOKEN", &stack.service_token),
            ("REDIS_URL", &url),
        ],
        "gateway listening on",
    )
    .await;
    let second_base = second.line_after("gateway listening on").expect("gateway address");
    let team = stack.team("Replicas", false, 0).await;
    let (first, other) = (stack.client(&team.key), Api::new(&second_base, Some(&team.key)));
    let body = json!({ "number": "+14155552671" });

    let created = post_with_key(&first, "/contacts", "replicated", body.clone()).await.expect(201).clone();
    let replayed = post_with_key(&other, "/contacts", "replicated", body.clone()).await;
    assert_eq!(replayed.expect(201), &created);
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
    let reused = post_with_key(&other, "/contacts", "replicated", json!({ "number": "+14155550100" })).await;
    assert_eq!(reused.error_code(422), "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(contact_count(&first).await, 1);
    let stored = redis.cli(&["--scan", "--pattern", &format!("switchboard:idempotency:{}:*", team.id)]);
    assert_eq!(stored.lines().count(), 1, "one kept answer in Redis: {stored:?}");
}

/// A 5xx after the service committed (a failover between the commit and its acknowledgement)
/// releases the gateway's claim on the key, so the client's retry reaches the services again.
/// Forgetting the gateway's record in Redis puts a retry in exactly that position: the services
/// must answer it with what the first request made, not make it again (two notes, two
/// references) or meet it (a contact's number in use: 409).
#[tokio::test]
async fn a_retry_after_a_released_key_gets_what_the_first_request_made() {
    let redis = Redis::start().await;
    let url = redis.url();
    let stack = Stack::start_with(&[("REDIS_URL", &url)]).await;
    let team = stack.team("Lost answers", false, 0).await;
    let api = stack.client(&team.key);
    let forget = || {
        let pattern = format!("switchboard:idempotency:{}:*", team.id);
        for slot in redis.cli(&["--scan", "--pattern", &pattern]).lines().filter(|line| !line.is_empty()) {
            redis.cli(&["DEL", slot]);
        }
    };

    let grace = json!({ "number": "+14155552671", "firstName": "Grace" });
    let contact = post_with_key(&api, "/contacts", "contact-1", grace.clone()).await.expect(201).clone();
    forget();
    let retried = post_with_key(&api, "/contacts", "contact-1", grace.clone()).await;
    assert_eq!(retried.expect(201)["data"]["id"], contact["data"]["id"], "the first contact, not CONTACT_EXISTS");
    assert_eq!(retried.header("idempotent-replayed"), None, "the service answered, not the gateway's record");
    assert_eq!(contact_count(&api).await, 1);
    // Another key is another write: the number is taken.
    assert_eq!(post_with_key(&api, "/contacts", "contact-2", grace).await.error_code(409), "CONTACT_EXISTS");

    let contact_id = contact["data"]["id"].as_str().unwrap().to_owned();
    let notes = format!("/contacts/{contact_id}/notes");
    let note = json!({ "note": "Called back about the invoice" });
    let first_note = post_with_key(&api, &notes, "note-1", note.clone()).await.expect(201).clone();
    forget();
    let again = post_with_key(&api, &notes, "note-1", note.clone()).await;
    assert_eq!(again.expect(201)["data"]["id"], first_note["data"]["id"]);
    assert_eq!(api.get(&notes).await.expect(200)["data"].as_array().unwrap().len(), 1);

    let kb = api.post("/knowledgebase", json!({ "name": "Support" })).await.expect(201)["data"]["id"].clone();
    let references = format!("/knowledgebase/{}/references", kb.as_str().unwrap());
    let qa = json!({ "question": "Do you ship abroad?", "answer": "Yes, to 30 countries." });
    let first_reference = post_with_key(&api, &references, "reference-1", qa.clone()).await.expect(201).clone();
    forget();
    let again = post_with_key(&api, &references, "reference-1", qa.clone()).await;
    assert_eq!(again.expect(201)["data"]["id"], first_reference["data"]["id"]);
    let made = api.get(&format!("/knowledgebase/{}", kb.as_str().unwrap())).await;
    assert_eq!(made.expect(200)["data"]["references"].as_array().unwrap().len(), 1);
    let bulk = format!("{references}/bulk");
    let items = json!({ "references": [qa, { "question": "Can I pay by card?", "answer": "Yes." }] });
    let first_bulk = post_with_key(&api, &bulk, "bulk-1", items.clone()).await.expect(200).clone();
    forget();
    let again = post_with_key(&api, &bulk, "bulk-1", items).await;
    assert_eq!(again.expect(200)["data"]["created"], first_bulk["data"]["created"]);
    let made = api.get(&format!("/knowledgebase/{}", kb.as_str().unwrap())).await;
    assert_eq!(made.expect(200)["data"]["references"].as_array().unwrap().len(), 3);

    // Keys are the caller's: another key of the team with the same Idempotency-Key and body
    // makes its own note.
    let other = stack.key(&team.id, false).await;
    let theirs = post_with_key(&stack.client(&other), &notes, "note-1", note).await;
    assert_ne!(theirs.expect(201)["data"]["id"], first_note["data"]["id"]);
}
