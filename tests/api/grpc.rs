//! The services' gRPC ports as an internal consumer (or an intruder) meets them: the service
//! token is required, health is open for probes, reflection lists what each port serves.

use std::time::Duration;

use switchboard_proto::v1::ListUsersRequest;
use switchboard_proto::v1::identity_service_client::IdentityServiceClient;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1alpha::ServerReflectionRequest;
use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;

use crate::common::{BIN, Stack};

async fn connect(url: &str) -> Channel {
    let endpoint = Channel::from_shared(url.to_owned()).unwrap().timeout(Duration::from_secs(10));
    tokio::time::timeout(Duration::from_secs(10), endpoint.connect())
        .await
        .unwrap_or_else(|_| panic!("connecting to {url} timed out"))
        .unwrap_or_else(|error| panic!("connecting to {url}: {error}"))
}

fn with_token<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

#[tokio::test]
async fn a_call_without_the_service_token_is_unauthenticated_and_health_stays_open() {
    let stack = Stack::start().await;
    assert!(stack.service_token.len() >= 16, "dev prints its token");
    let channel = connect(&stack.identity_url).await;
    let mut identity = IdentityServiceClient::new(channel.clone());
    let team_id = uuid::Uuid::new_v4().to_string();

    let anonymous = identity.list_users(ListUsersRequest { team_id: team_id.clone() }).await.unwrap_err();
    assert_eq!(anonymous.code(), tonic::Code::Unauthenticated, "{anonymous:?}");
    let wrong = identity
        .list_users(with_token(ListUsersRequest { team_id: team_id.clone() }, "not-the-service-token-at-all"))
        .await
        .unwrap_err();
    assert_eq!(wrong.code(), tonic::Code::Unauthenticated);
    let signed = identity.list_users(with_token(ListUsersRequest { team_id }, &stack.service_token)).await;
    assert!(signed.is_ok(), "{signed:?}");

    let health = HealthClient::new(channel)
        .check(HealthCheckRequest { service: "switchboard.v1.IdentityService".to_owned() })
        .await
        .unwrap();
    assert_eq!(health.into_inner().status, 1, "SERVING, without a token");

    // `switchboard health`, the chart's probe on clusters without gRPC probes (issue 56), asks
    // the same: it succeeds on a serving port and fails, saying why, on a closed one.
    let address = stack.identity_url.trim_start_matches("http://").to_owned();
    let probe = |address: String| async move {
        let run = tokio::process::Command::new(BIN).args(["health", &address]).kill_on_drop(true).output();
        tokio::time::timeout(Duration::from_secs(10), run).await.expect("the probe ended within 10 s").unwrap()
    };
    let serving = probe(address).await;
    assert!(serving.status.success(), "{}", String::from_utf8_lossy(&serving.stderr));
    let closed = probe(format!("127.0.0.1:{}", crate::common::free_port())).await;
    assert!(!closed.status.success());
    assert!(String::from_utf8_lossy(&closed.stderr).contains("connecting to 127.0.0.1:"), "{closed:?}");
}

async fn listed_services(url: &str, token: &str) -> Vec<String> {
    let mut reflection = ServerReflectionClient::new(connect(url).await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let stream = futures::stream::iter([request]);
    let mut answers = reflection.server_reflection_info(with_token(stream, token)).await.unwrap().into_inner();
    let answer = tokio::time::timeout(Duration::from_secs(10), answers.message())
        .await
        .expect("reflection answered in time")
        .unwrap()
        .expect("one answer");
    match answer.message_response {
        Some(MessageResponse::ListServicesResponse(list)) => list.service.into_iter().map(|s| s.name).collect(),
        other => panic!("unexpected reflection answer {other:?}"),
    }
}

#[tokio::test]
async fn reflection_lists_only_what_each_port_serves() {
    let stack = Stack::start().await;
    let mut identity = listed_services(&stack.identity_url, &stack.service_token).await;
    identity.sort();
    assert_eq!(
        identity,
        [
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
            "switchboard.v1.IdentityService",
        ]
    );
    let agents_url = stack.process.line_after("agents gRPC:").unwrap();
    let agents = listed_services(&agents_url, &stack.service_token).await;
    assert!(agents.contains(&"switchboard.v1.AgentsService".to_owned()), "{agents:?}");
    assert!(!agents.contains(&"switchboard.v1.IdentityService".to_owned()), "{agents:?}");
}

#[tokio::test]
async fn serve_refuses_to_start_without_a_token_unless_the_network_is_trusted() {
    let data_dir = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new(BIN)
        .args(["serve", "identity"])
        .env("SWITCHBOARD_DATA_DIR", data_dir.path())
        .env("SWITCHBOARD_GRPC_LISTEN", "127.0.0.1:0")
        .env_remove("SWITCHBOARD_SERVICE_TOKEN")
        .env_remove("SWITCHBOARD_TRUSTED_NETWORK")
        .env_remove("DATABASE_URL")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(30), run).await.expect("serve exits at once").unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("SWITCHBOARD_SERVICE_TOKEN"), "{stderr}");
}

/// The rules of the platform hold for an internal consumer that calls the services directly:
/// a search is charged, a linked knowledge base must exist, a deleted one is unlinked, and a
/// subteam gets the identity service's defaults.
#[tokio::test]
async fn internal_callers_meet_the_same_rules_as_rest_clients() {
    use switchboard_proto::v1::agents_service_client::AgentsServiceClient;
    use switchboard_proto::v1::knowledgebase_service_client::KnowledgebaseServiceClient;
    use switchboard_proto::v1::{
        AccessFlags, CreateAgentRequest, CreateSubteamRequest, GetAgentRequest, GetBalanceRequest, NewUser,
        SearchRequest,
    };

    let stack = Stack::start().await;
    let token = stack.service_token.clone();
    let team = stack.team("Internal", true, 5).await;
    let api = stack.client(&team.key);
    let kb = api.post("/knowledgebase", serde_json::json!({ "name": "Support" })).await.expect(201)["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    api.post(
        &format!("/knowledgebase/{kb}/references"),
        serde_json::json!({ "question": "Do you ship abroad?", "answer": "Yes, to 30 countries." }),
    )
    .await
    .expect(201);

    let knowledgebase_url = stack.process.line_after("knowledgebase gRPC:").unwrap();
    let agents_url = stack.process.line_after("agents gRPC:").unwrap();
    let mut knowledgebases = KnowledgebaseServiceClient::new(connect(&knowledgebase_url).await);
    let mut agents = AgentsServiceClient::new(connect(&agents_url).await);
    let mut identity = IdentityServiceClient::new(connect(&stack.identity_url).await);
    let balance = |identity: &mut IdentityServiceClient<Channel>| {
        let request = with_token(GetBalanceRequest { team_id: team.id.clone() }, &token);
        let mut identity = identity.clone();
        async move { identity.get_balance(request).await.unwrap().into_inner().balance }
    };

    // A search through gRPC costs a credit like one through the gateway.
    let search = SearchRequest {
        team_id: team.id.clone(),
        knowledgebase_id: kb.clone(),
        query: "international delivery".to_owned(),
        limit: 3,
        threshold: 0.1,
    };
    let found = knowledgebases.search(with_token(search, &token)).await.unwrap().into_inner();
    assert_eq!(found.credits_used, 1);
    assert_eq!(found.hits[0].reference.as_ref().unwrap().question, "Do you ship abroad?");
    assert_eq!(balance(&mut identity).await, 4);

    // An agent cannot be linked to a knowledge base the team does not have.
    let unknown = CreateAgentRequest {
        team_id: team.id.clone(),
        name: "Desk".to_owned(),
        r#type: 2,
        knowledgebase_id: Some(uuid::Uuid::new_v4().to_string()),
        ..Default::default()
    };
    let refused = agents.create_agent(with_token(unknown, &token)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::NotFound, "{refused:?}");

    // Deleting the knowledge base unlinks its agents in the agents service itself.
    let linked = CreateAgentRequest {
        team_id: team.id.clone(),
        name: "Desk".to_owned(),
        r#type: 2,
        knowledgebase_id: Some(kb.clone()),
        ..Default::default()
    };
    let agent = agents.create_agent(with_token(linked, &token)).await.unwrap().into_inner();
    assert_eq!(agent.knowledgebase_id.as_deref(), Some(kb.as_str()));
    api.delete(&format!("/knowledgebase/{kb}")).await.expect(200);
    let unlinked = async {
        loop {
            let request = GetAgentRequest { team_id: team.id.clone(), agent_id: agent.id.clone() };
            let current = agents.get_agent(with_token(request, &token)).await.unwrap().into_inner();
            if current.knowledgebase_id.is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), unlinked).await.expect("the unlink job ran within 20 s");

    // A subteam created without credits or flags gets the identity service's defaults.
    stack.admin(&["grant-credits", "--team", &team.id, "2000"]).await;
    let subteam = CreateSubteamRequest {
        agency_team_id: team.id.clone(),
        team_name: "Client".to_owned(),
        user: Some(NewUser {
            first_name: "Grace".to_owned(),
            last_name: "Hopper".to_owned(),
            email: "grace@client.example".to_owned(),
            role: String::new(),
        }),
        total_monthly_credits: None,
        link_base: String::new(),
        access: Some(AccessFlags { users: Some(false), ..Default::default() }),
    };
    let created = identity.create_subteam(with_token(subteam, &token)).await.unwrap().into_inner();
    let created_team = created.team.unwrap();
    assert_eq!(created_team.monthly_credits, 1000);
    let access = created_team.access.unwrap();
    assert!(!access.users && access.instructions && access.knowledge_base);
    assert_eq!(created.users[0].role, "owner");
}

/// An error every gRPC client must be able to read: the call, and what its status says.
struct ErrorCase {
    component: &'static str,
    method: &'static str,
    request: serde_json::Value,
    /// The gRPC status code, as `google.rpc.Code` numbers it.
    code: i64,
    /// `ErrorInfo.reason`: the public error code.
    reason: &'static str,
    /// A field `BadRequest` must name.
    field: Option<&'static str>,
    /// Whether a `RetryInfo` must come with it.
    retry: bool,
}

impl ErrorCase {
    /// Checks the decoded `google.rpc.Status` (`{code, message, details: [{"@type", ...}]}`)
    /// that `client` got.
    fn check(&self, client: &str, status: &serde_json::Value) {
        let at = format!("{client}, {} {}: {status}", self.component, self.method);
        assert_eq!(status["code"].as_i64(), Some(self.code), "{at}");
        assert!(!status["message"].as_str().unwrap_or_default().is_empty(), "{at}");
        let details = status["details"].as_array().unwrap_or_else(|| panic!("no details: {at}"));
        let detail = |kind: &str| details.iter().find(|d| d["@type"].as_str().is_some_and(|t| t.ends_with(kind)));
        let info = detail("google.rpc.ErrorInfo").unwrap_or_else(|| panic!("no ErrorInfo: {at}"));
        assert_eq!(
            (info["reason"].as_str(), info["domain"].as_str()),
            (Some(self.reason), Some("switchboard")),
            "{at}"
        );
        assert!(!info["metadata"]["message"].as_str().unwrap_or_default().is_empty(), "{at}");
        if let Some(field) = self.field {
            let violations = detail("google.rpc.BadRequest").unwrap_or_else(|| panic!("no BadRequest: {at}"));
            let fields: Vec<&str> =
                violations["fieldViolations"].as_array().unwrap().iter().filter_map(|v| v["field"].as_str()).collect();
            assert!(fields.contains(&field), "{field} not among {fields:?}: {at}");
        }
        if self.retry {
            let retry = detail("google.rpc.RetryInfo").unwrap_or_else(|| panic!("no RetryInfo: {at}"));
            // JSON's Duration: "86399.5s".
            let seconds: f64 = retry["retryDelay"].as_str().unwrap().trim_end_matches('s').parse().unwrap();
            assert!((86_000.0..=86_400.0).contains(&seconds), "a day's wait: {at}");
        } else {
            assert!(detail("google.rpc.RetryInfo").is_none(), "{at}");
        }
    }
}

/// `grpcurl` (a Go client) and Python's `grpcio` read every kind of error each service returns
/// from the standard `google.rpc.Status` details: the code, `ErrorInfo` with the public error
/// code, the invalid field in `BadRequest`, and `RetryInfo` for a refused retry.
#[tokio::test]
async fn grpcurl_and_grpcio_read_every_error_from_the_standard_status() {
    use serde_json::json;

    let stack = Stack::start().await;
    let team = stack.team("Outside clients", false, 10).await;
    let api = stack.client(&team.key);
    let unknown = uuid::Uuid::new_v4().to_string();

    // A webpage refreshed once (its scrapes fail fast: loopback is refused): another refresh
    // within 24 hours is refused with the time it is allowed again.
    let kb = api.post("/knowledgebase", json!({ "name": "Support" })).await.expect(201)["data"]["id"].clone();
    let kb = kb.as_str().unwrap().to_owned();
    let pages = format!("/knowledgebase/{kb}/webpages");
    let page = api.post(&pages, json!({ "name": "FAQ", "url": "http://127.0.0.1:9/faq" })).await;
    let page = page.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    let settled = |path: String| {
        let api = api.clone();
        async move {
            let wait = async {
                loop {
                    let status = api.get(&path).await.body["data"]["status"].clone();
                    if status == "failed" {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            };
            tokio::time::timeout(Duration::from_secs(30), wait).await.expect("the scrape failed within 30 s");
        }
    };
    settled(format!("{pages}/{page}")).await;
    api.raw("POST", &format!("{pages}/{page}/refresh"), None, Vec::new()).await.expect(200);
    settled(format!("{pages}/{page}")).await;

    let (not_found, invalid, exhausted) = (5, 3, 8);
    let case = |component, method, request, code, reason, field| ErrorCase {
        component,
        method,
        request,
        code,
        reason,
        field,
        retry: false,
    };
    let team_id = team.id.as_str();
    let cases = [
        case(
            "identity",
            "switchboard.v1.IdentityService/GetTeam",
            json!({ "teamId": unknown }),
            not_found,
            "NOT_FOUND",
            None,
        ),
        case(
            "identity",
            "switchboard.v1.IdentityService/CreateTeam",
            json!({ "name": "" }),
            invalid,
            "VALIDATION_ERROR",
            Some("name"),
        ),
        case(
            "agents",
            "switchboard.v1.AgentsService/GetAgent",
            json!({ "teamId": team_id, "agentId": unknown }),
            not_found,
            "NOT_FOUND",
            None,
        ),
        case(
            "agents",
            "switchboard.v1.AgentsService/CreateAgent",
            json!({ "teamId": team_id, "name": "", "type": "AGENT_TYPE_PHONE" }),
            invalid,
            "VALIDATION_ERROR",
            Some("name"),
        ),
        case(
            "knowledgebase",
            "switchboard.v1.KnowledgebaseService/GetKnowledgebase",
            json!({ "teamId": team_id, "knowledgebaseId": unknown }),
            not_found,
            "NOT_FOUND",
            None,
        ),
        case(
            "knowledgebase",
            "switchboard.v1.KnowledgebaseService/CreateReference",
            json!({ "teamId": team_id, "knowledgebaseId": kb, "question": "", "answer": "Yes." }),
            invalid,
            "VALIDATION_ERROR",
            Some("question"),
        ),
        ErrorCase {
            retry: true,
            ..case(
                "knowledgebase",
                "switchboard.v1.KnowledgebaseService/RefreshWebpage",
                json!({ "teamId": team_id, "knowledgebaseId": kb, "sourceId": page }),
                exhausted,
                "RATE_LIMITED",
                None,
            )
        },
        case(
            "conversations",
            "switchboard.v1.ConversationsService/GetCall",
            json!({ "teamId": team_id, "callId": unknown }),
            not_found,
            "NOT_FOUND",
            None,
        ),
        case(
            "conversations",
            "switchboard.v1.ConversationIngest/UpsertCall",
            json!({ "teamId": team_id, "externalId": "c-1", "from": "not a number", "to": "+14155552671", "direction": "INCOMING", "status": "ringing", "startedAt": "2026-03-01T10:00:00Z" }),
            invalid,
            "VALIDATION_ERROR",
            Some("from"),
        ),
        case(
            "crm",
            "switchboard.v1.CrmService/GetContact",
            json!({ "teamId": team_id, "contactId": unknown }),
            not_found,
            "NOT_FOUND",
            None,
        ),
        case(
            "crm",
            "switchboard.v1.CrmService/CreateContact",
            json!({ "teamId": team_id, "contact": { "number": "12" }, "actor": "test" }),
            invalid,
            "VALIDATION_ERROR",
            Some("number"),
        ),
        case(
            "webhooks",
            "switchboard.v1.WebhooksService/GetWebhook",
            json!({ "teamId": team_id, "webhookId": unknown }),
            not_found,
            "NOT_FOUND",
            None,
        ),
        case(
            "webhooks",
            "switchboard.v1.WebhooksService/CreateWebhook",
            json!({ "teamId": team_id, "url": "ftp://hooks.example.com/x", "events": ["contact.created"] }),
            invalid,
            "VALIDATION_ERROR",
            Some("url"),
        ),
    ];
    let url_of = |component: &str| stack.process.line_after(&format!("{component} gRPC:")).unwrap();

    // grpcurl, with the request types from the services' reflection.
    let grpcurl = std::env::var("SWITCHBOARD_TEST_GRPCURL")
        .expect("SWITCHBOARD_TEST_GRPCURL names grpcurl (scripts/test installs it: ensure_grpc_clients)");
    for case in &cases {
        let address = url_of(case.component).trim_start_matches("http://").to_owned();
        let run = tokio::process::Command::new(&grpcurl)
            .args(["-plaintext", "-format-error", "-format", "json", "-max-time", "20"])
            .args(["-H", &format!("authorization: Bearer {}", stack.service_token)])
            .args(["-d", &case.request.to_string(), &address, case.method])
            .kill_on_drop(true)
            .output();
        let output =
            tokio::time::timeout(Duration::from_secs(30), run).await.expect("grpcurl answered in 30 s").unwrap();
        // With -format-error, the status is the JSON grpcurl writes to stderr.
        let printed = String::from_utf8_lossy(&output.stderr);
        let status: serde_json::Value = serde_json::from_str(&printed)
            .unwrap_or_else(|_| panic!("grpcurl printed no status for {}: {printed}", case.method));
        case.check("grpcurl", &status);
    }

    // grpcio, with stubs generated from proto/ by grpcio-tools, and grpcio-status.
    let python = std::env::var("SWITCHBOARD_TEST_GRPC_PYTHON")
        .expect("SWITCHBOARD_TEST_GRPC_PYTHON names a Python with grpcio (scripts/test: ensure_grpc_clients)");
    let root = env!("CARGO_MANIFEST_DIR");
    let calls: Vec<serde_json::Value> = cases
        .iter()
        .map(|case| {
            let (service, method) = case.method.rsplit_once('/').unwrap();
            let service = service.rsplit_once('.').unwrap().1;
            json!({ "url": url_of(case.component), "service": service, "method": method, "request": case.request })
        })
        .collect();
    let plan = json!({ "proto": format!("{root}/proto"), "token": stack.service_token, "calls": calls });
    let mut child = tokio::process::Command::new(python)
        .arg(format!("{root}/tests/grpc_clients/errors.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, plan.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("the grpcio client finished in 120 s")
        .unwrap();
    assert!(output.status.success(), "grpcio client: {}", String::from_utf8_lossy(&output.stderr));
    let results: Vec<serde_json::Value> =
        String::from_utf8_lossy(&output.stdout).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(results.len(), cases.len(), "{results:?}");
    for (case, result) in cases.iter().zip(&results) {
        case.check("grpcio", &result["status"]);
    }
}
