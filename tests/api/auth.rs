//! API keys at the door: a missing, malformed, unknown or revoked key is 401 with the published
//! body, a read-only key cannot write, `/me` never shows the key, and the agency header is taken
//! on agency routes only.

use std::time::Duration;

use serde_json::json;

use crate::common::{Api, Stack};

#[tokio::test]
async fn a_missing_key_is_401_with_the_published_body() {
    let stack = Stack::start().await;
    let response = stack.anonymous().get("/me").await;
    assert_eq!(response.status, 401);
    assert_eq!(response.body, json!({ "error": "Missing X-API-Key header", "code": "UNAUTHORIZED" }));
    assert!(response.header("x-request-id").is_some());
    assert_eq!(response.header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn unknown_malformed_and_empty_keys_are_401_invalid() {
    let stack = Stack::start().await;
    for key in ["ew_doesnotexist", "not even a key", &"x".repeat(10_000)] {
        let response = stack.client(key).get("/me").await;
        assert_eq!(response.status, 401, "{key}");
        assert_eq!(response.body, json!({ "error": "Invalid API key", "code": "UNAUTHORIZED" }));
    }
    let empty =
        stack.anonymous().send(stack.anonymous().request(reqwest::Method::GET, "/me").header("X-API-Key", "")).await;
    assert_eq!(empty.body["error"], "Missing X-API-Key header");
}

#[tokio::test]
async fn a_revoked_key_stops_working_within_five_seconds() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 0).await;
    let api = stack.client(&team.key);
    api.get("/me").await.expect(200);
    let keys = stack.admin(&["list-keys", "--team", &team.id]).await;
    let key_id = keys[0]["id"].as_str().unwrap().to_owned();
    stack.admin(&["revoke-key", &key_id]).await;
    tokio::time::sleep(Duration::from_millis(5_000)).await;
    let response = api.get("/me").await;
    assert_eq!(response.status, 401);
    assert_eq!(response.body["error"], "Invalid API key");
}

#[tokio::test]
async fn me_describes_the_team_and_never_returns_the_key() {
    let stack = Stack::start().await;
    let team = stack.team("Acme Corp", false, 42).await;
    let response = stack.client(&team.key).get("/me").await;
    let data = &response.expect(200)["data"];
    assert_eq!(data["team"]["id"], team.id.as_str());
    assert_eq!(data["team"]["name"], "Acme Corp");
    assert!(data["team"]["createdAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(data["ownsAgency"], false);
    assert_eq!(data["credits"]["balance"], 42);
    assert_eq!(data["subscription"]["status"], "active");
    assert!(data["subscription"]["plan"].is_string());
    assert!(data["subscription"]["currentPeriodEnd"].is_string());
    assert_eq!(data["apiKey"]["access"], "full");
    assert_eq!(data["apiKey"]["name"], "test");
    assert!(team.key.starts_with(data["apiKey"]["prefix"].as_str().unwrap()));
    assert!(data.get("agencyTeam").is_none());
    assert!(!response.text.contains(&team.key), "the key must never be returned");
}

#[tokio::test]
async fn read_only_keys_read_but_do_not_write() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 100).await;
    let read_only = stack.key(&agency.id, true).await;
    let api = stack.client(&read_only);
    assert_eq!(api.get("/me").await.expect(200)["data"]["apiKey"]["access"], "read_only");
    api.get("/agency/subteams").await.expect(200);
    let response = api.post("/agency/subteams", subteam_body("Client")).await;
    assert_eq!(response.error_code(403), "FORBIDDEN");
    assert_eq!(stack.client(&agency.key).get("/agency/subteams").await.body["pagination"]["totalCount"], 0);
}

#[tokio::test]
async fn the_agency_key_header_is_accepted_on_agency_routes_only() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 100).await;
    let api = Api::new(&stack.base, Some(&agency.key)).with_header("X-AGENCY-KEY");
    api.get("/agency/subteams").await.expect(200);
    assert_eq!(api.post("/agency/subteams", subteam_body("Client")).await.status, 201);
    assert_eq!(api.get("/me").await.body["error"], "Missing X-API-Key header");
}

#[tokio::test]
async fn two_different_keys_in_one_request_are_refused() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 100).await;
    let other = stack.team("Other", false, 0).await;
    let anonymous = stack.anonymous();
    let both = |first: &str, second: &str| {
        anonymous
            .request(reqwest::Method::GET, "/agency/subteams")
            .header("X-API-Key", first)
            .header("X-API-Key", second)
    };
    let refused = anonymous.send(both(&agency.key, &other.key)).await;
    assert_eq!(refused.error_code(401), "UNAUTHORIZED");
    assert_eq!(refused.body["error"], "The request carries different API keys");
    let agency_header = anonymous
        .request(reqwest::Method::GET, "/agency/subteams")
        .header("X-API-Key", &agency.key)
        .header("X-AGENCY-KEY", "ew_somebody_else");
    assert_eq!(anonymous.send(agency_header).await.error_code(401), "UNAUTHORIZED");
    // The same key twice is one key.
    anonymous.send(both(&agency.key, &agency.key)).await.expect(200);
}

pub fn subteam_body(name: &str) -> serde_json::Value {
    json!({
        "firstName": "Grace",
        "lastName": "Hopper",
        "teamName": name,
        "email": "grace@client.example",
        "totalMonthlyCredits": 10,
    })
}
