//! Calls: their transcripts, timelines and recordings.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Serialize;
use switchboard_proto::v1 as proto;

use crate::id::Id;
use crate::time::Timestamp;

/// The agent that had the conversation; a conversation whose agent has been deleted shows
/// none (its `agentId` filter still finds it).
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ConversationAgent {
    pub id: Id,
    pub name: String,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Direction {
    Incoming,
    Outgoing,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Speaker {
    Agent,
    Caller,
}

/// One utterance of a call.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TranscriptLine {
    pub speaker: Speaker,
    pub text: String,
    /// When it was said: the call's start plus the segment's offset.
    pub timestamp: Timestamp,
}

/// A phone call.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct CallView {
    pub id: Id,
    /// E.164.
    pub from: String,
    /// E.164.
    pub to: String,
    #[serde(rename = "type")]
    pub kind: Direction,
    /// As the runtime reported it, e.g. `completed`.
    pub status: String,
    /// Whole seconds; null while the call is in progress.
    pub duration: Option<i64>,
    /// When the call started.
    pub created_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    pub summary: Option<String>,
    pub score: Option<f64>,
    pub flagged: bool,
    pub favorite: bool,
    pub spam: bool,
    pub agent: Option<ConversationAgent>,
    /// In the order it was said.
    pub transcript: Vec<TranscriptLine>,
    /// A short-lived link to the recording, playable without headers; null without one.
    pub recording_url: Option<String>,
}

/// A moment of a call's timeline.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct TimelineEvent {
    #[serde(rename = "type")]
    pub kind: String,
    pub at: Timestamp,
    /// The event's data, as the runtime sent it.
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// A call with its timeline.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CallDetail {
    #[serde(flatten)]
    pub call: CallView,
    /// In time order.
    pub timeline: Vec<TimelineEvent>,
}

/// The agent reference of a conversation.
pub fn agent_ref(agent_id: Option<&String>, names: &HashMap<String, String>) -> Option<ConversationAgent> {
    let id = agent_id?;
    names.get(id).map(|name| ConversationAgent { id: Id::stored(id.clone()), name: name.clone() })
}

impl CallView {
    /// The view of `call`, its agent named by `names`, with the recording link given.
    pub fn of(call: &proto::Call, names: &HashMap<String, String>, recording_url: Option<String>) -> Self {
        let speaker = |name: &str| if name == "caller" { Speaker::Caller } else { Speaker::Agent };
        Self {
            id: Id::stored(call.id.clone()),
            from: call.from.clone(),
            to: call.to.clone(),
            kind: if call.direction == "OUTGOING" { Direction::Outgoing } else { Direction::Incoming },
            status: call.status.clone(),
            duration: call.duration_seconds,
            created_at: Timestamp::from_ms(call.started_at_ms),
            ended_at: Timestamp::option(call.ended_at_ms),
            summary: call.summary.clone(),
            score: call.score,
            flagged: call.flagged,
            favorite: call.favorite,
            spam: call.spam,
            agent: agent_ref(call.agent_id.as_ref(), names),
            transcript: call
                .transcript
                .iter()
                .map(|segment| TranscriptLine {
                    speaker: speaker(&segment.speaker),
                    text: segment.text.clone(),
                    timestamp: Timestamp::from_ms(segment.timestamp_ms),
                })
                .collect(),
            recording_url,
        }
    }
}

impl CallDetail {
    /// The call with its timeline, its agent named by `names`, with the recording link given.
    pub fn of(call: &proto::Call, names: &HashMap<String, String>, recording_url: Option<String>) -> Self {
        let timeline = call
            .timeline
            .iter()
            .map(|event| TimelineEvent {
                kind: event.r#type.clone(),
                at: Timestamp::from_ms(event.at_ms),
                data: serde_json::from_str(&event.data).unwrap_or_default(),
            })
            .collect();
        Self { call: CallView::of(call, names, recording_url), timeline }
    }
}
