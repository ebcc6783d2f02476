//! Credits stay exact under concurrency: subteams created at once never overdraw their agency,
//! and `/me` shows a change to the team's credits as soon as it is made.

use crate::auth::subteam_body;
use crate::common::Stack;

#[tokio::test]
async fn fifty_concurrent_subteams_never_overdraw_the_agency() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let requests = (0..50).map(|i| {
        let api = api.clone();
        tokio::spawn(async move { api.post("/agency/subteams", subteam_body(&format!("Client {i}"))).await })
    });
    let mut created = 0;
    for request in requests {
        let response = request.await.unwrap();
        match response.status {
            201 => created += 1,
            402 => assert_eq!(response.body["code"], "INSUFFICIENT_CREDITS"),
            other => panic!("unexpected {other}: {}", response.text),
        }
    }
    assert_eq!(created, 10);
    assert_eq!(api.get("/me").await.body["data"]["credits"]["balance"], 0);
    assert_eq!(api.get("/agency/subteams").await.body["pagination"]["totalCount"], 10);
}

#[tokio::test]
async fn granted_credits_show_on_me() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 0).await;
    let granted = stack.admin(&["grant-credits", "--team", &team.id, "250"]).await;
    assert_eq!(granted["balance"], 250);
    assert_eq!(stack.client(&team.key).get("/me").await.body["data"]["credits"]["balance"], 250);
}

#[tokio::test]
async fn me_sent_after_a_change_shows_it_while_other_reads_of_the_team_are_in_flight() {
    let stack = Stack::start_with(&[("SWITCHBOARD_RATE_LIMIT_STANDARD", "100000")]).await;
    let team = stack.team("Acme", false, 0).await;
    let api = stack.client(&team.key);
    // Keep the team's identity busy with concurrent reads, so that the checks below are
    // served by shared reads.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pollers: Vec<_> = (0..8)
        .map(|_| {
            let (api, stop) = (api.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    api.get("/me").await.expect(200);
                }
            })
        })
        .collect();
    for round in 1..=20 {
        stack.admin(&["grant-credits", "--team", &team.id, "1"]).await;
        let me = api.get("/me").await;
        assert_eq!(me.expect(200)["data"]["credits"]["balance"], round, "a read older than the request was served");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for poller in pollers {
        poller.await.unwrap();
    }
}
