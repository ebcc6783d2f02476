//! How the API fails: JSON for unknown routes and wrong methods, 400/413/415 for bad bodies,
//! every invalid field listed at once, length edges, a 503 rather than a hang when a service is
//! down, and the client's request id echoed.

use serde_json::json;

use crate::auth::subteam_body;
use crate::common::{Api, Process, Stack, free_port};

#[tokio::test]
async fn unknown_routes_and_wrong_methods_answer_json() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 0).await;
    let api = stack.client(&team.key);
    let missing = api.get("/nothing/here").await;
    assert_eq!(missing.error_code(404), "NOT_FOUND");
    let wrong = api.delete("/me").await;
    assert_eq!(wrong.error_code(405), "METHOD_NOT_ALLOWED");
    // PATCH: a person changes their own name (issue 40).
    assert_eq!(wrong.header("allow"), Some("GET, PATCH"));
    let also_wrong = api.raw("PATCH", "/agency/subteams", None, Vec::new()).await;
    assert_eq!(also_wrong.header("allow"), Some("GET, POST"));
    assert!(also_wrong.header("x-request-id").is_some());
}

#[tokio::test]
async fn bad_bodies_get_400_415_and_413() {
    let stack = Stack::start_with(&[("SWITCHBOARD_MAX_BODY_BYTES", "2000")]).await;
    let agency = stack.team("Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let json = Some("application/json");

    let malformed = api.raw("POST", "/agency/subteams", json, b"{\"firstName\": ".to_vec()).await;
    assert_eq!(malformed.error_code(400), "INVALID_JSON");
    let not_object = api.raw("POST", "/agency/subteams", json, b"[1,2,3]".to_vec()).await;
    assert_eq!(not_object.error_code(400), "INVALID_JSON");
    let empty = api.raw("POST", "/agency/subteams", json, Vec::new()).await;
    assert_eq!(empty.error_code(400), "INVALID_JSON");
    let form = api.raw("POST", "/agency/subteams", Some("application/x-www-form-urlencoded"), b"a=b".to_vec()).await;
    assert_eq!(form.error_code(415), "UNSUPPORTED_MEDIA_TYPE");
    let untyped = api.raw("POST", "/agency/subteams", None, b"{}".to_vec()).await;
    assert_eq!(untyped.error_code(415), "UNSUPPORTED_MEDIA_TYPE");
    let mut huge = subteam_body("Client");
    huge["padding"] = json!("x".repeat(5_000));
    let too_large = api.post("/agency/subteams", huge).await;
    assert_eq!(too_large.error_code(413), "PAYLOAD_TOO_LARGE");

    // Nothing half-written stayed behind.
    assert_eq!(api.get("/agency/subteams").await.body["pagination"]["totalCount"], 0);
    assert_eq!(api.get("/me").await.body["data"]["credits"]["balance"], 100);
}

#[tokio::test]
async fn validation_failures_list_every_field() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let response = api
        .post(
            "/agency/subteams",
            json!({
                "firstName": "",
                "lastName": 7,
                "teamName": "x".repeat(51),
                "email": "nope",
                "totalMonthlyCredits": -1,
                "accessConfig": { "users": "yes", "bogus": true },
            }),
        )
        .await;
    assert_eq!(response.error_code(400), "VALIDATION_ERROR");
    assert_eq!(response.body["error"], "Validation error");
    // Top-level fields in the order of the request's schema; within `accessConfig`, in the
    // order of the client's object.
    assert_eq!(
        response.fields(),
        [
            "firstName",
            "lastName",
            "teamName",
            "email",
            "totalMonthlyCredits",
            "accessConfig.users",
            "accessConfig.bogus"
        ]
    );
    for detail in response.body["details"].as_array().unwrap() {
        assert!(detail["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let bad_page = api.get("/agency/subteams?page=0&limit=101&sortOrder=up").await;
    assert_eq!(bad_page.error_code(400), "VALIDATION_ERROR");
    assert_eq!(bad_page.fields(), ["page", "limit", "sortOrder"]);
    // A query that is not percent-encoded UTF-8 is not read as some other text.
    let mangled = api.get("/agency/subteams?page=%zz&limit=%ff%fe").await;
    assert_eq!(mangled.error_code(400), "VALIDATION_ERROR");
    assert_eq!(mangled.fields(), ["page", "limit"]);
}

#[tokio::test]
async fn exactly_fifty_characters_is_accepted_and_fifty_one_is_not() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let mut body = subteam_body(&"é".repeat(50));
    body["firstName"] = json!("a");
    api.post("/agency/subteams", body.clone()).await.expect(201);
    body["teamName"] = json!("é".repeat(51));
    assert_eq!(api.post("/agency/subteams", body).await.fields(), ["teamName"]);
}

#[tokio::test]
async fn a_service_that_is_down_is_a_503_not_a_hang() {
    let closed = format!("http://127.0.0.1:{}", free_port());
    let gateway = Process::start(
        &["serve", "gateway"],
        &[
            ("SWITCHBOARD_LISTEN", "127.0.0.1:0"),
            ("SWITCHBOARD_IDENTITY_URL", &closed),
            ("SWITCHBOARD_REQUEST_TIMEOUT_MS", "3000"),
            ("SWITCHBOARD_TRUSTED_NETWORK", "true"),
        ],
        "gateway listening on",
    )
    .await;
    let base = gateway.line_after("gateway listening on").unwrap();
    let response = Api::new(&base, Some("ew_anything")).get("/me").await;
    assert_eq!(response.error_code(503), "SERVICE_UNAVAILABLE");
    assert!(response.header("x-request-id").is_some());
}

#[tokio::test]
async fn a_client_request_id_is_echoed() {
    let stack = Stack::start().await;
    let api = stack.anonymous();
    let response = api.send(api.request(reqwest::Method::GET, "/me").header("X-Request-Id", "trace-me-123")).await;
    assert_eq!(response.header("x-request-id"), Some("trace-me-123"));
}
