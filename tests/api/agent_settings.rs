//! Agents' runtime settings over HTTP (versioned with the instructions, every field checked and
//! named), and the runtime contract over gRPC: `GetRuntimeConfig`, and `WatchAgents` resumed
//! after a disconnect without missing the change made meanwhile (issue 41).

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_proto::v1::agents_service_client::AgentsServiceClient;
use switchboard_proto::v1::{AgentChange, AgentChangeKind, GetAgentRequest, WatchAgentsRequest};
use tonic::Streaming;
use tonic::transport::Channel;

use crate::agents::{create_agent, id};
use crate::common::{Api, Stack};

fn weather_tool() -> Value {
    json!({
        "type": "function",
        "name": "get_weather",
        "description": "The forecast for a city",
        "parameters": { "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] },
        "url": "https://tools.example.com/weather"
    })
}

fn full_settings() -> Value {
    json!({
        "firstMessage": "Hello, this is Ava.",
        "language": "en-US",
        "voice": { "provider": "elevenlabs", "voiceId": "rachel", "speed": 1.1 },
        "model": { "provider": "openai", "name": "gpt-4o-mini", "temperature": 0.4 },
        "tools": [weather_tool(), { "type": "transfer_call", "number": "+1 (415) 555-0123", "description": "A person" }, { "type": "end_call" }],
        "postCallAnalysis": [
            { "name": "outcome", "type": "enum", "description": "How it ended", "choices": ["booked", "callback", "lost"] },
            { "name": "budget", "type": "number" }
        ]
    })
}

async fn version(api: &Api, agent: &str) -> u64 {
    api.get(&format!("/agents/{agent}/instructions")).await.expect(200)["data"]["version"].as_u64().unwrap()
}

#[tokio::test]
async fn settings_are_kept_changed_member_by_member_and_restored_with_the_history() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 0).await;
    let api = stack.client(&team.key);

    let plain = create_agent(&api, "Plain", json!({})).await;
    assert_eq!((plain["firstMessage"].clone(), plain["voice"].clone()), (Value::Null, Value::Null));
    assert_eq!((plain["tools"].clone(), plain["postCallAnalysis"].clone()), (json!([]), json!([])));

    let agent = create_agent(&api, "Ava", full_settings()).await;
    let agent_id = id(&agent);
    assert_eq!(agent["language"], "en-US");
    assert_eq!(agent["tools"][0], weather_tool());
    assert_eq!(agent["tools"][1]["number"], "+14155550123", "stored in E.164");
    assert_eq!(agent["tools"][2], json!({ "type": "end_call", "description": null }));
    assert_eq!(
        agent["postCallAnalysis"][1],
        json!({ "name": "budget", "type": "number", "description": null, "choices": [] })
    );
    assert_eq!(version(&api, &agent_id).await, 1);

    // One member changes; the others stay. null clears.
    let changed = api.put(&format!("/agents/{agent_id}"), json!({ "language": "de-DE", "voice": null })).await;
    let changed = changed.expect(200)["data"].clone();
    assert_eq!((changed["language"].clone(), changed["voice"].clone()), (json!("de-DE"), Value::Null));
    assert_eq!(changed["firstMessage"], "Hello, this is Ava.");
    assert_eq!(changed["tools"].as_array().unwrap().len(), 3);
    assert_eq!(api.get(&format!("/agents/{agent_id}")).await.expect(200)["data"], changed);
    assert_eq!(version(&api, &agent_id).await, 2);

    // The same values again, or a rename, make no version.
    api.put(&format!("/agents/{agent_id}"), json!({ "language": "de-DE", "name": "Ava 2" })).await.expect(200);
    assert_eq!(version(&api, &agent_id).await, 2);

    let history = api.get(&format!("/agents/{agent_id}/instructions/history")).await;
    let saved = history.expect(200)["data"][0].clone();
    assert_eq!((saved["version"].clone(), saved["instructions"].clone()), (json!(1), json!("")));
    assert_eq!(saved["settings"]["language"], "en-US");
    assert_eq!(saved["settings"]["voice"]["voiceId"], "rachel");

    let restored = api.post(&format!("/agents/{agent_id}/instructions/history/1/restore"), json!({})).await;
    assert_eq!(restored.expect(200)["data"]["version"], 3);
    let now = api.get(&format!("/agents/{agent_id}")).await.expect(200)["data"].clone();
    assert_eq!((now["language"].clone(), now["voice"]["speed"].clone()), (json!("en-US"), json!(1.1)));

    let cleared = api.put(&format!("/agents/{agent_id}"), json!({ "tools": [], "postCallAnalysis": null })).await;
    assert_eq!(
        (cleared.expect(200)["data"]["tools"].clone(), cleared.body["data"]["postCallAnalysis"].clone()),
        (json!([]), json!([]))
    );
}

#[tokio::test]
async fn every_bad_setting_is_named_and_nothing_is_written() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 0).await;
    let api = stack.client(&team.key);
    let agent = create_agent(&api, "Ava", json!({ "language": "en-US" })).await;
    let path = format!("/agents/{}", id(&agent));

    // What the published schema says is checked at the gateway.
    let shape = api
        .put(
            &path,
            json!({
                "voice": { "provider": "elevenlabs", "voiceId": "rachel", "speed": 3 },
                "model": { "provider": "openai", "name": "gpt", "temperature": -1 },
                "tools": [{ "type": "teleport" }, { "type": "function", "name": "has space", "parameters": {}, "url": "https://x.example" }],
                "postCallAnalysis": [{ "name": "1st", "type": "date" }]
            }),
        )
        .await;
    let fields: Vec<&str> =
        shape.expect(400)["details"].as_array().unwrap().iter().map(|d| d["field"].as_str().unwrap()).collect();
    assert_eq!(
        fields,
        [
            "voice.speed",
            "model.temperature",
            "tools[0].type",
            "tools[1].name",
            "postCallAnalysis[0].name",
            "postCallAnalysis[0].type"
        ]
    );

    // What needs reading is checked by the agents service, with the same field names.
    let meaning = api
        .put(
            &path,
            json!({
                "language": "english please",
                "tools": [
                    { "type": "function", "name": "lookup", "parameters": { "type": "object", "properties": { "id": { "type": "uuid" } } }, "url": "ftp://x.example" },
                    { "type": "transfer_call", "number": "555-0123" },
                    { "type": "function", "name": "lookup", "parameters": { "type": "object" }, "url": "https://x.example" }
                ],
                "postCallAnalysis": [{ "name": "outcome", "type": "enum", "choices": [] }, { "name": "score", "type": "number", "choices": ["1"] }]
            }),
        )
        .await;
    let details = meaning.expect(400)["details"].as_array().unwrap().clone();
    let fields: Vec<&str> = details.iter().map(|d| d["field"].as_str().unwrap()).collect();
    assert_eq!(
        fields,
        [
            "language",
            "tools[0].parameters",
            "tools[0].url",
            "tools[1].number",
            "tools[2].name",
            "postCallAnalysis[0].choices",
            "postCallAnalysis[1].choices"
        ]
    );
    assert!(details[1]["message"].as_str().unwrap().contains("properties.id.type"), "{details:?}");

    let unchanged = api.get(&path).await.expect(200)["data"].clone();
    assert_eq!((unchanged["language"].clone(), unchanged["tools"].clone()), (json!("en-US"), json!([])));
    assert_eq!(version(&api, &id(&agent)).await, 1);
}

async fn agents_client(stack: &Stack) -> AgentsServiceClient<Channel> {
    let endpoint = Channel::from_shared(stack.grpc_url("agents")).unwrap().timeout(Duration::from_secs(20));
    let channel = tokio::time::timeout(Duration::from_secs(10), endpoint.connect())
        .await
        .expect("connecting to the agents service in time")
        .unwrap();
    AgentsServiceClient::new(channel)
}

fn signed<T>(stack: &Stack, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert("authorization", format!("Bearer {}", stack.service_token).parse().unwrap());
    request
}

async fn next(changes: &mut Streaming<AgentChange>, waiting_for: &str) -> AgentChange {
    tokio::time::timeout(Duration::from_secs(10), changes.message())
        .await
        .unwrap_or_else(|_| panic!("no change within 10 s: {waiting_for}"))
        .unwrap()
        .unwrap_or_else(|| panic!("the stream ended: {waiting_for}"))
}

#[tokio::test]
async fn a_runtime_reads_a_config_and_follows_changes_across_a_disconnect() {
    let stack = Stack::start().await;
    let team = stack.team("Acme", false, 0).await;
    let other = stack.team("Other", false, 0).await;
    let api = stack.client(&team.key);
    let agent = create_agent(&api, "Ava", json!({ "instructions": "Be brief.", "firstMessage": "Hi!" })).await;
    let agent_id = id(&agent);
    let mut agents = agents_client(&stack).await;

    let request = GetAgentRequest { team_id: team.id.clone(), agent_id: agent_id.clone() };
    let config = agents.get_runtime_config(signed(&stack, request)).await.unwrap().into_inner();
    assert_eq!((config.instructions.as_str(), config.instructions_version), ("Be brief.", 1));
    assert_eq!(config.agent.as_ref().unwrap().settings.as_ref().unwrap().first_message.as_deref(), Some("Hi!"));
    let not_theirs = GetAgentRequest { team_id: other.id.clone(), agent_id: agent_id.clone() };
    let refused = agents.get_runtime_config(signed(&stack, not_theirs)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::NotFound);

    let watch = WatchAgentsRequest { team_id: team.id.clone(), from_version: config.watch_version };
    let mut changes = agents.watch_agents(signed(&stack, watch)).await.unwrap().into_inner();
    api.put(&format!("/agents/{agent_id}"), json!({ "firstMessage": "Hello!" })).await.expect(200);
    let seen = next(&mut changes, "the first message change").await;
    let settings = seen.config.as_ref().unwrap().agent.as_ref().unwrap().settings.clone().unwrap();
    assert_eq!((seen.agent_id.as_str(), settings.first_message.as_deref()), (agent_id.as_str(), Some("Hello!")));

    // The runtime drops; meanwhile the instructions change and another team changes its agent.
    drop(changes);
    api.put(&format!("/agents/{agent_id}/instructions"), json!({ "instructions": "Be kind." })).await.expect(200);
    create_agent(&stack.client(&other.key), "Theirs", json!({})).await;
    let resume = WatchAgentsRequest { team_id: team.id.clone(), from_version: seen.version };
    let mut changes = agents.watch_agents(signed(&stack, resume)).await.unwrap().into_inner();
    let missed = loop {
        let change = next(&mut changes, "the instructions changed while disconnected").await;
        assert_eq!(change.team_id, team.id, "only the watched team's changes");
        if change.config.as_ref().is_some_and(|c| c.instructions == "Be kind.") {
            break change;
        }
    };
    assert!(missed.version > seen.version);

    api.delete(&format!("/agents/{agent_id}")).await.expect(200);
    let gone = loop {
        let change = next(&mut changes, "the deletion").await;
        if change.kind() == AgentChangeKind::Deleted {
            break change;
        }
    };
    assert_eq!((gone.agent_id.as_str(), gone.config.is_none()), (agent_id.as_str(), true));

    let future = WatchAgentsRequest { team_id: String::new(), from_version: gone.version + 1_000_000 };
    let refused = agents.watch_agents(signed(&stack, future)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::OutOfRange);
}
