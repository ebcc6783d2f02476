//! `/api-keys`: a team makes, lists and revokes its keys over the API, as its people will from
//! the portal; an agency does it for a client with `teamId`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::auth::subteam_body;
use crate::common::{Api, Stack};

fn key_of(answer: &Value) -> String {
    answer["data"]["key"].as_str().expect("the secret, once").to_owned()
}

/// `GET /me` with `key` until it is refused (revoked keys stop within the auth cache time).
async fn refused_within(api: &Api, limit: Duration) {
    let wait = async {
        loop {
            if api.get("/me").await.status == 401 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(limit, wait).await.expect("the revoked key was refused in time");
}

#[tokio::test]
async fn a_team_makes_lists_and_revokes_its_keys() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let me = api.get("/me").await.expect(200)["data"]["apiKey"].clone();

    let created = api.post("/api-keys", json!({ "name": "laptop" })).await;
    let body = created.expect(201).clone();
    let secret = key_of(&body);
    let made = &body["data"];
    assert!(secret.starts_with("ew_") && made["prefix"] == secret[..9], "{body}");
    assert_eq!((made["name"].as_str(), made["access"].as_str()), (Some("laptop"), Some("full")));
    assert_eq!(made["lastUsedAt"], Value::Null);
    assert_eq!(made["createdBy"], json!({ "type": "key", "id": me["id"], "name": me["name"] }));

    // The new key is a key of the team, and is seen used.
    let laptop = stack.client(&secret);
    assert_eq!(laptop.get("/me").await.expect(200)["data"]["apiKey"]["id"], made["id"]);
    let listed = api.get("/api-keys").await;
    let keys = listed.expect(200)["data"].as_array().unwrap().clone();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(keys[0]["id"], made["id"], "newest first");
    assert!(keys[0]["lastUsedAt"].is_string(), "{}", keys[0]);
    assert_eq!(keys[1]["createdBy"], Value::Null, "made by an operator with switchboard admin");
    assert!(!listed.text.contains(&secret), "a secret is never listed");

    // Read-only keys may neither see nor change the team's keys.
    let read_only = api.post("/api-keys", json!({ "name": "dashboard", "access": "read-only" })).await;
    let read_only_body = read_only.expect(201).clone();
    assert_eq!(read_only_body["data"]["access"], "read-only");
    let dashboard = stack.client(&key_of(&read_only_body));
    assert_eq!(dashboard.get("/api-keys").await.error_code(403), "FORBIDDEN");
    assert_eq!(dashboard.post("/api-keys", json!({ "name": "x" })).await.error_code(403), "FORBIDDEN");
    let laptop_path = format!("/api-keys/{}", made["id"].as_str().unwrap());
    assert_eq!(dashboard.delete(&laptop_path).await.error_code(403), "FORBIDDEN");

    // Revoked: gone from the list, refused within the auth cache time (2 s).
    let revoked = api.delete(&laptop_path).await;
    assert_eq!(revoked.expect(200)["data"]["id"], made["id"]);
    refused_within(&laptop, Duration::from_secs(10)).await;
    let ids: Vec<Value> =
        api.get("/api-keys").await.expect(200)["data"].as_array().unwrap().iter().map(|k| k["id"].clone()).collect();
    assert!(!ids.contains(&made["id"]), "{ids:?}");
    assert_eq!(api.delete(&laptop_path).await.status, 200, "revoking again answers the key again");

    // A key may revoke itself.
    let own = format!("/api-keys/{}", me["id"].as_str().unwrap());
    api.delete(&own).await.expect(200);
    refused_within(&api, Duration::from_secs(10)).await;
}

#[tokio::test]
async fn bad_input_is_refused_and_other_teams_keys_are_not_found() {
    let stack = Stack::start().await;
    let (acme, other) = (stack.team("Acme", false, 10).await, stack.team("Other", false, 10).await);
    let api = stack.client(&acme.key);
    for (body, field) in [
        (json!({}), "name"),
        (json!({ "name": "" }), "name"),
        (json!({ "name": "x".repeat(256) }), "name"),
        (json!({ "name": "ok", "access": "admin" }), "access"),
        (json!({ "name": 5 }), "name"),
    ] {
        let answer = api.post("/api-keys", body.clone()).await;
        assert_eq!(answer.error_code(400), "VALIDATION_ERROR", "{body}");
        assert_eq!(answer.fields(), [field], "{body}");
    }
    assert_eq!(api.delete("/api-keys/not-an-id").await.error_code(400), "VALIDATION_ERROR");

    let theirs = stack.client(&other.key).get("/me").await.expect(200)["data"]["apiKey"]["id"].clone();
    let theirs = format!("/api-keys/{}", theirs.as_str().unwrap());
    assert_eq!(api.delete(&theirs).await.error_code(404), "NOT_FOUND");
    stack.client(&other.key).get("/me").await.expect(200);
    let listed = api.get("/api-keys").await.expect(200)["data"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 1, "only the team's own: {listed:?}");
}

#[tokio::test]
async fn a_team_has_at_most_100_active_keys() {
    let stack = Stack::start_with(&[("SWITCHBOARD_RATE_LIMIT_WRITE", "1000")]).await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    // The team's first key counts: 99 more fill it.
    let mut last = String::new();
    for n in 0..99 {
        last = api.post("/api-keys", json!({ "name": format!("k{n}") })).await.expect(201)["data"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
    }
    let full = api.post("/api-keys", json!({ "name": "one too many" })).await;
    assert_eq!(full.error_code(409), "CONFLICT");
    assert!(full.body["hint"].as_str().unwrap().contains("Revoke"), "{}", full.text);
    api.delete(&format!("/api-keys/{last}")).await.expect(200);
    api.post("/api-keys", json!({ "name": "in its place" })).await.expect(201);
}

#[tokio::test]
async fn an_agency_gives_a_client_its_first_key() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 1000).await;
    let api = stack.client(&agency.key);
    let created = api.post("/agency/subteams", subteam_body("Client")).await;
    let client_id = created.expect(201)["data"]["id"].as_str().unwrap().to_owned();

    let made = api.post(&format!("/api-keys?teamId={client_id}"), json!({ "name": "client's first" })).await;
    let client = stack.client(&key_of(made.expect(201)));
    assert_eq!(client.get("/me").await.expect(200)["data"]["team"]["id"], client_id.as_str());
    let listed = api.get(&format!("/api-keys?teamId={client_id}")).await.expect(200)["data"].clone();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    // The client's own key does not reach the agency's keys.
    assert_eq!(client.get(&format!("/api-keys?teamId={}", agency.id)).await.status, 403);
}
