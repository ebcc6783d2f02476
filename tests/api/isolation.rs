//! One team never sees another's data, whichever endpoint it asks.

use crate::auth::subteam_body;
use crate::common::Stack;

#[tokio::test]
async fn a_team_never_sees_another_teams_data() {
    let stack = Stack::start().await;
    let a = stack.team("Team A", true, 100).await;
    let b = stack.team("Team B", true, 100).await;
    stack
        .admin(&["create-user", "--team", &a.id, "--first-name", "Ann", "--last-name", "A", "--email", "ann@a.example"])
        .await;
    stack.client(&a.key).post("/agency/subteams", subteam_body("A's client")).await.expect(201);

    let me_b = stack.client(&b.key).get("/me").await;
    assert_eq!(me_b.expect(200)["data"]["team"]["id"], b.id.as_str());
    assert_eq!(me_b.body["data"]["credits"]["balance"], 100);

    let subteams_b = stack.client(&b.key).get("/agency/subteams").await;
    assert_eq!(subteams_b.expect(200)["data"].as_array().unwrap().len(), 0);
    assert_eq!(subteams_b.body["pagination"]["totalCount"], 0);
    assert!(!subteams_b.text.contains("A's client"));

    let users_b = stack.client(&b.key).get("/users").await;
    assert!(users_b.expect(200)["data"].as_array().unwrap().is_empty());
    assert!(!users_b.text.contains("ann@a.example"));
    let users_a = stack.client(&a.key).get("/users").await;
    assert_eq!(users_a.expect(200)["data"][0]["email"], "ann@a.example");
}
