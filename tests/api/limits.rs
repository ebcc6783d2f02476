//! Rate limits stay exact: the limit per class and team, the headers, leases taken from a
//! shared Redis bucket by several gateways, bursts across gateways and teams, and Redis going
//! away and coming back; a change to a team reaches every gateway at once, a revoked key within
//! the cache time.

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
    second_gateway_with(stack, redis, &[("SWITCHBOARD_RATE_LIMIT_STANDARD", limit)]).await
}

async fn second_gateway_with(stack: &Stack, redis: &Redis, settings: &[(&str, &str)]) -> (Process, String) {
    let url = redis.url();
    let mut env = vec![
        ("SWITCHBOARD_LISTEN", "127.0.0.1:0"),
        ("SWITCHBOARD_IDENTITY_URL", stack.identity_url.as_str()),
        ("SWITCHBOARD_SERVICE_TOKEN", stack.service_token.as_str()),
        ("REDIS_URL", url.as_str()),
    ];
    env.extend_from_slice(settings);
    let gateway = Process::start(&["serve", "gateway"], &env, "gateway listening on").await;
    let base = gateway.line_after("gateway listening on").unwrap();
    (gateway, base)
}

/// Waits until `count` gateways subscribe to team versions: only then do they take leases.
async fn await_subscribers(redis: &Redis, count: usize) {
    let started = std::time::Instant::now();
    loop {
        let answer = redis.cli(&["PUBSUB", "NUMSUB", "switchboard:team-versions"]);
        let subscribed: usize = answer.lines().nth(1).and_then(|n| n.trim().parse().ok()).unwrap_or(0);
        if subscribed >= count {
            // The gateway marks itself subscribed when Redis's confirmation reaches it, just
            // after Redis counts it; a request in between only takes no lease (checked below).
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{count} gateways did not subscribe to team versions in 15 s: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Redis and a stack on it (with `env` besides), its gateway subscribed to team versions.
async fn leasing_stack(env: &[(&str, &str)]) -> (Redis, Stack) {
    let redis = Redis::start().await;
    let url = redis.url();
    let mut settings = vec![("REDIS_URL", url.as_str())];
    settings.extend_from_slice(env);
    let stack = Stack::start_with(&settings).await;
    await_subscribers(&redis, 1).await;
    (redis, stack)
}

/// The lease a replica takes when `left` tokens stay in the bucket after its own (lease.rs).
fn lease_size(left: u32) -> u32 {
    let lease = (left / 8).min(256);
    if lease < 4 { 0 } else { lease }
}

/// Tokens left in a bucket, read from Redis.
fn bucket_tokens(redis: &Redis, team_id: &str) -> u32 {
    let bucket = format!("switchboard:ratelimit:standard:{team_id}");
    redis.cli(&["HGET", &bucket, "tokens"]).parse().expect("the bucket exists")
}

/// A replica takes tokens ahead of need in leases that shrink as the bucket empties, to none
/// once fewer than 32 would stay behind; the headers still count down one by one.
#[tokio::test]
async fn leases_shrink_as_the_bucket_empties_and_the_headers_stay_exact() {
    let (redis, stack) = leasing_stack(&[]).await;
    let team = stack.team("Leasing", false, 0).await;
    let api = stack.client(&team.key);

    let (mut before, mut held, mut leases) = (100_u32, 0_u32, Vec::new());
    for i in 0..100_u32 {
        let response = api.get("/me").await;
        response.expect(200);
        assert_eq!(response.header("x-ratelimit-remaining"), Some((99 - i).to_string().as_str()));
        let now = bucket_tokens(&redis, &team.id);
        if now == before {
            assert!(held > 0, "request {}: served without a token from Redis or a lease", i + 1);
            held -= 1;
            continue;
        }
        assert_eq!(held, 0, "request {}: went to Redis while holding a lease", i + 1);
        let lease = before - now - 1;
        // The first request may reach the gateway before it knows it is subscribed: no lease.
        let expected = lease_size(before - 1);
        assert!(
            lease == expected || (i == 0 && lease == 0),
            "request {}: a lease of {lease} from {before}, not {expected}",
            i + 1
        );
        if lease > 0 {
            leases.push(lease);
        }
        (before, held) = (now, lease);
    }
    assert!(leases.len() >= 7 && leases.windows(2).all(|pair| pair[1] <= pair[0]), "leases {leases:?}");
    assert_eq!(*leases.last().unwrap(), 4, "the smallest lease: {leases:?}");
    assert_eq!(bucket_tokens(&redis, &team.id), 0);
    let refused = api.get("/me").await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("x-ratelimit-remaining"), Some("0"));
}

/// The spec's search and write limits hold to the request with leases on: writes (60) are
/// leased from while 32 or more are left, searches (30) never.
#[tokio::test]
async fn searches_and_writes_answer_exactly_at_30_and_60_a_minute() {
    let (_redis, stack) = leasing_stack(&[]).await;
    let team = stack.team("Exact", false, 100).await;
    let api = stack.client(&team.key);

    let knowledgebase = crate::knowledgebase::create_knowledgebase(&api, "Support").await;
    let base = format!("/knowledgebase/{}", knowledgebase["id"].as_str().unwrap());
    for i in 0..59 {
        let created =
            api.post("/contacts", serde_json::json!({ "number": format!("(415) 555-{:04}", 1000 + i) })).await;
        created.expect(201);
        assert_eq!(created.header("x-ratelimit-limit"), Some("60"));
        assert_eq!(created.header("x-ratelimit-remaining"), Some((58 - i).to_string().as_str()), "write {}", i + 2);
    }
    let refused = api.post("/contacts", serde_json::json!({ "number": "(415) 555-9999" })).await;
    assert_eq!(refused.status, 429, "the 61st write");

    for i in 0..30 {
        let found = api.get(&format!("{base}/search?query=hours")).await;
        found.expect(200);
        assert_eq!(found.header("x-ratelimit-limit"), Some("30"));
        assert_eq!(found.header("x-ratelimit-remaining"), Some((29 - i).to_string().as_str()), "search {}", i + 1);
    }
    assert_eq!(api.get(&format!("{base}/search?query=hours")).await.status, 429, "the 31st search");
}

/// What a replica holds when it dies is lost to that window, never more, and the next window
/// is whole.
#[tokio::test]
async fn a_replica_that_dies_holding_a_lease_strands_its_tokens_for_that_window_only() {
    let redis = Redis::start().await;
    let window = ("SWITCHBOARD_RATE_LIMIT_WINDOW_MS", "8000");
    let stack = Stack::start_with(&[("REDIS_URL", &redis.url()), window]).await;
    let (mut doomed, doomed_base) = second_gateway_with(&stack, &redis, &[window]).await;
    await_subscribers(&redis, 2).await;
    let team = stack.team("Stranded", false, 0).await;

    let first = Api::new(&doomed_base, Some(&team.key)).get("/me").await;
    first.expect(200);
    assert_eq!(first.header("ratelimit-policy"), Some("\"standard\";q=100;w=8"));
    assert_eq!(bucket_tokens(&redis, &team.id), 100 - 1 - lease_size(99), "the replica took a lease");
    doomed.child.kill().await.expect("kill the replica");

    let survivor = stack.client(&team.key);
    let admitted = admitted_until_refused(&survivor, 100).await;
    assert_eq!(admitted, 99 - lease_size(99), "the dead replica's lease is gone for this window, nothing more");

    // The window ends (8 s after the first request): the bucket is whole again.
    let started = std::time::Instant::now();
    while survivor.get("/me").await.status == 429 {
        assert!(started.elapsed() < Duration::from_secs(20), "the 8 s window did not end within 20 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(1 + admitted_until_refused(&survivor, 100).await, 100, "a whole bucket in the next window");
}

/// The `X-RateLimit-Remaining` of the admitted answers, in ascending order.
fn granted_remaining<'a>(responses: impl IntoIterator<Item = &'a crate::common::Response>) -> Vec<u32> {
    let mut remaining: Vec<u32> = responses
        .into_iter()
        .filter(|r| r.status == 200)
        .map(|r| r.header("x-ratelimit-remaining").unwrap().parse().unwrap())
        .collect();
    remaining.sort_unstable();
    remaining
}

/// Requests admitted before the first 429 (at most `most` + 1 asked).
async fn admitted_until_refused(api: &Api, most: u32) -> u32 {
    for admitted in 0..=most {
        let response = api.get("/me").await;
        if response.status == 429 {
            return admitted;
        }
        response.expect(200);
    }
    panic!("more than {most} requests admitted");
}

/// Two replicas leasing from one bucket under concurrent load: the limit is never exceeded,
/// every token is used (each replica refuses only with an empty lease), and each remaining
/// count is given once.
#[tokio::test]
async fn two_leasing_gateways_under_load_admit_exactly_the_limit() {
    use futures::StreamExt;

    let redis = Redis::start().await;
    let limit = ("SWITCHBOARD_RATE_LIMIT_STANDARD", "1000");
    let stack = Stack::start_with(&[("REDIS_URL", &redis.url()), limit]).await;
    let (_gateway, other_base) = second_gateway_with(&stack, &redis, &[limit]).await;
    await_subscribers(&redis, 2).await;
    let team = stack.team("Loaded", false, 0).await;
    let clients = [stack.client(&team.key), Api::new(&other_base, Some(&team.key))];
    let responses: Vec<_> = futures::stream::iter(0..2_400)
        .map(|i| {
            let api = clients[i % 2].clone();
            async move { api.get("/me").await }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let remaining = granted_remaining(&responses);
    assert!(responses.iter().all(|r| r.status == 200 || r.status == 429));
    assert_eq!(remaining.len(), 1000, "admitted");
    assert_eq!(remaining, (0..1000).collect::<Vec<u32>>(), "each remaining count given once");
    assert_eq!(bucket_tokens(&redis, &team.id), 0);
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
    let (mut redis, stack) = leasing_stack(&[]).await;
    let team = stack.team("Resilient", false, 0).await;
    let api = stack.client(&team.key);
    api.get("/me").await.expect(200);
    let key = format!("switchboard:ratelimit:standard:{}", team.id);
    // The request's token and the gateway's lease (or only the token, if the request came
    // before the gateway knew itself subscribed).
    let tokens = redis.cli(&["HGET", &key, "tokens"]);
    assert!(tokens == (99 - lease_size(99)).to_string() || tokens == "99", "{tokens}");

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
    let remaining = granted_remaining(&responses);
    let refused = responses.iter().filter(|r| r.status == 429).count();
    assert_eq!(
        (remaining.len(), refused),
        (30, 50),
        "statuses: {:?}",
        responses.iter().map(|r| r.status).collect::<Vec<_>>()
    );
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
        assert_eq!(
            granted_remaining(answers.iter().copied()),
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

/// With leases, a gateway admits most requests without asking Redis, so it learns new team
/// versions from the subscription: every change through one gateway shows on the next
/// request through the other, each time.
#[tokio::test]
async fn every_change_shows_at_once_through_the_other_leasing_gateway() {
    let redis = Redis::start().await;
    let stack = Stack::start_with(&[("REDIS_URL", &redis.url())]).await;
    let (_gateway, other_base) = second_gateway(&stack, &redis, "100").await;
    await_subscribers(&redis, 2).await;
    let agency = stack.team("Agency", true, 1_000).await;
    let gateways = [stack.client(&agency.key), Api::new(&other_base, Some(&agency.key))];
    for api in &gateways {
        for _ in 0..3 {
            assert_eq!(api.get("/me").await.expect(200)["data"]["credits"]["balance"], 1_000);
        }
    }
    for round in 0..20_i64 {
        let (changer, reader) = (&gateways[(round % 2) as usize], &gateways[1 - (round % 2) as usize]);
        let mut body = subteam_body(&format!("Client {round}"));
        body["email"] = format!("client{round}@client.example").into();
        changer.post("/agency/subteams", body).await.expect(201);
        let balance = 1_000 - 10 * (round + 1);
        assert_eq!(reader.get("/me").await.expect(200)["data"]["credits"]["balance"], balance, "round {round}");
        assert_eq!(changer.get("/me").await.expect(200)["data"]["credits"]["balance"], balance, "round {round}");
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

/// A gateway that follows team versions keeps a busy key's lookup past the auth cache time
/// while the key's team keeps its version; revoking the key gives the team a new version, so
/// the key is still refused within that time, through the API and through `admin`.
#[tokio::test]
async fn keys_trusted_by_team_version_are_refused_within_the_cache_time_once_revoked() {
    let (_redis, stack) = leasing_stack(&[("SWITCHBOARD_AUTH_CACHE_TTL_MS", "300")]).await;
    let team = stack.team("Revoking", false, 0).await;
    let owner = stack.client(&team.key);
    for revoke_with_admin in [false, true] {
        let made = owner.post("/api-keys", serde_json::json!({ "name": "busy" })).await.expect(201).clone();
        let busy = stack.client(made["data"]["key"].as_str().expect("the secret"));
        // Several cache times of use: the lookup is kept by its team's version, and still right.
        let until = std::time::Instant::now() + Duration::from_millis(1_200);
        while std::time::Instant::now() < until {
            assert_eq!(busy.get("/me").await.expect(200)["data"]["apiKey"]["id"], made["data"]["id"]);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let key_id = made["data"]["id"].as_str().expect("an id");
        if revoke_with_admin {
            stack.admin(&["revoke-key", key_id]).await;
        } else {
            owner.delete(&format!("/api-keys/{key_id}")).await.expect(200);
        }
        let revoked = std::time::Instant::now();
        let refused = async {
            while busy.get("/me").await.status != 401 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), refused).await.expect("the revoked key was refused");
        // The cache time is 300 ms; the lookup kept by version lives up to 30 s.
        assert!(revoked.elapsed() < Duration::from_secs(2), "refused after {:?}", revoked.elapsed());
    }
}

#[tokio::test]
async fn a_monthly_top_up_shows_in_the_agencys_me_at_once_with_redis() {
    // With Redis, gateways keep a team's identity while its version holds (up to 30 s, never
    // past its billing period's end): the top-up must give the agency a new version, or its
    // `/me` shows the balance before the top-up for seconds (10 s and more, when tried).
    let settings = [("SWITCHBOARD_BILLING_PERIOD", "6s"), ("SWITCHBOARD_RATE_LIMIT_STANDARD", "100000")];
    let (_redis, stack) = leasing_stack(&settings).await;
    let agency = stack.team("Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let created = api.post("/agency/subteams", subteam_body("Client")).await.expect(201)["data"].clone();
    let id = created["id"].as_str().expect("an id").to_owned();
    api.put(&format!("/agency/subteams/{id}"), serde_json::json!({ "totalMonthlyCredits": 50 })).await.expect(200);
    let me_balance = |api: &Api| {
        let api = api.clone();
        async move { api.get("/me").await.expect(200)["data"]["credits"]["balance"].as_i64().expect("a balance") }
    };
    assert_eq!(me_balance(&api).await, 90);

    // The subteam's balance is read from the identity service on every request.
    let topped = async {
        loop {
            let client = api.get(&format!("/agency/subteams/{id}")).await.expect(200)["data"]["credits"]["balance"]
                .as_i64()
                .expect("a balance");
            if client == 50 {
                return;
            }
            let agency_balance = me_balance(&api).await;
            if agency_balance != 90 {
                // The top-up landed between the two reads: then the subteam has it too.
                assert_eq!(agency_balance, 50, "the agency's /me after the top-up");
                let client = api.get(&format!("/agency/subteams/{id}")).await.expect(200)["data"]["credits"]["balance"]
                    .as_i64()
                    .expect("a balance");
                assert_eq!(client, 50, "the agency's /me showed the top-up before the subteam had it");
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), topped).await.expect("the client topped up to 50 within 20 s");
    let seen = std::time::Instant::now();
    let shown = async {
        while me_balance(&api).await != 50 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), shown).await.expect("the agency's /me shows 50 within 10 s");
    assert!(seen.elapsed() < Duration::from_secs(2), "the agency's /me showed the top-up after {:?}", seen.elapsed());
}
