//! Inputs at the edges of what the contract allows: ids in other spellings, bodiless writes
//! with a stray Content-Type, NUL characters, a threshold equal to a result's similarity.

use serde_json::json;

use crate::common::Stack;

#[tokio::test]
async fn uuids_in_other_spellings_name_the_same_resources() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let kb = api.post("/knowledgebase", json!({ "name": "Support" })).await.expect(201)["data"]["id"].clone();
    let kb = kb.as_str().unwrap().to_owned();
    let agent =
        api.post("/agents", json!({ "name": "Ava", "type": "chat", "knowledgebaseId": kb.to_uppercase() })).await;
    let agent = agent.expect(201)["data"].clone();
    assert_eq!(agent["knowledgebase"]["id"], kb.as_str(), "stored in canonical form");
    let agent_id = agent["id"].as_str().unwrap();

    let upper = api.get(&format!("/agents/{}", agent_id.to_uppercase())).await;
    assert_eq!(upper.expect(200)["data"]["id"], agent_id);
    let simple = api.get(&format!("/knowledgebase/{}", kb.replace('-', ""))).await;
    assert_eq!(simple.expect(200)["data"]["id"], kb.as_str());

    let subteam = api
        .post(
            "/agency/subteams",
            json!({ "firstName": "Grace", "lastName": "Hopper", "teamName": "Client", "email": "grace@client.example", "totalMonthlyCredits": 10 }),
        )
        .await;
    let subteam = subteam.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    let me = api.get(&format!("/me?teamId={}", subteam.to_uppercase())).await;
    assert_eq!(me.expect(200)["data"]["team"]["id"], subteam.as_str());
    let own = api.get(&format!("/me?teamId={}", agency.id.to_uppercase())).await;
    assert_eq!(own.expect(200)["data"]["team"]["id"], agency.id.as_str());
    assert_eq!(api.get("/me?teamId=not-a-uuid").await.error_code(400), "VALIDATION_ERROR");
}

#[tokio::test]
async fn a_bodiless_write_ignores_the_content_type_of_an_empty_body() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let agent = api.post("/agents", json!({ "name": "Ava", "type": "chat" })).await.expect(201)["data"]["id"].clone();
    let restore = format!("/agents/{}/instructions/history/1/restore", agent.as_str().unwrap());
    // `curl -d ''` sends a form type with nothing in it: the restore is looked at, not refused.
    let answer = api.raw("POST", &restore, Some("application/x-www-form-urlencoded"), Vec::new()).await;
    assert_eq!(answer.error_code(404), "NOT_FOUND", "{}", answer.text);
    // A body that is there must be JSON.
    let answer = api.raw("POST", "/agents", Some("text/plain"), b"name=Ava".to_vec()).await;
    assert_eq!(answer.error_code(415), "UNSUPPORTED_MEDIA_TYPE");
}

#[tokio::test]
async fn the_longest_instructions_fit_even_with_every_character_escaped() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let agent = api.post("/agents", json!({ "name": "Ava", "type": "chat" })).await.expect(201)["data"]["id"].clone();
    // 100,000 characters outside the BMP, each written as an escaped surrogate pair: 1.2 MB.
    let body = format!("{{\"instructions\":\"{}\"}}", "\\ud83d\\ude00".repeat(100_000));
    let path = format!("/agents/{}/instructions", agent.as_str().unwrap());
    let answer = api.raw("PUT", &path, Some("application/json"), body.into_bytes()).await;
    assert_eq!(answer.expect(200)["data"]["instructions"].as_str().unwrap().chars().count(), 100_000);
}

#[tokio::test]
async fn nul_characters_are_refused_as_invalid_input() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let agent = api.post("/agents", json!({ "name": "Ava", "type": "chat" })).await.expect(201)["data"]["id"].clone();
    let answer = api
        .put(&format!("/agents/{}/instructions", agent.as_str().unwrap()), json!({ "instructions": "a\u{0}b" }))
        .await;
    assert_eq!(answer.error_code(400), "VALIDATION_ERROR");
    assert_eq!(
        answer.body["details"][0],
        json!({ "field": "instructions", "message": "must not contain NUL characters" })
    );
    let kb = api.post("/knowledgebase", json!({ "name": "Support" })).await.expect(201)["data"]["id"].clone();
    let answer = api
        .post(
            &format!("/knowledgebase/{}/references", kb.as_str().unwrap()),
            json!({ "question": "Q\u{0}?", "answer": "A" }),
        )
        .await;
    assert_eq!(answer.fields(), ["question"]);
}

#[tokio::test]
async fn a_threshold_equal_to_a_similarity_keeps_that_result() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let kb = api.post("/knowledgebase", json!({ "name": "Support" })).await.expect(201)["data"]["id"].clone();
    let base = format!("/knowledgebase/{}", kb.as_str().unwrap());
    api.post(&format!("{base}/references"), json!({ "question": "What are your opening hours?", "answer": "9 to 5." }))
        .await
        .expect(201);
    let first = api.get(&format!("{base}/search?query=hours&threshold=0")).await;
    let similarity = first.expect(200)["data"][0]["similarity"].as_f64().unwrap();
    let again = api.get(&format!("{base}/search?query=hours&threshold={similarity}")).await;
    assert_eq!(again.expect(200)["meta"]["resultCount"], 1, "threshold is a minimum: {similarity}");
}

/// A path segment is decoded whole: an id followed by anything (`&junk=1`, `;x`, an escaped
/// slash) is not that id, but a bad id (400), and never reaches the resource.
#[tokio::test]
async fn an_id_with_anything_after_it_is_not_that_id() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let agent = api.post("/agents", json!({ "name": "Ava", "type": "chat" })).await.expect(201)["data"]["id"].clone();
    let agent = agent.as_str().unwrap().to_owned();
    assert_eq!(api.get(&format!("/agents/{agent}")).await.expect(200)["data"]["id"], agent.as_str());
    for suffix in ["&junk=1", "%26junk=1", ";x", "%2Fx", "+", "%20", "%00", "%FF", "%zz"] {
        let answer = api.get(&format!("/agents/{agent}{suffix}")).await;
        assert_eq!(answer.error_code(400), "VALIDATION_ERROR", "{suffix}: {}", answer.text);
        assert_eq!(answer.fields(), ["agentId"], "{suffix}");
    }
    let deleted = api.delete(&format!("/agents/{agent}&junk=1")).await;
    assert_eq!(deleted.status, 400, "{}", deleted.text);
    api.get(&format!("/agents/{agent}")).await.expect(200);
}
