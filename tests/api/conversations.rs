//! Calls and chats: recorded through the conversations service's ingestion gRPC, as a voice or
//! chat runtime would, and read through the gateway over HTTP.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_proto::v1::conversation_ingest_client::ConversationIngestClient;
use switchboard_proto::v1::{
    AddCallEventRequest, AppendChatMessagesRequest, AppendTranscriptRequest, EndCallRequest, EndChatRequest,
    NewChatMessage, PutRecordingRequest, TranscriptSegment, UpsertCallRequest, UpsertChatRequest,
};
use tonic::transport::Channel;

use crate::common::{Api, Stack, Team};

/// A runtime's connection to the ingestion API.
pub struct Runtime {
    pub client: ConversationIngestClient<Channel>,
    token: String,
}

impl Runtime {
    pub async fn connect(stack: &Stack) -> Runtime {
        let url = stack.grpc_url("conversations");
        let endpoint = Channel::from_shared(url).unwrap().timeout(Duration::from_secs(20));
        let channel = tokio::time::timeout(Duration::from_secs(10), endpoint.connect())
            .await
            .expect("connecting to the conversations service in time")
            .unwrap();
        Runtime { client: ConversationIngestClient::new(channel), token: stack.service_token.clone() }
    }

    pub fn signed<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.metadata_mut().insert("authorization", format!("Bearer {}", self.token).parse().unwrap());
        request
    }

    pub async fn call(&mut self, request: UpsertCallRequest) -> Result<String, tonic::Status> {
        let request = self.signed(request);
        Ok(self.client.upsert_call(request).await?.into_inner().id)
    }

    pub async fn transcript(&mut self, team: &str, external_id: &str, segments: &[(i64, &str, &str, i64)]) {
        let segments = segments
            .iter()
            .map(|(seq, speaker, text, offset_ms)| TranscriptSegment {
                seq: *seq,
                speaker: (*speaker).to_owned(),
                text: (*text).to_owned(),
                offset_ms: *offset_ms,
                timestamp_ms: 0,
            })
            .collect();
        let request =
            AppendTranscriptRequest { team_id: team.to_owned(), external_id: external_id.to_owned(), segments };
        let request = self.signed(request);
        self.client.append_transcript(request).await.unwrap();
    }

    pub async fn end(&mut self, team: &str, external_id: &str, ended_at: &str, summary: &str) {
        let request = EndCallRequest {
            team_id: team.to_owned(),
            external_id: external_id.to_owned(),
            ended_at: ended_at.to_owned(),
            status: "completed".to_owned(),
            summary: Some(summary.to_owned()),
            score: Some(0.8),
            ..EndCallRequest::default()
        };
        let request = self.signed(request);
        self.client.end_call(request).await.unwrap();
    }
}

pub fn upsert(team: &Team, external_id: &str, from: &str, direction: &str, started_at: &str) -> UpsertCallRequest {
    UpsertCallRequest {
        team_id: team.id.clone(),
        external_id: external_id.to_owned(),
        agent_id: None,
        from: from.to_owned(),
        to: "+1 (628) 555-0100".to_owned(),
        direction: direction.to_owned(),
        status: "in-progress".to_owned(),
        started_at: started_at.to_owned(),
    }
}

fn ids(page: &Value) -> Vec<String> {
    page["data"].as_array().unwrap().iter().map(|call| call["id"].as_str().unwrap().to_owned()).collect()
}

/// Three calls of one team, one of another: enough to filter, sort and page.
async fn calls_fixture(stack: &Stack, runtime: &mut Runtime) -> (Team, Api, Vec<String>) {
    let team = stack.team("Calls", false, 0).await;
    let api = stack.client(&team.key);
    let agent = api.post("/agents", json!({ "name": "Front desk", "type": "phone" })).await.expect(201)["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut first = upsert(&team, "ext-1", "(415) 555-2671", "INCOMING", "2026-03-01T10:00:00Z");
    first.agent_id = Some(agent.clone());
    let a = runtime.call(first).await.unwrap();
    runtime
        .transcript(
            &team.id,
            "ext-1",
            &[
                (2, "caller", "I would like to move my appointment to Zürich.", 4_000),
                (1, "agent", "Hello, Acme dental, how can I help?", 1_000),
            ],
        )
        .await;
    runtime.end(&team.id, "ext-1", "2026-03-01T10:02:05Z", "Rescheduled an appointment").await;
    let b = runtime.call(upsert(&team, "ext-2", "+442079460018", "OUTGOING", "2026-03-02T09:00:00Z")).await.unwrap();
    runtime.end(&team.id, "ext-2", "2026-03-02T09:00:30Z", "Left a voicemail").await;
    // Started at the same moment as the second: the tie is broken by id.
    let c = runtime.call(upsert(&team, "ext-3", "+14155550199", "INCOMING", "2026-03-02T09:00:00Z")).await.unwrap();
    let other = stack.team("Other", false, 0).await;
    runtime.call(upsert(&other, "ext-1", "(415) 555-2671", "INCOMING", "2026-03-01T11:00:00Z")).await.unwrap();
    (team, api, vec![a, b, c])
}

#[tokio::test]
async fn calls_recorded_over_grpc_are_listed_filtered_and_read_over_http() {
    let stack = Stack::start().await;
    let mut runtime = Runtime::connect(&stack).await;
    let (team, api, calls) = calls_fixture(&stack, &mut runtime).await;
    let [a, b, c] = [calls[0].clone(), calls[1].clone(), calls[2].clone()];

    let listed = api.get("/calls").await;
    let page = listed.expect(200);
    assert_eq!(page["pagination"], json!({ "page": 1, "limit": 20, "totalCount": 3, "totalPages": 1 }));
    let mut tied = [b.clone(), c.clone()];
    tied.sort();
    tied.reverse();
    assert_eq!(ids(page), [tied[0].clone(), tied[1].clone(), a.clone()], "newest first, ties by id");
    let first = page["data"].as_array().unwrap().iter().find(|call| call["id"] == a.as_str()).unwrap();
    assert_eq!(first["from"], "+14155552671");
    assert_eq!(first["to"], "+16285550100");
    assert_eq!(first["type"], "INCOMING");
    assert_eq!(first["duration"], 125);
    assert_eq!(first["agent"]["name"], "Front desk");
    assert_eq!(first["transcript"][0]["text"], "Hello, Acme dental, how can I help?");
    assert_eq!(first["transcript"][1]["timestamp"], "2026-03-01T10:00:04.000Z");
    assert_eq!(first["recordingUrl"], Value::Null);

    let only = |query: &str| {
        let api = api.clone();
        let path = format!("/calls?{query}");
        async move { ids(api.get(&path).await.expect(200)) }
    };
    assert_eq!(only("callType=outgoing").await, [b.as_str()]);
    assert_eq!(only("number=%2B1%20415-555-2671").await, [a.as_str()]);
    assert_eq!(only("number=(628)%20555-0100&sortBy=createdAt&sortOrder=asc").await[0], a);
    assert_eq!(only("minDuration=100").await, [a.as_str()]);
    assert_eq!(only("maxDuration=30").await, [b.as_str()]);
    assert_eq!(only("dateFrom=2026-03-02&dateTo=2026-03-02").await.len(), 2);
    assert_eq!(only("dateTo=2026-03-01T10:00:00Z").await, [a.as_str()]);
    assert_eq!(only("dateTo=2026-03-01T10:00Z").await, [a.as_str()], "ISO 8601 without seconds");
    assert_eq!(only("dateTo=2026-03-01T11:00%2B01:00").await, [a.as_str()], "with an offset");
    assert_eq!(only("search=zürich").await, [a.as_str()]);
    assert_eq!(only("search=5552671").await, [a.as_str()]);
    assert_eq!(only("search=voicemail").await, [b.as_str()]);
    assert_eq!(only("sortBy=duration&sortOrder=asc").await, [b.clone(), a.clone(), c.clone()], "in progress last");
    let paged: Vec<String> =
        [only("limit=1&page=1").await, only("limit=1&page=2").await, only("limit=1&page=3").await].concat();
    assert_eq!(paged, ids(page), "pages cover the list once");
    let agent = first["agent"]["id"].as_str().unwrap();
    assert_eq!(only(&format!("agentId={agent}")).await, [a.as_str()]);

    let detail = api.get(&format!("/calls/{a}")).await;
    assert_eq!(detail.expect(200)["data"]["timeline"], json!([]));
    assert_eq!(detail.body["data"]["summary"], "Rescheduled an appointment");

    // Another team sees none of it, and its own call of the same external id stays its own.
    let other = stack.team("Stranger", false, 0).await;
    let stranger = stack.client(&other.key);
    assert_eq!(stranger.get(&format!("/calls/{a}")).await.error_code(404), "NOT_FOUND");
    assert_eq!(stranger.delete(&format!("/calls/{a}")).await.error_code(404), "NOT_FOUND");
    assert!(stranger.get("/calls").await.expect(200)["data"].as_array().unwrap().is_empty());
    assert_eq!(api.get("/calls?search=5552671").await.body["pagination"]["totalCount"], 1);

    // Once its agent is deleted a call shows no agent, and the agent's id still finds it.
    api.delete(&format!("/agents/{agent}")).await.expect(200);
    assert_eq!(api.get(&format!("/calls/{a}")).await.expect(200)["data"]["agent"], Value::Null);
    assert_eq!(only(&format!("agentId={agent}")).await, [a.as_str()]);
    let _ = team;
}

/// A deleted team's calls and chats take no more writes: every ingestion RPC checks the team
/// (trusted for 2 seconds once found), not only the upserts.
#[tokio::test]
async fn a_deleted_teams_conversations_take_no_more_writes() {
    let stack = Stack::start().await;
    let mut runtime = Runtime::connect(&stack).await;
    let team = stack.team("Closing down", false, 0).await;
    runtime.call(upsert(&team, "last", "+14155552671", "INCOMING", "2026-03-01T10:00:00Z")).await.unwrap();
    runtime.transcript(&team.id, "last", &[(1, "agent", "Hello", 0)]).await;
    stack.admin(&["delete-team", &team.id]).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;

    let segment =
        TranscriptSegment { seq: 2, speaker: "caller".into(), text: "Hi".into(), offset_ms: 900, timestamp_ms: 0 };
    let append =
        AppendTranscriptRequest { team_id: team.id.clone(), external_id: "last".into(), segments: vec![segment] };
    let refused = runtime.client.append_transcript(runtime.signed(append)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::NotFound, "{refused:?}");
    let event = AddCallEventRequest {
        team_id: team.id.clone(),
        external_id: "last".into(),
        r#type: "hangup".into(),
        at: "2026-03-01T10:01:00Z".into(),
        data: String::new(),
    };
    assert_eq!(runtime.client.add_call_event(runtime.signed(event)).await.unwrap_err().code(), tonic::Code::NotFound);
    let end = EndCallRequest {
        team_id: team.id.clone(),
        external_id: "last".into(),
        ended_at: "2026-03-01T10:01:00Z".into(),
        status: "completed".into(),
        summary: None,
        score: None,
        ..EndCallRequest::default()
    };
    assert_eq!(runtime.client.end_call(runtime.signed(end)).await.unwrap_err().code(), tonic::Code::NotFound);
    let recording = put_recording(&mut runtime, &team.id, "last", &[0; 64]).await;
    assert_eq!(recording.unwrap_err().code(), tonic::Code::NotFound);
    let late = upsert(&team, "later", "+14155552671", "INCOMING", "2026-03-01T11:00:00Z");
    assert_eq!(runtime.call(late).await.unwrap_err().code(), tonic::Code::NotFound);
}

/// On PostgreSQL a search matching more than 1,000 calls is counted to 1,001 and its total
/// estimated, flagged by `totalCountEstimated`; a page that shows the end makes it exact, and
/// a total of at most 1,000 is exact and keeps the published shape.
#[tokio::test]
async fn a_search_matching_over_a_thousand_calls_has_an_estimated_total_on_postgres() {
    let Some(stack) = Stack::serve_on_postgres(&["identity", "agents", "conversations"], &[]).await else {
        eprintln!("skipped: no PostgreSQL (TEST_DATABASE_URL)");
        return;
    };
    let mut runtime = Runtime::connect(&stack).await;
    let team = stack.team("Busy line", false, 0).await;
    let api = stack.client(&team.key);
    for n in 0..1_100 {
        let (external_id, direction) = (format!("busy-{n}"), if n < 100 { "OUTGOING" } else { "INCOMING" });
        let started_at = format!("2026-03-01T10:{:02}:{:02}Z", n / 60 % 60, n % 60);
        runtime.call(upsert(&team, &external_id, "+14155552671", direction, &started_at)).await.unwrap();
        // Two appends, two rows of searchable text a call: 2,200 rows make the search frequent.
        runtime.transcript(&team.id, &external_id, &[(1, "caller", "Is the quokka plushie back in stock?", 0)]).await;
        runtime.transcript(&team.id, &external_id, &[(2, "agent", "Quokka plushies are back on Monday.", 900)]).await;
    }

    let first = api.get("/calls?search=Quokka").await;
    let pagination = &first.expect(200)["pagination"];
    assert_eq!(pagination["totalCountEstimated"], true, "{pagination}");
    assert!(pagination["totalCount"].as_u64().unwrap() > 1_000, "{pagination}");
    assert_eq!(first.body["data"].as_array().unwrap().len(), 20);
    assert_eq!(ids(&first.body), ids(&api.get("/calls").await.body), "every call matches: the same first page");

    // 1,100 calls in pages of 30: the 37th holds the last 20, so the total is known.
    let last = api.get("/calls?search=quokka&limit=30&page=37").await;
    assert_eq!(last.expect(200)["data"].as_array().unwrap().len(), 20);
    assert_eq!(last.body["pagination"], json!({"page": 37, "limit": 30, "totalCount": 1100, "totalPages": 37}));

    let outgoing = api.get("/calls?search=quokka&callType=outgoing").await;
    let expected = json!({"page": 1, "limit": 20, "totalCount": 100, "totalPages": 5});
    assert_eq!(outgoing.expect(200)["pagination"], expected, "at most 1,000: exact, no flag");
}

#[tokio::test]
async fn ingestion_is_idempotent_and_checks_what_it_is_given() {
    let stack = Stack::start().await;
    let mut runtime = Runtime::connect(&stack).await;
    let team = stack.team("Runtime", false, 0).await;
    let api = stack.client(&team.key);
    let request = upsert(&team, "twice", "415-555-2671", "INCOMING", "2026-03-01T10:00:00+01:00");
    let id = runtime.call(request.clone()).await.unwrap();
    assert_eq!(runtime.call(request.clone()).await.unwrap(), id);
    // Segments out of order and repeated: each once, in seq order.
    runtime.transcript(&team.id, "twice", &[(3, "agent", "third", 3_000), (1, "caller", "first", 1_000)]).await;
    runtime.transcript(&team.id, "twice", &[(2, "agent", "second", 2_000), (1, "caller", "first", 1_000)]).await;
    let event = AddCallEventRequest {
        team_id: team.id.clone(),
        external_id: "twice".to_owned(),
        r#type: "transferred".to_owned(),
        at: "2026-03-01T09:00:10Z".to_owned(),
        data: r#"{"to": "+14155550123"}"#.to_owned(),
    };
    let signed = runtime.signed(event);
    runtime.client.add_call_event(signed).await.unwrap();
    let call = api.get(&format!("/calls/{id}")).await;
    let texts: Vec<&str> = call.expect(200)["data"]["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["first", "second", "third"]);
    assert_eq!(call.body["data"]["createdAt"], "2026-03-01T09:00:00.000Z");
    assert_eq!(call.body["data"]["duration"], Value::Null);
    assert_eq!(call.body["data"]["timeline"][0]["data"]["to"], "+14155550123");
    assert_eq!(api.get("/calls").await.body["pagination"]["totalCount"], 1);

    // Invalid fields name themselves; an unknown team or another team's agent is NOT_FOUND.
    let mut bad = upsert(&team, "bad", "hello", "SIDEWAYS", "yesterday");
    bad.status = String::new();
    let refused = runtime.call(bad).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    let fields: Vec<String> =
        switchboard_kit::ServiceError::from_status(&refused).details.into_iter().map(|v| v.field).collect();
    assert_eq!(fields, ["from", "direction", "startedAt"]);
    let stranger = stack.team("Stranger", false, 0).await;
    let foreign_agent = stack.client(&stranger.key).post("/agents", json!({ "name": "Theirs", "type": "phone" })).await;
    let mut borrowed = upsert(&team, "borrowed", "+14155552671", "INCOMING", "2026-03-01T10:00:00Z");
    borrowed.agent_id = foreign_agent.expect(201)["data"]["id"].as_str().map(str::to_owned);
    assert_eq!(runtime.call(borrowed).await.unwrap_err().code(), tonic::Code::NotFound);
    let mut nobody = upsert(&team, "nobody", "+14155552671", "INCOMING", "2026-03-01T10:00:00Z");
    nobody.team_id = uuid::Uuid::new_v4().to_string();
    assert_eq!(runtime.call(nobody).await.unwrap_err().code(), tonic::Code::NotFound);
    // Another team cannot append to this team's call by its external id.
    let foreign = AppendTranscriptRequest {
        team_id: stranger.id.clone(),
        external_id: "twice".to_owned(),
        segments: vec![TranscriptSegment {
            seq: 9,
            speaker: "agent".to_owned(),
            text: "x".to_owned(),
            ..Default::default()
        }],
    };
    let signed = runtime.signed(foreign);
    assert_eq!(runtime.client.append_transcript(signed).await.unwrap_err().code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn call_flags_change_and_a_deleted_call_is_gone() {
    let stack = Stack::start().await;
    let mut runtime = Runtime::connect(&stack).await;
    let (_, api, calls) = calls_fixture(&stack, &mut runtime).await;
    let a = &calls[0];
    let flagged = api
        .send(
            api.request(reqwest::Method::PATCH, &format!("/calls/{a}"))
                .json(&json!({ "flagged": true, "spam": false })),
        )
        .await;
    assert_eq!(flagged.expect(200)["data"]["flagged"], true);
    assert_eq!(flagged.body["data"]["favorite"], false);
    let favorite =
        api.send(api.request(reqwest::Method::PATCH, &format!("/calls/{a}")).json(&json!({ "favorite": true }))).await;
    assert_eq!(favorite.expect(200)["data"]["flagged"], true, "members left out keep their value");
    let bad =
        api.send(api.request(reqwest::Method::PATCH, &format!("/calls/{a}")).json(&json!({ "flagged": "yes" }))).await;
    assert_eq!(bad.fields(), ["flagged"]);
    api.delete(&format!("/calls/{a}")).await.expect(200);
    assert_eq!(api.get(&format!("/calls/{a}")).await.error_code(404), "NOT_FOUND");
    assert!(api.get("/calls?search=zürich").await.expect(200)["data"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn bad_call_parameters_are_400_naming_the_parameter() {
    let stack = Stack::start().await;
    let team = stack.team("Params", false, 0).await;
    let api = stack.client(&team.key);
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("page=0", "page"),
        ("callType=sideways", "callType"),
        ("sortBy=price", "sortBy"),
        ("sortOrder=up", "sortOrder"),
        ("dateFrom=yesterday", "dateFrom"),
        ("dateTo=2026-13-01", "dateTo"),
        ("minDuration=-1", "minDuration"),
        ("minDuration=10&maxDuration=5", "minDuration"),
        ("agentId=nope", "agentId"),
        ("number=hello", "number"),
    ] {
        let answer = api.get(&format!("/calls?{query}")).await;
        assert_eq!(answer.error_code(400), "VALIDATION_ERROR", "{query}");
        assert_eq!(answer.fields(), [field], "{query}");
    }
    assert_eq!(api.get("/calls/not-a-uuid").await.fields(), ["callId"]);
}

#[tokio::test]
async fn chats_are_recorded_read_in_pages_and_scoped() {
    let stack = Stack::start().await;
    let mut runtime = Runtime::connect(&stack).await;
    let team = stack.team("Chats", true, 0).await;
    let api = stack.client(&team.key);
    let chat = UpsertChatRequest {
        team_id: team.id.clone(),
        external_id: "web-1".to_owned(),
        agent_id: None,
        channel: "web".to_owned(),
        contact_number: Some("(415) 555-2671".to_owned()),
        contact_email: Some("Grace@Example.com".to_owned()),
        started_at: "2026-03-01T10:00:00Z".to_owned(),
    };
    let signed = runtime.signed(chat.clone());
    let id = runtime.client.upsert_chat(signed).await.unwrap().into_inner().id;
    let messages: Vec<NewChatMessage> = (1..=5)
        .map(|n| NewChatMessage {
            external_id: format!("m{n}"),
            role: if n % 2 == 1 { "user" } else { "agent" }.to_owned(),
            text: format!("message number {n} about delivery"),
            created_at: format!("2026-03-01T10:00:0{n}Z"),
        })
        .collect();
    for _ in 0..2 {
        let append = AppendChatMessagesRequest {
            team_id: team.id.clone(),
            external_id: "web-1".to_owned(),
            messages: messages.clone(),
        };
        let signed = runtime.signed(append);
        runtime.client.append_chat_messages(signed).await.unwrap();
    }
    let whatsapp = UpsertChatRequest { external_id: "wa-1".to_owned(), channel: "whatsapp".to_owned(), ..chat.clone() };
    let signed = runtime.signed(whatsapp);
    runtime.client.upsert_chat(signed).await.unwrap();
    let end = EndChatRequest {
        team_id: team.id.clone(),
        external_id: "wa-1".to_owned(),
        ended_at: "2026-03-01T11:00:00Z".to_owned(),
        summary: Some("Asked about opening hours".to_owned()),
    };
    let signed = runtime.signed(end);
    runtime.client.end_chat(signed).await.unwrap();

    let listed = api.get("/chats").await;
    assert_eq!(listed.expect(200)["pagination"]["totalCount"], 2);
    let web = api.get("/chats?channel=web").await;
    let web = &web.expect(200)["data"][0];
    assert_eq!(web["messageCount"], 5, "re-sent messages are not counted twice");
    assert_eq!(web["contact"], json!({ "number": "+14155552671", "email": "grace@example.com" }));
    assert_eq!(web["status"], "active");
    assert_eq!(ids(api.get("/chats?status=ended").await.expect(200)).len(), 1);
    assert_eq!(ids(api.get("/chats?search=DELIVERY").await.expect(200)), [id.as_str()]);
    assert_eq!(ids(api.get("/chats?sortBy=lastMessageAt").await.expect(200))[0], id, "chats without messages last");

    let latest = api.get(&format!("/chats/{id}?messagesLimit=2")).await;
    let texts = |answer: &Value| -> Vec<String> {
        answer["data"]["messages"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(texts(latest.expect(200)), ["message number 4 about delivery", "message number 5 about delivery"]);
    let oldest = latest.body["data"]["messages"][0]["id"].as_str().unwrap().to_owned();
    let older = api.get(&format!("/chats/{id}?messagesLimit=2&messagesBefore={oldest}")).await;
    assert_eq!(texts(older.expect(200)), ["message number 2 about delivery", "message number 3 about delivery"]);
    assert_eq!(api.get(&format!("/chats/{id}?messagesLimit=501")).await.fields(), ["messagesLimit"]);
    assert_eq!(api.get("/chats?channel=fax").await.fields(), ["channel"]);

    // Another team: 404; the agency acting on the team through teamId sees it.
    let stranger = stack.team("Stranger", false, 0).await;
    assert_eq!(stack.client(&stranger.key).get(&format!("/chats/{id}")).await.error_code(404), "NOT_FOUND");
    api.delete(&format!("/chats/{id}")).await.expect(200);
    assert_eq!(api.get(&format!("/chats/{id}")).await.error_code(404), "NOT_FOUND");
}

#[tokio::test]
async fn a_subteam_without_the_conversations_flag_cannot_read_them_but_its_agency_can() {
    let stack = Stack::start().await;
    let agency = stack.team("Agency", true, 1000).await;
    let agency_api = stack.client(&agency.key);
    let body = json!({
        "firstName": "Ada", "lastName": "Lovelace", "teamName": "Client", "email": "ada@client.example",
        "totalMonthlyCredits": 0, "accessConfig": { "conversations": false },
    });
    let subteam = agency_api.post("/agency/subteams", body).await;
    let subteam_id = subteam.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(subteam.body["data"]["accessConfig"]["conversations"], false);
    let own_key = stack.key(&subteam_id, false).await;
    let own = stack.client(&own_key);
    assert_eq!(own.get("/calls").await.error_code(403), "FORBIDDEN");
    assert_eq!(own.get("/chats").await.error_code(403), "FORBIDDEN");
    // What is computed from the calls is the calls: their analytics and their export.
    assert_eq!(own.get("/analytics/calls").await.error_code(403), "FORBIDDEN");
    assert_eq!(own.get("/calls/export").await.error_code(403), "FORBIDDEN");
    assert_eq!(own.get("/chats/export").await.error_code(403), "FORBIDDEN");
    assert_eq!(agency_api.get(&format!("/chats/export?teamId={subteam_id}")).await.status, 200);
    assert_eq!(agency_api.get(&format!("/calls?teamId={subteam_id}")).await.status, 200);
    assert_eq!(agency_api.get(&format!("/analytics/calls?teamId={subteam_id}")).await.status, 200);
    assert_eq!(agency_api.get(&format!("/calls/export?teamId={subteam_id}")).await.status, 200);
}

/// Streams a recording in chunks, as a voice runtime would at the end of a call.
async fn put_recording(
    runtime: &mut Runtime,
    team: &str,
    external_id: &str,
    audio: &[u8],
) -> Result<(), tonic::Status> {
    let chunks: Vec<PutRecordingRequest> = audio
        .chunks(64 * 1024)
        .enumerate()
        .map(|(n, data)| PutRecordingRequest {
            team_id: if n == 0 { team.to_owned() } else { String::new() },
            external_id: if n == 0 { external_id.to_owned() } else { String::new() },
            content_type: if n == 0 { "audio/mpeg".to_owned() } else { String::new() },
            data: data.to_vec(),
        })
        .collect();
    let request = runtime.signed(futures::stream::iter(chunks));
    runtime.client.put_recording(request).await.map(|_| ())
}

#[tokio::test]
async fn a_recording_plays_from_its_signed_url_in_ranges_until_the_call_is_deleted() {
    let stack = Stack::start().await;
    let mut runtime = Runtime::connect(&stack).await;
    let team = stack.team("Recordings", false, 0).await;
    let api = stack.client(&team.key);
    let id = runtime.call(upsert(&team, "rec-1", "+14155552671", "INCOMING", "2026-03-01T10:00:00Z")).await.unwrap();
    let audio: Vec<u8> = (0..300_000u32).map(|n| (n % 251) as u8).collect();
    put_recording(&mut runtime, &team.id, "rec-1", &audio).await.unwrap();

    let call = api.get(&format!("/calls/{id}")).await;
    let url = call.expect(200)["data"]["recordingUrl"].as_str().expect("a recording URL").to_owned();
    assert!(url.starts_with(&format!("{}/calls/{id}/recording?", stack.base)), "{url}");
    let http = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
    let whole = http.get(&url).send().await.unwrap();
    assert_eq!(whole.status(), 200, "played without an API key");
    assert_eq!(whole.headers()["content-type"], "audio/mpeg");
    assert_eq!(whole.headers()["accept-ranges"], "bytes");
    assert_eq!(whole.bytes().await.unwrap().as_ref(), audio.as_slice());

    let part = http.get(&url).header("Range", "bytes=100-199").send().await.unwrap();
    assert_eq!(part.status(), 206);
    assert_eq!(part.headers()["content-range"], "bytes 100-199/300000");
    assert_eq!(part.bytes().await.unwrap().as_ref(), &audio[100..200]);
    let tail = http.get(&url).header("Range", "bytes=-10").send().await.unwrap();
    assert_eq!(tail.headers()["content-range"], "bytes 299990-299999/300000");
    assert_eq!(tail.bytes().await.unwrap().as_ref(), &audio[299_990..]);
    let beyond = http.get(&url).header("Range", "bytes=300000-").send().await.unwrap();
    assert_eq!(beyond.status(), 416, "a range past the end");
    assert_eq!(beyond.headers()["content-range"], "bytes */300000");
    let far = http.get(&url).header("Range", "bytes=900000-900010").send().await.unwrap();
    assert_eq!((far.status().as_u16(), &far.headers()["content-range"]), (416, &"bytes */300000".parse().unwrap()));

    // A changed signature, another call's id or an expired URL: 403 with a JSON error.
    let tampered = format!("{}0", url.trim_end_matches(|c: char| c.is_ascii_hexdigit()));
    let denied = http.get(&tampered).send().await.unwrap();
    assert_eq!(denied.status(), 403);
    let body: Value = denied.json().await.unwrap();
    assert_eq!(body["code"], "FORBIDDEN");
    let key = switchboard_gateway::config::UrlKey::derived_from(&stack.service_token);
    let origin = stack.base.trim_end_matches("/v1");
    let an_hour_ago = switchboard_kit::time::now_ms() - 3_600_000;
    let expired = key.url(origin, &team.id, &id, an_hour_ago);
    assert_eq!(http.get(&expired).send().await.unwrap().status(), 403);
    let fresh = key.url(origin, &team.id, &id, switchboard_kit::time::now_ms());
    assert_eq!(http.get(&fresh).send().await.unwrap().status(), 200, "the gateway's key is derived as documented");
    let stranger = stack.team("Stranger", false, 0).await;
    let foreign = key.url(origin, &stranger.id, &id, switchboard_kit::time::now_ms());
    assert_eq!(http.get(&foreign).send().await.unwrap().status(), 404, "signed for a team that lacks the call");

    // A recording for another team's call is refused; deleting the call removes the recording.
    assert_eq!(
        put_recording(&mut runtime, &stranger.id, "rec-1", b"x").await.unwrap_err().code(),
        tonic::Code::NotFound
    );
    api.delete(&format!("/calls/{id}")).await.expect(200);
    assert_eq!(http.get(&url).send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn seed_demo_fills_a_team_through_the_ingestion_api_once() {
    let stack = Stack::start().await;
    let team = stack.team("Demo", false, 0).await;
    let api = stack.client(&team.key);
    let args = ["seed-demo", "--team", &team.id, "--calls", "12", "--chats", "4", "--recordings", "2"];
    let written = stack.admin(&args).await;
    assert_eq!((written["calls"].as_u64(), written["chats"].as_u64()), (Some(12), Some(4)));
    assert!(written["segments"].as_u64().unwrap() > 12 * 4, "{written}");
    let again = stack.admin(&args).await;
    assert_eq!(again["segments"], written["segments"], "the same seed writes the same conversations");

    let calls = api.get("/calls?limit=100").await;
    assert_eq!(calls.expect(200)["pagination"]["totalCount"], 12, "a second run adds nothing");
    let recorded =
        calls.body["data"].as_array().unwrap().iter().filter(|call| call["recordingUrl"].is_string()).count();
    assert_eq!(recorded, 2);
    let answered = calls.body["data"].as_array().unwrap().iter().find(|call| call["summary"].is_string()).unwrap();
    let id = answered["id"].as_str().unwrap();
    let timeline = api.get(&format!("/calls/{id}")).await;
    assert!(!timeline.expect(200)["data"]["timeline"].as_array().unwrap().is_empty());
    let chats = api.get("/chats").await;
    assert_eq!(chats.expect(200)["pagination"]["totalCount"], 4);
    assert!(chats.body["data"][0]["messageCount"].as_u64().unwrap() >= 4);
    let seeded_chats = chats.body["data"].clone();

    // Contacts (30 by default) with tags, notes and a board through the CRM service, once.
    assert_eq!(written["crm"]["contacts"], 30, "{written}");
    assert_eq!((again["crm"]["contacts"].as_u64(), again["crm"]["existing"].as_u64()), (Some(0), Some(30)));
    let contacts = api.get("/contacts?limit=100").await;
    assert_eq!(contacts.expect(200)["pagination"]["totalCount"], 30);
    assert!(!contacts.body["availableTags"].as_array().unwrap().is_empty());
    let boards = api.get("/boards").await;
    assert_eq!(boards.expect(200)["data"][0]["name"], "Sales pipeline");
    assert_eq!(boards.body["data"][0]["stages"].as_array().unwrap().len(), 5);
    assert!(boards.body["data"][0]["contactCount"].as_u64().unwrap() > 0);

    // Another seed is other conversations; an unknown team is refused.
    stack.admin(&["seed-demo", "--team", &team.id, "--calls", "3", "--chats", "0", "--seed", "2"]).await;
    assert_eq!(api.get("/calls").await.body["pagination"]["totalCount"], 15);
    assert_eq!(api.get("/contacts").await.body["pagination"]["totalCount"], 60);
    let contacts_only = ["seed-demo", "--team", &uuid::Uuid::new_v4().to_string(), "--calls", "0", "--chats", "0"];
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["admin", "--data-dir", stack.data_path().to_str().unwrap()])
        .args(contacts_only)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), output).await.expect("seed-demo ends").unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("Team not found"), "the CRM checks the team too");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["admin", "--data-dir", stack.data_path().to_str().unwrap(), "seed-demo"])
        .args(["--team", &uuid::Uuid::new_v4().to_string()])
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), output).await.expect("seed-demo ends").unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("Team not found"));
    exports_link_the_portal_and_name_the_people(&stack, &api, &seeded_chats).await;
}

/// Issue 55, defect 3: the calls' export links each call's page and, when it has one, the
/// recording's player there; the chats' export has the same care: every chat once, its contact
/// named by the CRM, a link to its page; another team's export is a header alone.
async fn exports_link_the_portal_and_name_the_people(stack: &Stack, api: &Api, chats: &Value) {
    use crate::call_outcomes::{cell, rows};
    let calls = rows(&api.get("/calls/export").await.text);
    let listed = api.get("/calls?limit=100").await.expect(200).clone();
    assert_eq!(Some(calls.len() as u64 - 1), listed["pagination"]["totalCount"].as_u64(), "a header and every call");
    let with_recording =
        listed["data"].as_array().unwrap().iter().filter(|call| call["recordingUrl"].is_string()).count();
    let recorded: Vec<&str> =
        (1..calls.len()).map(|row| cell(&calls, row, "recording_url")).filter(|url| !url.is_empty()).collect();
    assert_eq!(recorded.len(), with_recording, "{recorded:?}");
    assert!(with_recording > 0);
    for url in &recorded {
        assert!(url.contains("/calls/") && url.ends_with("#recording"), "{url}");
    }

    // A chat with the number of a contact of the team.
    let mut runtime = Runtime::connect(stack).await;
    let team_id = api.get("/me").await.expect(200)["data"]["team"]["id"].as_str().unwrap().to_owned();
    let chat = UpsertChatRequest {
        team_id,
        external_id: "export-1".to_owned(),
        agent_id: None,
        channel: "whatsapp".to_owned(),
        contact_number: Some("(415) 555-0177".to_owned()),
        contact_email: None,
        started_at: "2026-03-01T10:00:00Z".to_owned(),
    };
    let signed = runtime.signed(chat);
    let id = runtime.client.upsert_chat(signed).await.unwrap().into_inner().id;
    let contact = json!({ "number": "+14155550177", "firstName": "Chat", "lastName": "Person" });
    api.post("/contacts", contact).await.expect(201);
    let with_number = api.get(&format!("/chats/{id}")).await.expect(200)["data"].clone();
    let name = "Chat Person";
    let export = api.get("/chats/export").await;
    assert_eq!(export.status, 200, "{}", export.text);
    assert_eq!(export.headers["content-type"], "text/csv; charset=utf-8");
    let table = rows(&export.text);
    assert_eq!(table.len(), 1 + chats.as_array().unwrap().len() + 1, "a header, the seeded chats and ours: {table:?}");
    let row = (1..table.len()).find(|row| cell(&table, *row, "id") == id).expect("the chat in the export");
    assert_eq!(cell(&table, row, "contact_name"), name);
    assert_eq!(cell(&table, row, "contact_number"), with_number["contact"]["number"].as_str().unwrap());
    assert!(cell(&table, row, "chat_url").ends_with(&format!("/chats/{id}")));
    assert_eq!(cell(&table, row, "message_count"), with_number["messageCount"].to_string());
    let channel = with_number["channel"].as_str().unwrap();
    let same_channel = rows(&api.get(&format!("/chats/export?channel={channel}")).await.text);
    let listed = api.get(&format!("/chats?channel={channel}")).await.expect(200)["pagination"]["totalCount"].clone();
    assert_eq!(Some(same_channel.len() as u64 - 1), listed.as_u64(), "the list's filters hold");
    assert_eq!(api.get("/chats/export?channel=fax").await.fields(), ["channel"]);

    let stranger = stack.client(&stack.team("Export Other", false, 0).await.key);
    assert_eq!(rows(&stranger.get("/chats/export").await.text).len(), 1, "a header only");
}
