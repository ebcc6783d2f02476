//! `GET /v1/usage`: searches and credits from the identity service, calls and chats from the
//! conversations service, per UTC day, for one team (an agency reads a subteam's with teamId).

use serde_json::{Value, json};
use switchboard_kit::time::{iso_ms, now_ms};
use switchboard_proto::v1::UpsertChatRequest;

use crate::auth::subteam_body;
use crate::common::{Api, Stack};
use crate::conversations::{Runtime, upsert};

/// A knowledge base holding one reference that `query=hours` finds; its id.
async fn knowledgebase_with_a_reference(api: &Api, name: &str) -> String {
    let kb = api.post("/knowledgebase", json!({ "name": name })).await.expect(201)["data"]["id"]
        .as_str()
        .expect("the knowledge base's id")
        .to_owned();
    api.post(&format!("/knowledgebase/{kb}/references"), json!({ "question": "Opening hours?", "answer": "9 to 5" }))
        .await
        .expect(201);
    kb
}

fn day<'a>(answer: &'a Value, date: &str) -> &'a Value {
    answer["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["date"] == date)
        .unwrap_or_else(|| panic!("{date} in {answer}"))
}

#[tokio::test]
async fn usage_counts_each_day_for_its_own_team_only() {
    let stack = Stack::start().await;
    let agency = stack.team("Usage Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let mut runtime = Runtime::connect(&stack).await;

    // Two calls on 1 March (125 s and 30 s), one still going on 2 March, a chat on 2 March.
    runtime.call(upsert(&agency, "u-1", "+14155550101", "INCOMING", "2026-03-01T10:00:00Z")).await.unwrap();
    runtime.end(&agency.id, "u-1", "2026-03-01T10:02:05Z", "Booked").await;
    runtime.call(upsert(&agency, "u-2", "+14155550102", "OUTGOING", "2026-03-01T23:59:00Z")).await.unwrap();
    runtime.end(&agency.id, "u-2", "2026-03-01T23:59:30Z", "Voicemail").await;
    runtime.call(upsert(&agency, "u-3", "+14155550103", "INCOMING", "2026-03-02T00:00:00Z")).await.unwrap();
    let chat = UpsertChatRequest {
        team_id: agency.id.clone(),
        external_id: "u-chat".to_owned(),
        agent_id: None,
        channel: "web".to_owned(),
        contact_number: None,
        contact_email: None,
        started_at: "2026-03-02T08:00:00Z".to_owned(),
    };
    let request = runtime.signed(chat);
    runtime.client.upsert_chat(request).await.unwrap();

    // A search today costs a credit.
    let kb = knowledgebase_with_a_reference(&api, "Usage").await;
    api.get(&format!("/knowledgebase/{kb}/search?query=hours")).await.expect(200);

    let march = api.get("/usage?from=2026-03-01&to=2026-03-03&interval=day").await;
    let march = march.expect(200);
    assert_eq!(march["data"].as_array().unwrap().len(), 3, "{march}");
    let first = day(march, "2026-03-01");
    assert_eq!(
        (first["calls"].as_i64(), first["callMinutes"].as_f64(), first["chats"].as_i64()),
        (Some(2), Some(2.6), Some(0))
    );
    let second = day(march, "2026-03-02");
    assert_eq!(
        (second["calls"].as_i64(), second["callMinutes"].as_f64(), second["chats"].as_i64()),
        (Some(1), Some(0.0), Some(1))
    );
    assert_eq!(day(march, "2026-03-03")["calls"], 0);
    assert_eq!(first["searches"], 0);

    // By default: the last 30 days, today last, with today's search and its credit.
    let recent = api.get("/usage").await;
    let recent = recent.expect(200);
    let days = recent["data"].as_array().unwrap();
    assert_eq!(days.len(), 30);
    let today = &iso_ms(now_ms())[..10];
    assert_eq!(days[29]["date"], today);
    assert_eq!((days[29]["searches"].as_i64(), days[29]["creditsUsed"].as_i64()), (Some(1), Some(1)), "{recent}");

    // Another team, and the agency's own subteam read with teamId, see nothing of it.
    let other = stack.team("Usage Other", false, 0).await;
    let theirs = stack.client(&other.key).get("/usage?from=2026-03-01&to=2026-03-02").await;
    assert!(theirs.expect(200)["data"].as_array().unwrap().iter().all(|d| d["calls"] == 0 && d["chats"] == 0));
    let subteam = api.post("/agency/subteams", subteam_body("Usage Client")).await.expect(201)["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let scoped = api.get(&format!("/usage?from=2026-03-01&to=2026-03-02&teamId={subteam}")).await;
    assert!(scoped.expect(200)["data"].as_array().unwrap().iter().all(|d| d["calls"] == 0));
    let refused = stack.client(&other.key).get(&format!("/usage?teamId={subteam}")).await;
    assert!(matches!(refused.status, 403 | 404), "another team's subteam: {}", refused.status);
}

#[tokio::test]
async fn usage_refuses_ranges_it_cannot_answer() {
    let stack = Stack::start().await;
    let team = stack.team("Usage Ranges", false, 0).await;
    let api = stack.client(&team.key);
    assert_eq!(api.get("/usage?from=2026-03-02&to=2026-03-01").await.fields(), ["from"]);
    assert_eq!(api.get("/usage?from=2024-01-01&to=2026-03-01").await.fields(), ["from"]);
    assert_eq!(api.get("/usage?interval=week").await.fields(), ["interval"]);
    assert_eq!(api.get("/usage?from=yesterday").await.fields(), ["from"]);
    // A date-time counts as its day; a range of one day is one entry.
    let one = api.get("/usage?from=2026-03-01T18:00:00Z&to=2026-03-01").await;
    assert_eq!(one.expect(200)["data"].as_array().unwrap().len(), 1);
}

/// Issue 40, defect 6: `GET /v1/credits/prices` says what each metered operation costs, and a
/// search takes exactly what its price says.
#[tokio::test]
async fn prices_say_what_a_search_takes() {
    let stack = Stack::start().await;
    let team = stack.team("Prices", false, 10).await;
    let api = stack.client(&team.key);
    let prices = api.get("/credits/prices").await;
    let prices = prices.expect(200)["data"].as_array().expect("a list").clone();
    let ids: Vec<&str> = prices.iter().filter_map(|p| p["operationId"].as_str()).collect();
    // The "Try it" chat's turn takes a search's credit when the agent has a knowledge base.
    assert_eq!(ids, ["testChat", "searchAgentKnowledgebase", "searchKnowledgebase"], "{prices:?}");
    let price = prices.iter().find(|p| p["operationId"] == "searchKnowledgebase").expect("the search's price");
    assert_eq!(
        (price["method"].as_str(), price["path"].as_str()),
        (Some("GET"), Some("/v1/knowledgebase/{knowledgebaseId}/search"))
    );
    let credits = price["credits"].as_i64().expect("credits");
    assert!(credits > 0, "{price}");

    let kb = knowledgebase_with_a_reference(&api, "Priced").await;
    let before = api.get("/me").await.expect(200)["data"]["credits"]["balance"].as_i64().expect("a balance");
    api.get(&format!("/knowledgebase/{kb}/search?query=hours")).await.expect(200);
    let after = api.get("/me").await.expect(200)["data"]["credits"]["balance"].as_i64().expect("a balance");
    assert_eq!(before - after, credits, "a search took {} credits; its price says {credits}", before - after);

    // The same for a signed-in viewer of any team: nothing secret, read-only keys too.
    let read_only =
        api.post("/api-keys", json!({ "name": "ro", "access": "read-only" })).await.expect(201)["data"]["key"]
            .as_str()
            .unwrap()
            .to_owned();
    let seen = stack.client(&read_only).get("/credits/prices").await;
    assert_eq!(seen.expect(200)["data"].as_array().map(Vec::len), Some(prices.len()));
}
