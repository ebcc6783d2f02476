//! An agent's runtime settings as a request writes them (issue 41), and what the agents service
//! receives. The schema gives the published bounds; the service checks what needs reading
//! (language tags, phone numbers, URLs, JSON Schemas) with the same field names.
//!
//! These input types look like the views of `switchboard_api::agent_settings` on purpose, and
//! stay apart from them: the description publishes them under their own names (`VoiceInput`
//! and `Voice`, ...), a request refuses unknown members and leaves optional ones out while an
//! answer shows every member, and a tool is read from JSON here but from the stored message
//! there. The bounds themselves are written once, in `switchboard_kit::limits`; both sides
//! name the same constants.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use switchboard_api::agent_settings::AnalysisType;
use switchboard_kit::limits;
use switchboard_proto::v1::{self as proto, tool::Kind};

/// The voice a phone agent speaks with. Other members are refused.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VoiceInput {
    /// The text-to-speech provider, e.g. `elevenlabs`.
    #[schemars(length(min = limits::PROVIDER.min, max = limits::PROVIDER.max))]
    pub provider: String,
    /// The provider's id of the voice.
    #[schemars(length(min = limits::VOICE_ID.min, max = limits::VOICE_ID.max))]
    pub voice_id: String,
    /// Speaking rate, 0.5 to 2; absent or null: 1.
    #[schemars(range(min = limits::VOICE_SPEED.min, max = limits::VOICE_SPEED.max))]
    pub speed: Option<f64>,
}

/// The language model that runs the conversation. Other members are refused.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelInput {
    #[schemars(length(min = limits::PROVIDER.min, max = limits::PROVIDER.max))]
    pub provider: String,
    #[schemars(length(min = limits::MODEL_NAME.min, max = limits::MODEL_NAME.max))]
    pub name: String,
    /// 0 to 2; absent or null: the provider's default.
    #[schemars(range(min = limits::TEMPERATURE.min, max = limits::TEMPERATURE.max))]
    pub temperature: Option<f64>,
}

/// A tool, told apart by `type`. Other members are refused.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolInput {
    /// A function the runtime calls over HTTP with arguments the model fills in.
    Function {
        /// Unique among the agent's functions; letters, digits, `_` and `-`.
        #[schemars(length(min = limits::TOOL_NAME.min, max = limits::TOOL_NAME.max), regex(pattern = limits::TOOL_NAME_PATTERN))]
        name: String,
        #[schemars(length(max = limits::TOOL_DESCRIPTION.max))]
        description: Option<String>,
        /// The arguments' JSON Schema, of type `object`; checked to be a valid schema.
        parameters: Map<String, Value>,
        /// An absolute http or https URL; the runtime calls it, Switchboard does not.
        #[schemars(length(min = limits::URL.min, max = limits::URL.max))]
        url: String,
    },
    /// Hands the call to a person at `number` (E.164; other spellings with a country code are
    /// stored in E.164).
    TransferCall {
        #[schemars(length(min = 1, max = 64))]
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

/// A value to extract from each call when it ends. Other members are refused.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnalysisFieldInput {
    /// A letter, then letters, digits or `_`; unique.
    #[schemars(length(min = limits::FIELD_NAME.min, max = limits::FIELD_NAME.max), regex(pattern = limits::FIELD_NAME_PATTERN))]
    pub name: String,
    #[serde(rename = "type")]
    pub kind: AnalysisType,
    #[schemars(length(max = limits::TOOL_DESCRIPTION.max))]
    pub description: Option<String>,
    /// For `enum` only: 1 to 50 distinct values.
    #[serde(default)]
    #[schemars(length(max = limits::ANALYSIS_CHOICES.max))]
    pub choices: Vec<String>,
}

impl From<VoiceInput> for proto::Voice {
    fn from(voice: VoiceInput) -> Self {
        Self { provider: voice.provider, voice_id: voice.voice_id, speed: voice.speed }
    }
}

impl From<ModelInput> for proto::Model {
    fn from(model: ModelInput) -> Self {
        Self { provider: model.provider, name: model.name, temperature: model.temperature }
    }
}

impl From<ToolInput> for proto::Tool {
    fn from(tool: ToolInput) -> Self {
        let kind = match tool {
            ToolInput::Function { name, description, parameters, url } => Kind::Function(proto::FunctionTool {
                name,
                description,
                parameters_json: Value::Object(parameters).to_string(),
                url,
            }),
            ToolInput::TransferCall { number, description } => {
                Kind::TransferCall(proto::TransferCallTool { number, description })
            }
            ToolInput::EndCall { description } => Kind::EndCall(proto::EndCallTool { description }),
        };
        Self { kind: Some(kind) }
    }
}

impl From<AnalysisFieldInput> for proto::AnalysisField {
    fn from(field: AnalysisFieldInput) -> Self {
        Self {
            name: field.name,
            r#type: field.kind.as_str().to_owned(),
            description: field.description,
            choices: field.choices,
        }
    }
}
