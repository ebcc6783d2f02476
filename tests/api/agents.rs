//! Agents over HTTP: the CRUD and list order, body validation, instructions in their published
//! shape with length edges and a history of twenty versions, and that another team's or a
//! read-only key never reaches them.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Api, Stack};

pub async fn create_agent(api: &Api, name: &str, extra: Value) -> Value {
    let mut body = json!({ "name": name, "type": "phone" });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let response = api.post("/agents", body).await;
    response.expect(201)["data"].clone()
}

pub fn id(value: &Value) -> String {
    value["id"].as_str().expect("id").to_owned()
}

#[tokio::test]
async fn agents_are_created_listed_newest_first_updated_and_deleted() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 0).await;
    let api = stack.client(&team.key);
    assert_eq!(api.get("/agents").await.expect(200)["data"], json!([]));

    let first = create_agent(&api, "Front desk", json!({ "description": "Answers the phone" })).await;
    assert_eq!(first["type"], "phone");
    assert_eq!(first["description"], "Answers the phone");
    assert_eq!(first["knowledgebase"], Value::Null);
    assert!(first["createdAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(first["createdAt"], first["updatedAt"]);
    let second = create_agent(&api, "Web chat", json!({ "type": "chat" })).await;

    let listed = api.get("/agents").await;
    let names: Vec<_> = listed.expect(200)["data"].as_array().unwrap().iter().map(|a| a["name"].clone()).collect();
    assert_eq!(names, [json!("Web chat"), json!("Front desk")]);

    let got = api.get(&format!("/agents/{}", id(&second))).await;
    assert_eq!(got.expect(200)["data"]["type"], "chat");

    let updated =
        api.put(&format!("/agents/{}", id(&first)), json!({ "name": "Reception", "description": null })).await;
    assert_eq!(updated.expect(200)["message"], "Agent updated successfully");
    assert_eq!(updated.body["data"]["name"], "Reception");
    assert_eq!(updated.body["data"]["description"], Value::Null);

    let deleted = api.delete(&format!("/agents/{}", id(&first))).await;
    assert_eq!(deleted.expect(200)["data"]["id"], first["id"]);
    assert_eq!(api.get(&format!("/agents/{}", id(&first))).await.body["error"], "Agent not found");
    assert_eq!(api.get("/agents").await.body["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn agent_bodies_are_validated() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 0).await;
    let api = stack.client(&team.key);
    let response = api
        .post(
            "/agents",
            json!({ "name": "x".repeat(256), "type": "fax", "instructions": "", "knowledgebaseId": "nope" }),
        )
        .await;
    assert_eq!(response.error_code(400), "VALIDATION_ERROR");
    // Every violation, in the order the request type declares its members.
    assert_eq!(response.fields(), ["name", "type", "instructions", "knowledgebaseId"]);
    let missing = api.post("/agents", json!({})).await;
    assert_eq!(missing.fields(), ["name", "type"]);
    let unknown_kb =
        api.post("/agents", json!({ "name": "A", "type": "chat", "knowledgebaseId": uuid::Uuid::new_v4() })).await;
    assert_eq!(unknown_kb.error_code(404), "NOT_FOUND");
    assert_eq!(unknown_kb.body["error"], "Knowledgebase not found");
    assert_eq!(api.get("/agents").await.body["data"], json!([]), "nothing was created");
    let bad_id = api.get("/agents/not-a-uuid/instructions").await;
    assert_eq!(bad_id.error_code(400), "VALIDATION_ERROR");
    assert_eq!(bad_id.fields(), ["agentId"]);
}

#[tokio::test]
async fn instructions_are_replaced_with_the_published_shape() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 0).await;
    let api = stack.client(&team.key);
    let agent = create_agent(&api, "Ava", json!({ "instructions": "Be kind." })).await;
    let path = format!("/agents/{}/instructions", id(&agent));

    let current = api.get(&path).await;
    let data = &current.expect(200)["data"];
    assert_eq!(data["id"], agent["id"]);
    assert_eq!(data["name"], "Ava");
    assert_eq!(data["instructions"], "Be kind.");
    assert!(data["updatedAt"].is_string());

    let put = api.put(&path, json!({ "instructions": "Be brief." })).await;
    assert_eq!(put.expect(200)["message"], "Agent instructions updated successfully");
    assert_eq!(put.body["data"]["instructions"], "Be brief.");
    assert_eq!(put.body["data"]["version"], 2);
    assert_eq!(api.get(&path).await.body["data"]["instructions"], "Be brief.");

    let mut completed = false;
    for _ in 0..100 {
        let status = api.get(&path).await.body["data"]["promptOptimization"].clone();
        if status["status"] == "completed" && status["version"] == 2 {
            assert!(status["completedAt"].is_string());
            completed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(completed, "the prompt-optimisation job ran");
}

#[tokio::test]
async fn instruction_lengths_are_checked_at_both_edges() {
    let stack = Stack::start_with(&[("SWITCHBOARD_MAX_BODY_BYTES", "1000000")]).await;
    let team = stack.team("Acme", false, 0).await;
    let api = stack.client(&team.key);
    let agent = create_agent(&api, "Ava", json!({})).await;
    let path = format!("/agents/{}/instructions", id(&agent));
    for (text, status) in
        [(String::new(), 400), ("a".to_owned(), 200), ("ü".repeat(100_000), 200), ("ü".repeat(100_001), 400)]
    {
        let response = api.put(&path, json!({ "instructions": text })).await;
        assert_eq!(response.status, status, "{} characters", text.chars().count());
        if status == 400 {
            assert_eq!(response.fields(), ["instructions"]);
        }
    }
    assert_eq!(api.put(&path, json!({ "instructions": 5 })).await.fields(), ["instructions"]);
    assert_eq!(api.put(&path, json!({})).await.fields(), ["instructions"]);
    assert_eq!(api.get(&path).await.body["data"]["instructions"].as_str().unwrap().chars().count(), 100_000);
}

#[tokio::test]
async fn the_history_keeps_exactly_twenty_versions_and_restores_them() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 0).await;
    let api = stack.client(&team.key);
    let agent = create_agent(&api, "Ava", json!({ "instructions": "text 1" })).await;
    let path = format!("/agents/{}/instructions", id(&agent));
    for n in 2..=23 {
        api.put(&path, json!({ "instructions": format!("text {n}") })).await.expect(200);
    }
    let history = api.get(&format!("{path}/history")).await;
    let versions = history.expect(200)["data"].as_array().unwrap().clone();
    assert_eq!(versions.len(), 20);
    assert_eq!(versions[0]["version"], 22);
    assert_eq!(versions[0]["instructions"], "text 22");
    assert_eq!(versions[19]["version"], 3);
    assert!(versions.iter().all(|v| v["createdAt"].is_string() && v["replacedAt"].is_string()));

    let one = api.get(&format!("{path}/history/5")).await;
    assert_eq!(one.expect(200)["data"], versions[17]);
    assert_eq!(api.get(&format!("{path}/history/1")).await.error_code(404), "NOT_FOUND");
    assert_eq!(api.get(&format!("{path}/history/0")).await.fields(), ["version"]);

    let restored = api.post(&format!("{path}/history/5/restore"), json!({})).await;
    assert_eq!(restored.expect(200)["data"]["instructions"], "text 5");
    assert_eq!(restored.body["data"]["version"], 24);
    let gone = api.post(&format!("{path}/history/1/restore"), json!({})).await;
    assert_eq!(gone.error_code(404), "NOT_FOUND");
    let bad = api.post(&format!("{path}/history/first/restore"), json!({})).await;
    assert_eq!(bad.fields(), ["version"]);
}

#[tokio::test]
async fn another_teams_agent_is_404_on_every_endpoint() {
    let stack = Stack::start().await;
    let owner = stack.team("Owner", false, 0).await;
    let other = stack.team("Other", false, 0).await;
    let agent = create_agent(&stack.client(&owner.key), "Private", json!({ "instructions": "secret" })).await;
    let api = stack.client(&other.key);
    let agent_id = id(&agent);
    let reference = uuid::Uuid::new_v4();
    let responses = [
        api.get(&format!("/agents/{agent_id}")).await,
        api.put(&format!("/agents/{agent_id}"), json!({ "name": "Mine" })).await,
        api.delete(&format!("/agents/{agent_id}")).await,
        api.get(&format!("/agents/{agent_id}/instructions")).await,
        api.put(&format!("/agents/{agent_id}/instructions"), json!({ "instructions": "hijack" })).await,
        api.get(&format!("/agents/{agent_id}/instructions/history")).await,
        api.get(&format!("/agents/{agent_id}/instructions/history/1")).await,
        api.post(&format!("/agents/{agent_id}/instructions/history/1/restore"), json!({})).await,
        api.get(&format!("/agents/{agent_id}/knowledgebase")).await,
        api.get(&format!("/agents/{agent_id}/knowledgebase/search?query=hello")).await,
        api.post(&format!("/agents/{agent_id}/knowledgebase/references"), json!({ "question": "q", "answer": "a" }))
            .await,
        api.get(&format!("/agents/{agent_id}/knowledgebase/references/{reference}")).await,
        api.put(&format!("/agents/{agent_id}/knowledgebase/references/{reference}"), json!({ "answer": "a" })).await,
        api.delete(&format!("/agents/{agent_id}/knowledgebase/references/{reference}")).await,
    ];
    for response in responses {
        assert_eq!(response.status, 404, "{}", response.text);
        assert_eq!(response.body["error"], "Agent not found");
    }
    assert!(api.get("/agents").await.body["data"].as_array().unwrap().is_empty());
    let still = stack.client(&owner.key).get(&format!("/agents/{agent_id}/instructions")).await;
    assert_eq!(still.expect(200)["data"]["instructions"], "secret");
}

#[tokio::test]
async fn subteam_flags_and_read_only_keys_guard_agents() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 100).await;
    let mut body = crate::auth::subteam_body("Client");
    body["accessConfig"] = json!({ "agentCreation": false, "instructionsWrite": false });
    let subteam = stack.client(&agency.key).post("/agency/subteams", body).await;
    let subteam_id = subteam.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    let own = stack.client(&stack.key(&subteam_id, false).await);
    assert_eq!(own.post("/agents", json!({ "name": "A", "type": "chat" })).await.error_code(403), "FORBIDDEN");

    let agency_api = stack.client(&agency.key);
    let created =
        agency_api.post(&format!("/agents?teamId={subteam_id}"), json!({ "name": "A", "type": "chat" })).await;
    let agent_id = created.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(own.get("/agents").await.body["data"][0]["id"], agent_id.as_str());
    assert!(agency_api.get("/agents").await.body["data"].as_array().unwrap().is_empty());
    let path = format!("/agents/{agent_id}/instructions");
    assert_eq!(own.put(&path, json!({ "instructions": "x" })).await.status, 403);
    own.get(&path).await.expect(200);
    agency_api.put(&format!("{path}?teamId={subteam_id}"), json!({ "instructions": "x" })).await.expect(200);

    let read_only = stack.client(&stack.key(&subteam_id, true).await);
    assert_eq!(read_only.put(&path, json!({ "instructions": "y" })).await.status, 403);
    assert_eq!(read_only.get(&path).await.expect(200)["data"]["instructions"], "x");
}
