use std::time::Duration;

use crate::auth::subteam_body;
use crate::common::{Api, Process, Redis, Stack};

fn assert_rate_headers(response: &crate::common::Response, limit: &str) {
    assert_eq!(response.header("x-ratelimit-limit"), Some(limit));
    assert!(response.header("x-ratelimit-remaining").unwrap().parse::<u32>().is_ok());
    let reset: i64 = response.header("x-ratelimit-reset").unwrap().parse().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!(reset >= now && reset <= now + 61, "reset {reset} now {now}");
    assert!(response.header("ratelimit-policy").unwrap().contains(&format!("q={limit};w=60")));
    assert!(response.header("ratelimit").unwrap().contains(";r="));
}

#[tokio::test]
async fn the_101st_standard_request_in_a_minute_is_429() {
    let stack = Stack::start().await;
    let team = stack.team("Busy", false, 0).await;
    let api = stack.client(&team.key);
    for i in 0..100 {
        let response = api.get("/me").await;
        assert_eq!(response.status, 200, "request {}", i + 1);
        assert_eq!(response.header("x-ratelimit-remaining"), Some((99 - i).to_string().as_str()));
        assert_rate_headers(&response, "100");
    }
    let refused = api.get("/me").await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.body["error"], "Rate limit exceeded");
    assert_eq!(refused.body["code"], "RATE_LIMITED");
    let retry_after: i64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after));
    assert_eq!(refused.body["retryAfter"], retry_after);
    assert!(refused.body["resetAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(refused.header("x-ratelimit-remaining"), Some("0"));
    assert_rate_headers(&refused, "100");

    // Writes have their own bucket, and other teams are untouched.
    let agency = stack.team("Other", true, 100).await;
    stack.client(&agency.key).get("/me").await.expect(200);
}

#[tokio::test]
async fn classes_have_their_own_limits_and_the_key_team_pays_for_team_id() {
    let stack =
        Stack::start_with(&[("SWITCHBOARD_RATE_LIMIT_STANDARD", "5"), ("SWITCHBOARD_RATE_LIMIT_WRITE", "2")]).await;
    let agency = stack.team("Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let subteam = api.post("/agency/subteams", subteam_body("Client")).await;
    let subteam_id = subteam.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(subteam.header("x-ratelimit-limit"), Some("2"));
    api.post("/agency/subteams", subteam_body("Client 2")).await.expect(201);
    assert_eq!(api.post("/agency/subteams", subteam_body("Client 3")).await.status, 429);

    for _ in 0..3 {
        api.get(&format!("/me?teamId={subteam_id}")).await.expect(200);
    }
    api.get("/me").await.expect(200);
    api.get("/me").await.expect(200);
    let refused = api.get(&format!("/me?teamId={subteam_id}")).await;
    assert_eq!(refused.status, 429, "teamId must not give the agency a second bucket");

    let subteam_key = stack.key(&subteam_id, false).await;
    stack.client(&subteam_key).get("/me").await.expect(200);
}

async fn second_gateway(stack: &Stack, redis: &Redis, limit: &str) -> (Process, String) {
    let url = redis.url();
    let gateway = Process::start(
        &["serve", "gateway"],
        &[
            ("SWITCHBOARD_LISTEN", "127.0.0.1:0"),
            ("SWITCHBOARD_IDENTITY_URL", &stack.identity_url),
            ("SWITCHBOARD_SERVICE_TOKEN", &stack.service_token),
            ("REDIS_URL", &url),
            ("SWITCHBOARD_RATE_LIMIT_STANDARD", limit),
        ],
        "gateway listening on",
    )
    .await;
    let base = gateway.line_after("gateway listening on").unwrap();
    (gateway, base)
}

#[tokio::test]
async fn two_gateways_on_one_redis_share_the_limit() {
    let redis = Redis::start().await;
    let url = redis.url();
    let stack = Stack::start_with(&[("REDIS_URL", &url), ("SWITCHBOARD_RATE_LIMIT_STANDARD", "10")]).await;
    let (_gateway, other_base) = second_gateway(&stack, &redis, "10").await;
    let team = stack.team("Shared", false, 0).await;
    let first = stack.client(&team.key);
    let second = Api::new(&other_base, Some(&team.key));
    for _ in 0..5 {
        first.get("/me").await.expect(200);
        second.get("/me").await.expect(200);
    }
    assert_eq!(first.get("/me").await.status, 429);
    assert_eq!(second.get("/me").await.status, 429);
    let bucket = format!("switchboard:ratelimit:standard:{}", team.id);
    assert_eq!(redis.cli(&["HGET", &bucket, "tokens"]), "0");
    // The bucket goes when its window ends (its expiry is set when the window starts).
    let expires_in: i64 = redis.cli(&["PTTL", &bucket]).parse().expect("PTTL answers a number");
    assert!((1..=60_000).contains(&expires_in), "bucket expires in {expires_in} ms");
}

#[tokio::test]
async fn requests_keep_flowing_when_redis_dies_and_share_again_when_it_returns() {
    let mut redis = Redis::start().await;
    let url = redis.url();
    let stack = Stack::start_with(&[("REDIS_URL", &url)]).await;
    let team = stack.team("Resilient", false, 0).await;
    let api = stack.client(&team.key);
    api.get("/me").await.expect(200);
    let key = format!("switchboard:ratelimit:standard:{}", team.id);
    assert_eq!(redis.cli(&["HGET", &key, "tokens"]), "99");

    redis.kill();
    for _ in 0..20 {
        let response = api.get("/me").await;
        assert_eq!(response.status, 200, "{}", response.text);
        assert!(response.header("x-ratelimit-remaining").is_some());
    }

    redis.restart().await;
    let mut back = false;
    for _ in 0..50 {
        api.get("/me").await.expect(200);
        if !redis.cli(&["HGET", &key, "tokens"]).is_empty() {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(back, "the gateway did not go back to Redis");
}

#[tokio::test]
async fn a_concurrent_burst_on_two_gateways_gets_exactly_the_limit() {
    let redis = Redis::start().await;
    let url = redis.url();
    let stack = Stack::start_with(&[("REDIS_URL", &url), ("SWITCHBOARD_RATE_LIMIT_STANDARD", "30")]).await;
    let (_gateway, other_base) = second_gateway(&stack, &redis, "30").await;
    let team = stack.team("Bursty", false, 0).await;
    let clients = [stack.client(&team.key), Api::new(&other_base, Some(&team.key))];
    // 80 requests at once, half on each gateway: concurrent requests for one bucket are
    // served by batched script calls, which must grant exactly what one-by-one calls would.
    let responses = futures::future::join_all((0..80).map(|i| {
        let api = clients[i % 2].clone();
        async move { api.get("/me").await }
    }))
    .await;
    let mut remaining: Vec<u32> = responses
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| r.header("x-ratelimit-remaining").unwrap().parse().unwrap())
        .collect();
    let refused = responses.iter().filter(|r| r.status == 429).count();
    assert_eq!(
        (remaining.len(), refused),
        (30, 50),
        "statuses: {:?}",
        responses.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    remaining.sort_unstable();
    assert_eq!(remaining, (0..30).collect::<Vec<u32>>(), "each granted request saw its own remaining count");
    for response in responses.iter().filter(|r| r.status == 429) {
        assert_eq!(response.header("x-ratelimit-remaining"), Some("0"));
        assert!(response.header("retry-after").is_some());
    }
}

#[tokio::test]
async fn a_concurrent_burst_of_many_teams_gets_each_team_its_limit() {
    let redis = Redis::start().await;
    let url = redis.url();
    let stack = Stack::start_with(&[("REDIS_URL", &url), ("SWITCHBOARD_RATE_LIMIT_STANDARD", "10")]).await;
    let (_gateway, other_base) = second_gateway(&stack, &redis, "10").await;
    let mut teams = Vec::new();
    for i in 0..6 {
        teams.push(stack.team(&format!("Tenant {i}"), false, 0).await);
    }
    // 25 requests per team at once, spread over both gateways: one script call carries the
    // takes of several teams' buckets, and each team must still get exactly its own limit.
    let requests = teams.iter().flat_map(|team| {
        let clients = [stack.client(&team.key), Api::new(&other_base, Some(&team.key))];
        (0..25).map(move |i| {
            let (api, team_id) = (clients[i % 2].clone(), team.id.clone());
            async move { (team_id, api.get("/me").await) }
        })
    });
    let responses = futures::future::join_all(requests).await;
    for team in &teams {
        let answers: Vec<_> = responses.iter().filter(|(id, _)| *id == team.id).map(|(_, r)| r).collect();
        let mut remaining: Vec<u32> = answers
            .iter()
            .filter(|r| r.status == 200)
            .map(|r| r.header("x-ratelimit-remaining").unwrap().parse().unwrap())
            .collect();
        remaining.sort_unstable();
        assert_eq!(
            remaining,
            (0..10).collect::<Vec<u32>>(),
            "team {}: each granted request saw its own count",
            team.id
        );
        assert_eq!(answers.iter().filter(|r| r.status == 429).count(), 15, "team {}", team.id);
        for answer in answers.iter().filter(|r| r.status == 200) {
            assert_eq!(answer.body["data"]["team"]["id"], team.id.as_str(), "GET /me of the caller's own team");
        }
    }
}

/// Gateways keep each team's identity while its version in Redis is unchanged; every change
/// the identity service or `admin` makes gives the team a new version first, so the next
/// `GET /me` on any gateway shows it.
#[tokio::test]
async fn me_shows_a_change_at_once_on_every_gateway_sharing_redis() {
    let redis = Redis::start().await;
    let url = redis.url();
    let stack = Stack::start_with(&[("REDIS_URL", &url)]).await;
    let (_gateway, other_base) = second_gateway(&stack, &redis, "100").await;
    let agency = stack.team("Agency", true, 100).await;
    let gateways = [stack.client(&agency.key), Api::new(&other_base, Some(&agency.key))];
    let balances = || async {
        let mut seen = Vec::new();
        for api in &gateways {
            seen.push(api.get("/me").await.expect(200)["data"]["credits"]["balance"].clone());
        }
        seen
    };
    // Twice, so that the second round is answered from what the gateways keep.
    for _ in 0..2 {
        assert_eq!(balances().await, [100, 100]);
    }

    // A subteam's credits come out of the agency's balance (identity service, gateway A).
    gateways[0].post("/agency/subteams", subteam_body("Client")).await.expect(201);
    let version_key = format!("switchboard:team-version:{}", agency.id);
    assert!(!redis.cli(&["GET", &version_key]).is_empty(), "the change gave the agency a version");
    assert_eq!(balances().await, [90, 90]);
    assert_eq!(balances().await, [90, 90]);

    // An operator's grant (`admin`, straight to the identity database).
    stack.admin(&["grant-credits", "--team", &agency.id, "5"]).await;
    assert_eq!(balances().await, [95, 95]);

    // A deleted team is gone at once, though its key is still cached as valid for a moment.
    stack.admin(&["delete-team", &agency.id]).await;
    for api in &gateways {
        let gone = api.get("/me").await;
        assert_eq!(gone.status, 404, "{}", gone.text);
    }
}

/// `admin` run on the data directory of a `dev` that uses Redis announces its changes there,
/// though `REDIS_URL` is not set where `admin` runs: `dev` names its Redis in its session file.
#[tokio::test]
async fn admin_beside_dev_announces_changes_in_the_redis_dev_uses() {
    let redis = Redis::start().await;
    let url = redis.url();
    let stack = Stack::start_with(&[("REDIS_URL", &url)]).await;
    let team = stack.team("Operated", false, 10).await;
    let api = stack.client(&team.key);
    for _ in 0..2 {
        assert_eq!(api.get("/me").await.expect(200)["data"]["credits"]["balance"], 10);
    }
    let dir = stack.data_dir.path().to_str().expect("utf-8 path");
    // `admin` without the stack's Redis in its environment.
    crate::common::admin(&["--data-dir", dir], &["grant-credits", "--team", &team.id, "7"]).await;
    assert_eq!(api.get("/me").await.expect(200)["data"]["credits"]["balance"], 17);
}
