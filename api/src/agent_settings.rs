//! An agent's runtime settings in the public API (issue 41), as they are read: the members a
//! runtime needs beyond the instructions. What is written has types of its own in the gateway
//! (`api::agent_settings`), since a request may leave out what an answer always has.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_kit::limits;
use switchboard_proto::v1::{self as proto, tool::Kind};

/// The voice a phone agent speaks with.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Voice {
    /// The text-to-speech provider, e.g. `elevenlabs`.
    #[schemars(length(min = limits::PROVIDER.min, max = limits::PROVIDER.max))]
    pub provider: String,
    /// The provider's id of the voice.
    #[schemars(length(min = limits::VOICE_ID.min, max = limits::VOICE_ID.max))]
    pub voice_id: String,
    /// Speaking rate, 0.5 to 2; null: 1.
    #[schemars(range(min = limits::VOICE_SPEED.min, max = limits::VOICE_SPEED.max))]
    pub speed: Option<f64>,
}

/// The language model that runs the conversation.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Model {
    /// e.g. `openai`, `anthropic`.
    #[schemars(length(min = limits::PROVIDER.min, max = limits::PROVIDER.max))]
    pub provider: String,
    /// The provider's model name.
    #[schemars(length(min = limits::MODEL_NAME.min, max = limits::MODEL_NAME.max))]
    pub name: String,
    /// 0 to 2; null: the provider's default.
    #[schemars(range(min = limits::TEMPERATURE.min, max = limits::TEMPERATURE.max))]
    pub temperature: Option<f64>,
}

/// Something the agent can do during a conversation.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
#[schemars(deny_unknown_fields)]
pub enum AgentTool {
    /// A function the runtime calls over HTTP with arguments the model fills in.
    #[serde(rename_all = "camelCase")]
    Function {
        /// Unique among the agent's functions; letters, digits, `_` and `-`.
        #[schemars(length(min = limits::TOOL_NAME.min, max = limits::TOOL_NAME.max), regex(pattern = limits::TOOL_NAME_PATTERN))]
        name: String,
        /// When the model should call it.
        #[schemars(length(max = limits::TOOL_DESCRIPTION.max))]
        description: Option<String>,
        /// The arguments' JSON Schema: a schema of type `object`, checked to be a valid schema.
        parameters: Map<String, Value>,
        /// Where the runtime sends the call: an absolute http or https URL.
        #[schemars(length(min = limits::URL.min, max = limits::URL.max))]
        url: String,
    },
    /// Hands the call over to a person.
    TransferCall {
        /// E.164, e.g. `+14155550123` (other spellings with a country code are normalised).
        number: String,
        #[schemars(length(max = limits::TOOL_DESCRIPTION.max))]
        description: Option<String>,
    },
    /// Lets the agent hang up.
    EndCall {
        #[schemars(length(max = limits::TOOL_DESCRIPTION.max))]
        description: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AnalysisType {
    String,
    Number,
    Boolean,
    Enum,
}

impl AnalysisType {
    pub fn as_str(self) -> &'static str {
        match self {
            AnalysisType::String => "string",
            AnalysisType::Number => "number",
            AnalysisType::Boolean => "boolean",
            AnalysisType::Enum => "enum",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "number" => AnalysisType::Number,
            "boolean" => AnalysisType::Boolean,
            "enum" => AnalysisType::Enum,
            _ => AnalysisType::String,
        }
    }
}

/// A value to extract from each call when it ends; the runtime reports it in
/// `analysis.custom.<name>`.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct AnalysisField {
    /// A letter, then letters, digits or `_`; unique.
    #[schemars(length(min = limits::FIELD_NAME.min, max = limits::FIELD_NAME.max), regex(pattern = limits::FIELD_NAME_PATTERN))]
    pub name: String,
    #[serde(rename = "type")]
    pub kind: AnalysisType,
    #[schemars(length(max = limits::TOOL_DESCRIPTION.max))]
    pub description: Option<String>,
    /// The allowed values of an `enum` field (1 to 50); empty for the other types.
    #[serde(default)]
    #[schemars(length(max = limits::ANALYSIS_CHOICES.max))]
    pub choices: Vec<String>,
}

/// An agent's runtime settings, as an agent shows them and a saved version keeps them.
#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Settings {
    /// What the agent says first; null: the runtime's default.
    pub first_message: Option<String>,
    /// BCP 47 language tag, e.g. `en-US`.
    pub language: Option<String>,
    pub voice: Option<Voice>,
    pub model: Option<Model>,
    pub tools: Vec<AgentTool>,
    pub post_call_analysis: Vec<AnalysisField>,
}

impl From<&proto::AgentSettings> for Settings {
    fn from(settings: &proto::AgentSettings) -> Self {
        Self {
            first_message: settings.first_message.clone(),
            language: settings.language.clone(),
            voice: settings.voice.as_ref().map(|v| Voice {
                provider: v.provider.clone(),
                voice_id: v.voice_id.clone(),
                speed: v.speed,
            }),
            model: settings.model.as_ref().map(|m| Model {
                provider: m.provider.clone(),
                name: m.name.clone(),
                temperature: m.temperature,
            }),
            tools: settings.tools.iter().filter_map(tool_view).collect(),
            post_call_analysis: settings
                .post_call_analysis
                .iter()
                .map(|field| AnalysisField {
                    name: field.name.clone(),
                    kind: AnalysisType::parse(&field.r#type),
                    description: field.description.clone(),
                    choices: field.choices.clone(),
                })
                .collect(),
        }
    }
}

fn tool_view(tool: &proto::Tool) -> Option<AgentTool> {
    Some(match tool.kind.as_ref()? {
        Kind::Function(function) => AgentTool::Function {
            name: function.name.clone(),
            description: function.description.clone(),
            // Stored schemas were checked to be JSON objects.
            parameters: serde_json::from_str(&function.parameters_json).unwrap_or_default(),
            url: function.url.clone(),
        },
        Kind::TransferCall(transfer) => {
            AgentTool::TransferCall { number: transfer.number.clone(), description: transfer.description.clone() }
        }
        Kind::EndCall(end) => AgentTool::EndCall { description: end.description.clone() },
    })
}
