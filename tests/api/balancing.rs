//! A service URL that names several replicas: the gateway balances its calls over them, stops
//! sending to one that is gone (its health check fails), and a replica that drains on SIGTERM
//! (`SWITCHBOARD_DRAIN_SECONDS`) stops without a single failed request (docs/deploy.md,
//! "Replicas and restarts"). PostgreSQL only: replicas share one database.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Api, Stack};

/// Requests the client keeps sending while a replica stops: reads and writes.
async fn one_round(api: &Api, round: usize) -> Vec<String> {
    let mut failures = Vec::new();
    let listed = api.get("/contacts?limit=5").await;
    if listed.status != 200 {
        failures.push(format!("list: {} {}", listed.status, listed.body));
    }
    let created = api.post("/contacts", json!({ "number": format!("+1415556{:04}", round % 10_000) })).await;
    if created.status != 201 {
        failures.push(format!("create {round}: {} {}", created.status, created.body));
    }
    failures
}

#[tokio::test]
async fn a_service_of_several_replicas_is_balanced_followed_and_drained() {
    let Some(mut stack) = Stack::crm_on_postgres().await else { return };
    let drain = [("SWITCHBOARD_DRAIN_SECONDS", "5")];
    let (draining, draining_url) = stack.start_replica_with("crm", &drain).await;
    let (_last, last_url) = stack.start_replica_with("crm", &drain).await;
    let urls = format!("{},{draining_url},{last_url}", stack.grpc_url("crm"));
    // The client sends as fast as it can, well past the spec's per-minute limits.
    let unlimited = [
        ("SWITCHBOARD_CRM_URL", urls.as_str()),
        ("SWITCHBOARD_RATE_LIMIT_STANDARD", "1000000"),
        ("SWITCHBOARD_RATE_LIMIT_WRITE", "1000000"),
    ];
    let (_gateway, base) = stack.start_gateway(&unlimited).await;
    let team = stack.team("Balanced", false, 0).await;
    let api = Api::new(&base, Some(&team.key));

    let mut round = 0;
    for _ in 0..20 {
        let failures = one_round(&api, round).await;
        assert!(failures.is_empty(), "three replicas serving: {failures:?}");
        round += 1;
    }

    // The first replica goes away at once (no drain): what was sent to it in the moment
    // fails, and within a few rounds of health checks nothing is sent to it any more.
    stack.stop("crm").await;
    let started = Instant::now();
    let (mut streak, mut lost) = (0, 0);
    while streak < 20 {
        assert!(started.elapsed() < Duration::from_secs(20), "the gateway kept calling the stopped replica for 20 s");
        let failures = one_round(&api, round).await;
        round += 1;
        if failures.is_empty() {
            streak += 1;
        } else {
            (streak, lost) = (0, lost + failures.len());
        }
    }
    eprintln!("stopped without a drain: {lost} requests failed, followed within {:?}", started.elapsed());
    for _ in 0..20 {
        let failures = one_round(&api, round).await;
        assert!(failures.is_empty(), "after the stopped replica was left: {failures:?}");
        round += 1;
    }

    // The second replica drains: NOT_SERVING while it still serves, then it stops. A client
    // that keeps sending meanwhile sees no failure.
    let pid = draining.child.id().expect("the draining replica runs");
    let stopping = tokio::spawn(draining.terminate());
    let started = Instant::now();
    let mut failures = Vec::new();
    while !stopping.is_finished() {
        assert!(started.elapsed() < Duration::from_secs(40), "the draining replica (pid {pid}) did not stop in 40 s");
        failures.extend(one_round(&api, round).await);
        round += 1;
    }
    let exit = stopping.await.expect("the terminate task");
    assert_eq!(exit, Some(0), "the drained replica exits cleanly");
    assert!(failures.is_empty(), "a drained replica failed {} requests: {failures:?}", failures.len());
    eprintln!("drained in {:?} under {round} rounds of requests in all", started.elapsed());
    for _ in 0..20 {
        let failures = one_round(&api, round).await;
        assert!(failures.is_empty(), "one replica left: {failures:?}");
        round += 1;
    }
}

/// A gateway that drains says so on `/readyz` (503, the error body) while it still answers
/// everything else, then stops cleanly.
#[tokio::test]
async fn a_draining_gateway_is_not_ready_but_still_serves() {
    let Some(stack) = Stack::crm_on_postgres().await else { return };
    let (gateway, base) = stack.start_gateway(&[("SWITCHBOARD_DRAIN_SECONDS", "3")]).await;
    let team = stack.team("Drained", false, 0).await;
    let (api, anonymous) = (Api::new(&base, Some(&team.key)), Api::new(&base, None));
    let root = base.trim_end_matches("/v1");
    let ready = Api::new(root, None).get("/readyz").await;
    assert_eq!(
        (ready.status, &ready.body),
        (200, &json!({ "status": "ok" })),
        "ready before the drain: {}",
        ready.text
    );

    let stopping = tokio::spawn(gateway.terminate());
    let started = Instant::now();
    let mut draining = None;
    while draining.is_none() {
        assert!(started.elapsed() < Duration::from_secs(3), "/readyz never answered 503 during the 3 s drain");
        let ready = anonymous.get("/readyz").await;
        if ready.status == 503 {
            draining = Some(ready);
        }
    }
    let draining = draining.expect("a draining answer");
    assert_eq!(draining.error_code(503), "SERVICE_UNAVAILABLE", "{}", draining.body);
    api.get("/contacts").await.expect(200);
    api.post("/contacts", json!({ "number": "+14155550177" })).await.expect(201);
    let exit = tokio::time::timeout(Duration::from_secs(40), stopping).await.expect("stopped within 40 s");
    assert_eq!(exit.expect("the terminate task"), Some(0), "the drained gateway exits cleanly");
}
