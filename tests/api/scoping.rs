//! Agency scoping: an agency key acts on its subteams with `teamId`, which is refused for
//! others' subteams, non-agencies and bad ids; access flags bind a subteam's own keys only; a
//! deleted team is 404.

use serde_json::json;

use crate::auth::subteam_body;
use crate::common::Stack;

#[tokio::test]
async fn an_agency_key_acts_on_its_subteam_with_team_id() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 500).await;
    let api = stack.client(&agency.key);
    let created = api.post("/agency/subteams", subteam_body("Client")).await;
    let subteam_id = created.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created.body["message"], "Subteam created successfully");

    let me = api.get(&format!("/me?teamId={subteam_id}")).await;
    let data = &me.expect(200)["data"];
    assert_eq!(data["team"]["id"], subteam_id.as_str());
    assert_eq!(data["team"]["name"], "Client");
    assert_eq!(data["ownsAgency"], false);
    assert_eq!(data["credits"]["balance"], 10);
    assert_eq!(data["agencyTeam"], json!({ "id": agency.id, "name": "Agency" }));
    assert_eq!(api.get("/me").await.body["data"]["credits"]["balance"], 490);

    let own = api.get(&format!("/me?teamId={}", agency.id)).await;
    assert_eq!(own.expect(200)["data"]["team"]["id"], agency.id.as_str());
}

#[tokio::test]
async fn team_id_is_refused_for_non_agencies_foreign_subteams_and_bad_ids() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 500).await;
    let rival = stack.team("Rival", true, 500).await;
    let plain = stack.team("Plain", false, 0).await;
    let subteam_id =
        stack.client(&agency.key).post("/agency/subteams", subteam_body("Client")).await.body["data"]["id"]
            .as_str()
            .unwrap()
            .to_owned();

    let not_agency = stack.client(&plain.key).get(&format!("/me?teamId={subteam_id}")).await;
    assert_eq!(not_agency.error_code(403), "FORBIDDEN");
    let foreign = stack.client(&rival.key).get(&format!("/me?teamId={subteam_id}")).await;
    assert_eq!(foreign.error_code(403), "FORBIDDEN");
    let unknown = stack.client(&agency.key).get(&format!("/me?teamId={}", uuid::Uuid::new_v4())).await;
    assert_eq!(unknown.error_code(403), "FORBIDDEN");
    for bad in ["nope", "123", "", "00000000-0000-0000-0000-00000000000g"] {
        let malformed = stack.client(&agency.key).get(&format!("/me?teamId={bad}")).await;
        assert_eq!(malformed.error_code(400), "VALIDATION_ERROR", "{bad}");
        assert_eq!(malformed.fields(), ["teamId"]);
    }
}

#[tokio::test]
async fn access_flags_limit_a_subteams_own_keys_but_not_its_agency() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 500).await;
    let mut body = subteam_body("Client");
    body["accessConfig"] = json!({ "users": false });
    let created = stack.client(&agency.key).post("/agency/subteams", body).await;
    let data = created.expect(201)["data"].clone();
    assert_eq!(data["accessConfig"]["users"], false);
    assert_eq!(data["accessConfig"]["knowledgeBase"], true);
    let subteam_id = data["id"].as_str().unwrap().to_owned();

    let own_key = stack.key(&subteam_id, false).await;
    let denied = stack.client(&own_key).get("/users").await;
    assert_eq!(denied.error_code(403), "FORBIDDEN");
    assert!(denied.body["error"].as_str().unwrap().contains("users"));
    stack.client(&own_key).get("/me").await.expect(200);

    let via_agency = stack.client(&agency.key).get(&format!("/users?teamId={subteam_id}")).await;
    let users = via_agency.expect(200)["data"].as_array().unwrap().clone();
    assert_eq!(users.len(), 1);
    assert_eq!(users[0]["email"], "grace@client.example");
    assert_eq!(users[0]["role"], "owner");
}

#[tokio::test]
async fn a_deleted_team_is_404_on_me() {
    let stack = Stack::start().await;
    let team = stack.team("Doomed", false, 0).await;
    stack.admin(&["delete-team", &team.id]).await;
    let response = stack.client(&team.key).get("/me").await;
    assert_eq!(response.error_code(404), "NOT_FOUND");
    assert_eq!(response.body["error"], "Team not found");
}
