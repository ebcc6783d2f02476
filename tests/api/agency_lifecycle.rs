//! An agency's clients after their creation: read, changed, given credits, topped up each
//! period to their allowance, deleted; and never another agency's.

use std::time::Duration;

use serde_json::json;

use crate::auth::subteam_body;
use crate::common::{Api, Stack};

async fn balance(api: &Api, subteam: &str) -> i64 {
    api.get(&format!("/agency/subteams/{subteam}")).await.expect(200)["data"]["credits"]["balance"]
        .as_i64()
        .expect("a balance")
}

#[tokio::test]
async fn an_agency_reads_changes_funds_and_deletes_a_client() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let created = api.post("/agency/subteams", subteam_body("Client")).await.expect(201)["data"].clone();
    let id = created["id"].as_str().unwrap().to_owned();
    let path = format!("/agency/subteams/{id}");

    let read = api.get(&path).await.expect(200)["data"].clone();
    assert_eq!((read["name"].as_str(), read["totalMonthlyCredits"].as_u64()), (Some("Client"), Some(10)));
    assert!(read.get("inviteUrl").is_none());

    // Only what is given changes; access flags one by one.
    let body = json!({ "name": "Client Co", "totalMonthlyCredits": 25, "accessConfig": { "crm": false } });
    let updated = api.put(&path, body).await.expect(200)["data"].clone();
    assert_eq!((updated["name"].as_str(), updated["totalMonthlyCredits"].as_u64()), (Some("Client Co"), Some(25)));
    assert_eq!(
        (updated["accessConfig"]["crm"].as_bool(), updated["accessConfig"]["users"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(updated["credits"]["balance"], 10, "the new allowance waits for the next period");
    assert_eq!(api.put(&path, json!({ "totalMonthlyCredits": -1 })).await.fields(), vec!["totalMonthlyCredits"]);

    // A one-off transfer, all or nothing.
    let funded = api.post(&format!("{path}/credits"), json!({ "amount": 30 })).await.expect(200)["data"].clone();
    assert_eq!(funded["credits"]["balance"], 40);
    assert_eq!(api.get("/me").await.expect(200)["data"]["credits"]["balance"], 60);
    let short = api.post(&format!("{path}/credits"), json!({ "amount": 61 })).await;
    assert_eq!(short.error_code(402), "INSUFFICIENT_CREDITS");
    assert_eq!(balance(&api, &id).await, 40);
    assert_eq!(api.post(&format!("{path}/credits"), json!({ "amount": 0 })).await.fields(), vec!["amount"]);

    // Another agency reaches none of it.
    let other = stack.team("Other Agency", true, 100).await;
    let other_api = stack.client(&other.key);
    assert_eq!(other_api.get(&path).await.status, 404);
    assert_eq!(other_api.put(&path, json!({ "name": "Mine" })).await.status, 404);
    assert_eq!(other_api.post(&format!("{path}/credits"), json!({ "amount": 1 })).await.status, 404);
    assert_eq!(other_api.delete(&path).await.status, 404);
    assert_eq!(api.get(&format!("/agency/subteams/{}", uuid::Uuid::new_v4())).await.status, 404);

    // Deleted: not listed, its keys meet Team not found.
    let key = api.post(&format!("/api-keys?teamId={id}"), json!({ "name": "client" })).await.expect(201)["data"]["key"]
        .as_str()
        .unwrap()
        .to_owned();
    api.delete(&path).await.expect(200);
    assert_eq!(api.get(&path).await.status, 404);
    let listed = api.get("/agency/subteams").await.expect(200)["data"].clone();
    assert!(listed.as_array().unwrap().iter().all(|s| s["id"] != id.as_str()), "{listed}");
    let gone = stack.client(&key);
    let wait = async {
        while gone.get("/me").await.status != 404 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait).await.expect("the deleted subteam's key meets 404 within 10 s");
}

#[tokio::test]
async fn each_period_tops_a_client_up_to_its_allowance() {
    let stack = Stack::start_with(&[("SWITCHBOARD_BILLING_PERIOD", "2s")]).await;
    let agency = stack.team("Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let created = api.post("/agency/subteams", subteam_body("Client")).await.expect(201)["data"].clone();
    let id = created["id"].as_str().unwrap().to_owned();
    api.put(&format!("/agency/subteams/{id}"), json!({ "totalMonthlyCredits": 50 })).await.expect(200);

    let topped = async {
        while balance(&api, &id).await != 50 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(15), topped).await.expect("topped up to 50 within 15 s");
    // To the allowance, not by it: later periods move nothing while the balance is full.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(balance(&api, &id).await, 50);
    assert_eq!(api.get("/me").await.expect(200)["data"]["credits"]["balance"], 50);
}
