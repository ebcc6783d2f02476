//! `POST /v1/agents/{agentId}/test-chat`: the portal's "Try it" chat. The agents service writes
//! the reply with the configured chat model (`services/agents/src/try_it.rs`); its events
//! become server-sent events here, each written out as it arrives.

use bytes::Bytes;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use switchboard_api::access::Feature;
use switchboard_api::knowledge::SearchResult;
use switchboard_kit::{ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{TryAgentEvent, TryAgentRequest, TryTurn, try_agent_event};

use super::agents::AgentPath;
use super::groups::AGENTS;
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::{Answer, Endpoint, Input, Json, Nothing};
use crate::reply::{BodyStream, Reply};

const ABOUT: &str = "The agent's next reply to a conversation, as the portal's \"Try it\" chat shows it, \
    streamed as server-sent events (`text/event-stream`) while the chat model writes it. The reply follows the \
    agent's built prompt (its instructions, name and channel), its `firstMessage` (sent to the model as the \
    agent's opening line: do not repeat it in `messages`) and its `model` settings (the name, when the operator \
    lists it in `SWITCHBOARD_LLM_MODELS`, else the platform's model; the temperature). Knowledge is retrieved before each turn, not \
    offered as a tool: when the agent has a knowledge base (and the team's access configuration allows it), it \
    is searched with the latest message, as `GET /v1/agents/{agentId}/knowledgebase/search` would (1 credit, the \
    4 best entries above the default threshold), and the entries go to the model with the prompt. Events: \
    `sources` first when the knowledge base was searched (`{query, knowledgebaseId, creditsUsed, results}`, \
    results as the search gives them), then `delta` events (`{text}`) in order, then `done` (`{reply, \
    finishReason, model}`); a model that fails mid-reply ends the stream with `error` (the error envelope). \
    Every refusal comes before the first event, as a JSON error: 503 when no chat model is configured (nothing \
    is spent), 429 when the team already has 2 replies being written (or the platform 16: nothing is spent), \
    402 when the search finds no credit left, 503 when the model does not answer or does not begin within 60 s \
    (the search's credit stays spent; the model's own words are logged, not shown). The conversation is stateless: send it whole each turn, at most 39 messages (20 of \
    the person's), alternating `user` and `agent`, starting and ending with `user`; a reply is at most 512 \
    tokens. Members and above; read-only keys are refused. Not recorded as a chat or in the audit log, and an \
    `Idempotency-Key` is not kept: a repeat is a new turn.";

/// How long the model may take to begin a reply.
const FIRST_EVENT: std::time::Duration = std::time::Duration::from_secs(60);

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::post("/v1/agents/{agentId}/test-chat", test_chat)
            .doc(
                "testChat",
                AGENTS,
                "Try the agent: its reply to a conversation, streamed (1 credit with a knowledge base)",
            )
            .about(ABOUT)
            // It spends a credit, which the usage log records; a line a turn would bury the audit log.
            .changes_nothing()
            .class(RateClass::Search)
            .spends_credits(limits::SEARCH_CREDITS)
            .fails(
                402,
                "Insufficient credits: the agent has a knowledge base and the team's balance has no credit left.",
            )
            .fails(404, "Agent not found")
            .fails(429, "The team already has 2 replies being written, or the platform 16; nothing is spent.")
            .fails(503, "No chat model is configured (`SWITCHBOARD_LLM_URL`), or the chat model did not answer."),
    ]
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct TestChat {
    /// The conversation after the agent's first message, oldest first: `user` and `agent`
    /// alternating, starting and ending with `user`.
    #[schemars(length(min = 1, max = limits::TRY_MESSAGES))]
    pub messages: Vec<TestChatMessage>,
}

#[derive(Deserialize, JsonSchema)]
pub struct TestChatMessage {
    pub role: TestChatRole,
    /// Not blank.
    #[schemars(length(min = limits::TRY_MESSAGE.min, max = limits::TRY_MESSAGE.max))]
    pub content: String,
}

/// Who said it: the person trying the agent, or the agent.
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TestChatRole {
    User,
    Agent,
}

impl TestChatRole {
    fn as_str(self) -> &'static str {
        match self {
            TestChatRole::User => "user",
            TestChatRole::Agent => "agent",
        }
    }
}

/// The `sources` event: what the turn's search found.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SourcesEvent {
    query: String,
    knowledgebase_id: String,
    credits_used: i64,
    results: Vec<SearchResult>,
}

/// The events, as they are sent.
pub struct EventStream(BodyStream);

impl JsonSchema for EventStream {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TestChatEvents".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "Server-sent events: `event: sources` (at most once, first), `event: delta` (a piece of \
                the reply), `event: done` (last), or `event: error` (the error envelope) when the model fails \
                mid-reply; each `data:` line is JSON.",
        })
    }
}

impl Answer for EventStream {
    const STATUS: u16 = 200;
    const MEDIA_TYPE: &'static str = "text/event-stream";

    fn into_reply(self) -> Reply {
        // `no-transform` and `X-Accel-Buffering`: a proxy in front must pass each event on at once.
        Reply::stream(Self::STATUS, "text/event-stream; charset=utf-8".to_owned(), None, self.0)
            .with_header("Cache-Control", "no-cache, no-transform".to_owned())
            .with_header("X-Accel-Buffering", "no".to_owned())
    }
}

async fn test_chat(call: Call, input: Input<AgentPath, Nothing, Json<TestChat>>) -> ServiceResult<EventStream> {
    let Json(body) = input.body;
    let request = TryAgentRequest {
        team_id: call.team_id().to_owned(),
        agent_id: input.path.agent_id.into_string(),
        turns: body
            .messages
            .into_iter()
            .map(|message| TryTurn { role: message.role.as_str().to_owned(), content: message.content })
            .collect(),
        // As admission reads the access configuration: a subteam's own, not its agency's.
        search_knowledge: Feature::KnowledgeBase.allowed_for(&call.principal.team),
    };
    let mut events = call.services.agents.clone().try_agent(request).await?.into_inner();
    // The first event is awaited here: a model that fails before writing still gets its
    // status, not a stream that ends at once. Dropping the stream (a timeout, or the client
    // gone) tells the agents service to stop asking the model.
    let first = tokio::time::timeout(FIRST_EVENT, events.message()).await.map_err(|_| {
        ServiceError::unavailable("The chat model did not begin its reply in time.")
            .with_hint("Try again; if it keeps happening, the operator checks the chat model.")
    })??;
    let rest = futures::stream::unfold(events, |mut events| async move {
        let next = events.message().await;
        match next {
            Ok(Some(event)) => Some((Ok(event), events)),
            Ok(None) => None,
            Err(status) => Some((Err(ServiceError::from(status)), events)),
        }
    });
    let all = futures::stream::iter(first.map(Ok)).chain(rest);
    // One error ends the stream: nothing follows it.
    let frames = all
        .scan(false, |ended, event| {
            if *ended {
                return futures::future::ready(None);
            }
            *ended = event.is_err();
            futures::future::ready(Some(frame(event)))
        })
        .map(Ok);
    Ok(EventStream(frames.boxed()))
}

/// One server-sent event.
fn frame(event: Result<TryAgentEvent, ServiceError>) -> Bytes {
    let (name, data) = match event.map(|event| event.event) {
        Ok(Some(try_agent_event::Event::Sources(sources))) => {
            let results = (1..).zip(&sources.hits).map(|(rank, hit)| SearchResult::ranked(rank, hit)).collect();
            let event = SourcesEvent {
                query: sources.query,
                knowledgebase_id: sources.knowledgebase_id,
                credits_used: sources.credits_used,
                results,
            };
            ("sources", serde_json::to_value(event).unwrap_or_default())
        }
        Ok(Some(try_agent_event::Event::Delta(text))) => ("delta", json!({ "text": text })),
        Ok(Some(try_agent_event::Event::Done(done))) => {
            ("done", json!({ "reply": done.reply, "finishReason": done.finish_reason, "model": done.model }))
        }
        Ok(None) => ("ping", json!({})),
        Err(error) => ("error", Reply::error(&error).body),
    };
    // serde_json writes no raw line breaks, so the data is one `data:` line.
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_one_event_and_one_data_line_each() {
        let delta = TryAgentEvent { event: Some(try_agent_event::Event::Delta("Hi\nthere".into())) };
        assert_eq!(frame(Ok(delta)), Bytes::from("event: delta\ndata: {\"text\":\"Hi\\nthere\"}\n\n"));
        let error = frame(Err(ServiceError::unavailable("The chat model stopped")));
        let text = String::from_utf8(error.to_vec()).unwrap();
        assert!(text.starts_with("event: error\ndata: {") && text.ends_with("}\n\n"), "{text}");
        assert_eq!(text.matches('\n').count(), 3, "{text}");
    }
}
