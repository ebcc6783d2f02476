//! An agent's runtime settings (issue 41): what a runtime needs beyond the instructions. They
//! are checked here, so that an internal gRPC caller meets the public API's rules, changed
//! member by member, and stored as their protobuf encoding in one column that the
//! instructions history versions with them.

mod json_schema;
mod language;

use prost::Message;
use switchboard_kit::limits::{self, Length};
use switchboard_kit::phone::PhoneRules;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult};
use switchboard_proto::v1::tool::Kind;
use switchboard_proto::v1::{AgentSettings, AnalysisField, FunctionTool, Tool};

/// The members an update may name, as `UpdateAgentRequest.settings_paths` spells them.
pub const PATHS: [&str; 6] = ["first_message", "language", "voice", "model", "tools", "post_call_analysis"];
const ANALYSIS_TYPES: [&str; 4] = ["string", "number", "boolean", "enum"];

/// The settings as stored: every member checked, texts of names trimmed, transfer numbers in
/// E.164 and schemas as compact JSON. All violations are reported at once.
pub fn checked(mut settings: AgentSettings) -> ServiceResult<AgentSettings> {
    let mut out = Vec::new();
    if let Some(text) = &settings.first_message {
        out.extend(limits::FIRST_MESSAGE.check("firstMessage", text));
    }
    if let Some(tag) = &mut settings.language {
        *tag = tag.trim().to_owned();
        match limits::LANGUAGE_TAG.check("language", tag) {
            Some(violation) => out.push(violation),
            None if !language::is_language_tag(tag) => {
                out.push(FieldViolation::new("language", "must be a BCP 47 language tag such as en-US"));
            }
            None => {}
        }
    }
    if let Some(voice) = &mut settings.voice {
        trimmed(&mut voice.provider, limits::PROVIDER, "voice.provider", &mut out);
        trimmed(&mut voice.voice_id, limits::VOICE_ID, "voice.voiceId", &mut out);
        out.extend(voice.speed.and_then(|speed| limits::VOICE_SPEED.check("voice.speed", speed)));
    }
    if let Some(model) = &mut settings.model {
        trimmed(&mut model.provider, limits::PROVIDER, "model.provider", &mut out);
        trimmed(&mut model.name, limits::MODEL_NAME, "model.name", &mut out);
        out.extend(model.temperature.and_then(|t| limits::TEMPERATURE.check("model.temperature", t)));
    }
    check_tools(&mut settings.tools, &mut out);
    check_analysis(&mut settings.post_call_analysis, &mut out);
    if out.is_empty() { Ok(settings) } else { Err(ServiceError::validation(out)) }
}

fn trimmed(text: &mut String, length: Length, field: &str, out: &mut Vec<FieldViolation>) {
    *text = text.trim().to_owned();
    out.extend(length.check(field, text));
}

fn count(items: usize, bound: limits::Count, field: &str, what: &str, out: &mut Vec<FieldViolation>) {
    if i64::try_from(items).map_or(true, |n| n > bound.max) {
        out.push(FieldViolation::new(field, format!("must hold at most {} {what}", bound.max)));
    }
}

fn check_tools(tools: &mut [Tool], out: &mut Vec<FieldViolation>) {
    count(tools.len(), limits::TOOLS, "tools", "tools", out);
    let mut names: Vec<String> = Vec::new();
    for (index, tool) in tools.iter_mut().enumerate() {
        let at = |member: &str| format!("tools[{index}].{member}");
        let description = match &mut tool.kind {
            None => {
                out.push(FieldViolation::new(at("type"), "must be one of function, transfer_call, end_call"));
                continue;
            }
            Some(Kind::Function(function)) => {
                check_function(function, &at, out);
                if names.contains(&function.name) {
                    out.push(FieldViolation::new(at("name"), "is the name of another tool"));
                }
                names.push(function.name.clone());
                &function.description
            }
            Some(Kind::TransferCall(transfer)) => {
                match e164(&transfer.number) {
                    Ok(number) => transfer.number = number,
                    Err(message) => out.push(FieldViolation::new(at("number"), message)),
                }
                &transfer.description
            }
            Some(Kind::EndCall(end)) => &end.description,
        };
        out.extend(description.as_deref().and_then(|text| limits::TOOL_DESCRIPTION.check(&at("description"), text)));
    }
}

fn check_function(function: &mut FunctionTool, at: &dyn Fn(&str) -> String, out: &mut Vec<FieldViolation>) {
    function.name = function.name.trim().to_owned();
    match limits::TOOL_NAME.check(&at("name"), &function.name) {
        Some(violation) => out.push(violation),
        None if !limits::is_tool_name(&function.name) => {
            out.push(FieldViolation::new(at("name"), limits::TOOL_NAME_MESSAGE));
        }
        None => {}
    }
    if function.parameters_json.len() > limits::TOOL_PARAMETERS_BYTES {
        out.push(FieldViolation::new(
            at("parameters"),
            format!("must be at most {} bytes of JSON", limits::TOOL_PARAMETERS_BYTES),
        ));
    } else if let Some(problem) = json_schema::parameters_problem(&function.parameters_json) {
        out.push(FieldViolation::new(at("parameters"), problem));
    } else {
        function.parameters_json = json_schema::compact(&function.parameters_json);
    }
    function.url = function.url.trim().to_owned();
    out.extend(url_violation(&function.url, &at("url")));
}

/// An absolute http(s) URL with a host. The runtime calls it, not Switchboard, so there is no
/// private-address rule here as there is for webhooks.
fn url_violation(url: &str, field: &str) -> Option<FieldViolation> {
    if let Some(violation) = limits::URL.check(field, url) {
        return Some(violation);
    }
    let fine = url::Url::parse(url).is_ok_and(|parsed| {
        matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some_and(|h| !h.is_empty())
    });
    (!fine).then(|| FieldViolation::new(field, "must be an absolute http or https URL"))
}

/// A number given with its country code, in E.164.
fn e164(number: &str) -> Result<String, String> {
    let number = number.trim();
    if !number.starts_with('+') {
        return Err("must be an E.164 number with its country code, such as +14155550123".to_owned());
    }
    PhoneRules::default().normalise(number).map_err(str::to_owned)
}

fn check_analysis(fields: &mut [AnalysisField], out: &mut Vec<FieldViolation>) {
    count(fields.len(), limits::ANALYSIS_FIELDS, "postCallAnalysis", "fields", out);
    let mut names: Vec<String> = Vec::new();
    for (index, field) in fields.iter_mut().enumerate() {
        let at = |member: &str| format!("postCallAnalysis[{index}].{member}");
        field.name = field.name.trim().to_owned();
        match limits::FIELD_NAME.check(&at("name"), &field.name) {
            Some(violation) => out.push(violation),
            None if !limits::is_field_name(&field.name) => {
                out.push(FieldViolation::new(
                    at("name"),
                    "must start with a letter and hold only letters, digits and _",
                ));
            }
            None if names.contains(&field.name) => {
                out.push(FieldViolation::new(at("name"), "is the name of another field"));
            }
            None => names.push(field.name.clone()),
        }
        if !ANALYSIS_TYPES.contains(&field.r#type.as_str()) {
            out.push(FieldViolation::new(at("type"), format!("must be one of {}", ANALYSIS_TYPES.join(", "))));
        }
        out.extend(
            field.description.as_deref().and_then(|text| limits::TOOL_DESCRIPTION.check(&at("description"), text)),
        );
        check_choices(field, &at("choices"), out);
    }
}

fn check_choices(field: &mut AnalysisField, at: &str, out: &mut Vec<FieldViolation>) {
    if field.r#type != "enum" {
        if !field.choices.is_empty() {
            out.push(FieldViolation::new(at, "only enum fields have choices"));
        }
        return;
    }
    let bound = limits::ANALYSIS_CHOICES;
    if field.choices.is_empty() || i64::try_from(field.choices.len()).map_or(true, |n| n > bound.max) {
        out.push(FieldViolation::new(at, format!("must hold 1 to {} choices", bound.max)));
    }
    for (index, choice) in field.choices.iter_mut().enumerate() {
        *choice = choice.trim().to_owned();
        out.extend(limits::ANALYSIS_CHOICE.check(&format!("{at}[{index}]"), choice));
    }
    let distinct = field.choices.iter().enumerate().all(|(index, choice)| !field.choices[..index].contains(choice));
    if !distinct {
        out.push(FieldViolation::new(at, "must not repeat a choice"));
    }
}

/// `current` with the members named by `paths` taken from `given` (an unset one is cleared).
pub fn merged(mut current: AgentSettings, given: AgentSettings, paths: &[String]) -> ServiceResult<AgentSettings> {
    let unknown: Vec<FieldViolation> = paths
        .iter()
        .filter(|path| !PATHS.contains(&path.as_str()))
        .map(|path| {
            FieldViolation::new("settingsPaths", format!("{path} is not a setting; one of {}", PATHS.join(", ")))
        })
        .collect();
    if !unknown.is_empty() {
        return Err(ServiceError::validation(unknown));
    }
    let AgentSettings { first_message, language, voice, model, tools, post_call_analysis } = given;
    let named = |path: &str| paths.iter().any(|p| p == path);
    if named("first_message") {
        current.first_message = first_message;
    }
    if named("language") {
        current.language = language;
    }
    if named("voice") {
        current.voice = voice;
    }
    if named("model") {
        current.model = model;
    }
    if named("tools") {
        current.tools = tools;
    }
    if named("post_call_analysis") {
        current.post_call_analysis = post_call_analysis;
    }
    checked(current)
}

/// The column's value: NULL for no settings at all.
pub fn encode(settings: &AgentSettings) -> Option<Vec<u8>> {
    (settings != &AgentSettings::default()).then(|| settings.encode_to_vec())
}

pub fn decode(column: Option<Vec<u8>>) -> Result<AgentSettings, sqlx::Error> {
    match column {
        None => Ok(AgentSettings::default()),
        Some(bytes) => AgentSettings::decode(bytes.as_slice()).map_err(|error| sqlx::Error::Decode(Box::new(error))),
    }
}

#[cfg(test)]
mod tests {
    use switchboard_proto::v1::{TransferCallTool, Voice};

    use super::*;

    fn fields_of(result: ServiceResult<AgentSettings>) -> Vec<String> {
        result.err().map(|error| error.details.into_iter().map(|d| d.field).collect()).unwrap_or_default()
    }

    #[test]
    fn every_bad_member_is_named() {
        let settings = AgentSettings {
            language: Some("english_US".into()),
            voice: Some(Voice { provider: " ".into(), voice_id: "v1".into(), speed: Some(3.0) }),
            tools: vec![
                Tool {
                    kind: Some(Kind::Function(FunctionTool {
                        name: "lookup".into(),
                        description: None,
                        parameters_json: r#"{"type":"object","required":"id"}"#.into(),
                        url: "ftp://example.com".into(),
                    })),
                },
                Tool {
                    kind: Some(Kind::TransferCall(TransferCallTool { number: "4155550123".into(), description: None })),
                },
                Tool { kind: None },
            ],
            post_call_analysis: vec![AnalysisField {
                name: "outcome".into(),
                r#type: "enum".into(),
                description: None,
                choices: vec![],
            }],
            ..AgentSettings::default()
        };
        assert_eq!(
            fields_of(checked(settings)),
            [
                "language",
                "voice.provider",
                "voice.speed",
                "tools[0].parameters",
                "tools[0].url",
                "tools[1].number",
                "tools[2].type",
                "postCallAnalysis[0].choices"
            ]
        );
    }

    #[test]
    fn an_update_changes_only_what_it_names() {
        let current = AgentSettings {
            first_message: Some("Hello".into()),
            language: Some("en-US".into()),
            ..AgentSettings::default()
        };
        let given = AgentSettings { language: Some("de-DE".into()), ..AgentSettings::default() };
        let paths = ["language".to_owned(), "first_message".to_owned()];
        let merged = merged(current, given, &paths).expect("valid");
        assert_eq!((merged.first_message, merged.language.as_deref()), (None, Some("de-DE")));
        assert_eq!(
            fields_of(super::merged(AgentSettings::default(), AgentSettings::default(), &["colour".into()])),
            ["settingsPaths"]
        );
    }

    #[test]
    fn transfer_numbers_are_stored_in_e164() {
        let tool = Tool {
            kind: Some(Kind::TransferCall(TransferCallTool { number: "+1 (415) 555-0123".into(), description: None })),
        };
        let settings = checked(AgentSettings { tools: vec![tool], ..AgentSettings::default() }).expect("valid");
        assert!(matches!(&settings.tools[0].kind, Some(Kind::TransferCall(t)) if t.number == "+14155550123"));
    }
}
