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
        access: Some(AccessFlags { users: Some(false), ..Default::default() }),
    };
    let created = identity.create_subteam(with_token(subteam, &token)).await.unwrap().into_inner();
    let created_team = created.team.unwrap();
    assert_eq!(created_team.monthly_credits, 1000);
    let access = created_team.access.unwrap();
    assert!(!access.users && access.instructions && access.knowledge_base);
    assert_eq!(created.users[0].role, "owner");
}
