//! The MCP tools, read off the endpoints that declare one. A tool's `inputSchema` puts the path
//! parameters, `teamId`, the query parameters and the body members side by side, as a model fills
//! them in most reliably; they are the schemas of the endpoint's own types, written in place.
//! Two endpoints may back one tool (a knowledge base through its agent or by its id): a call runs
//! the one whose path parameters its arguments give.

use std::sync::Arc;

use anyhow::bail;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};
use switchboard_kit::{FieldViolation, ServiceError};

use crate::endpoint::schema::{is_required, properties};
use crate::endpoint::{BodyKind, Endpoint, RawInput, ToolHints};
use crate::reply::Reply;

/// Where an argument goes when the tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Path,
    Query,
    Body,
}

/// One endpoint a tool can run, with the arguments it takes.
struct Operation {
    endpoint: Endpoint,
    arguments: Vec<(String, Place, Value, bool)>,
}

impl Operation {
    fn new(endpoint: &Endpoint) -> anyhow::Result<Self> {
        let inputs = endpoint.inputs.clone();
        let mut arguments: Vec<(String, Place, Value, bool)> = Vec::new();
        let mut add = |name: &str, place: Place, schema: &Value, required: bool| -> anyhow::Result<()> {
            if arguments.iter().any(|(known, ..)| known == name) {
                bail!("{}: two arguments named {name}", endpoint.operation_id);
            }
            arguments.push((name.to_owned(), place, schema.clone(), required));
            Ok(())
        };
        for (name, schema) in properties(&inputs.path) {
            add(name, Place::Path, schema, true)?;
        }
        let team = json!({ "type": "string", "format": "uuid", "description": "Act on this client subteam of the key's agency." });
        add("teamId", Place::Query, &team, false)?;
        for (name, schema) in properties(&inputs.query) {
            add(name, Place::Query, schema, is_required(&inputs.query, name))?;
        }
        match (&inputs.body, endpoint.body) {
            (Some(body), BodyKind::Json) => {
                for (name, schema) in properties(body) {
                    add(name, Place::Body, schema, is_required(body, name))?;
                }
            }
            (None, BodyKind::None) => {}
            _ => bail!("{}: only JSON bodies can be tool arguments", endpoint.operation_id),
        }
        Ok(Self { endpoint: endpoint.clone(), arguments })
    }

    /// Whether `given` has every path parameter of this operation.
    fn addressed_by(&self, given: &JsonObject) -> bool {
        self.arguments.iter().filter(|(_, place, ..)| *place == Place::Path).all(|(name, ..)| given.contains_key(name))
    }

    /// The arguments as the endpoint's raw input.
    fn input(&self, arguments: &JsonObject) -> Result<RawInput, ServiceError> {
        let mut raw = RawInput::default();
        let mut body = Map::new();
        let mut unknown = Vec::new();
        for (name, value) in arguments {
            match self.arguments.iter().find(|(known, ..)| known == name).map(|(_, place, ..)| place) {
                Some(Place::Path) => {
                    raw.path.insert(name.clone(), value.clone());
                }
                Some(Place::Query) => {
                    raw.query.insert(name.clone(), value.clone());
                }
                Some(Place::Body) => {
                    body.insert(name.clone(), value.clone());
                }
                None => unknown.push(FieldViolation::new(name, "is not an argument of this tool")),
            }
        }
        if !unknown.is_empty() {
            return Err(ServiceError::validation(unknown));
        }
        if self.endpoint.body == BodyKind::Json {
            raw.body = Some(Value::Object(body));
        }
        Ok(raw)
    }
}

pub struct ToolEntry {
    name: &'static str,
    operations: Vec<Operation>,
}

impl ToolEntry {
    /// The endpoint the arguments address, and its input.
    pub fn pick(&self, arguments: &JsonObject) -> Result<(&Endpoint, RawInput), ServiceError> {
        let operation = self
            .operations
            .iter()
            .find(|operation| operation.addressed_by(arguments))
            .ok_or_else(|| ServiceError::validation(vec![self.missing_address()]))?;
        Ok((&operation.endpoint, operation.input(arguments)?))
    }

    /// What a call lacks when it gives none of its operations' path parameters.
    fn missing_address(&self) -> FieldViolation {
        let names: Vec<&str> = self
            .operations
            .iter()
            .filter_map(|operation| operation.arguments.iter().find(|(_, place, ..)| *place == Place::Path))
            .map(|(name, ..)| name.as_str())
            .collect();
        let message = if names.len() > 1 {
            format!("is required (or {})", names[1..].join(", "))
        } else {
            "is required".to_owned()
        };
        FieldViolation::new(names.first().copied().unwrap_or_default(), message)
    }

    /// The `tools/list` entry: the union of the operations' arguments, required where every
    /// operation requires them.
    fn describe(&self) -> Tool {
        let mut schema = Map::new();
        let mut properties = Map::new();
        let mut required: Vec<Value> = Vec::new();
        for operation in &self.operations {
            for (name, _, argument, _) in &operation.arguments {
                properties.entry(name.clone()).or_insert_with(|| argument.clone());
                let everywhere = self
                    .operations
                    .iter()
                    .all(|other| other.arguments.iter().any(|(known, _, _, needed)| known == name && *needed));
                if everywhere && !required.contains(&Value::from(name.as_str())) {
                    required.push(Value::from(name.as_str()));
                }
            }
        }
        schema.insert("type".to_owned(), json!("object"));
        schema.insert("properties".to_owned(), Value::Object(properties));
        schema.insert("required".to_owned(), Value::Array(required));
        let first = &self.operations[0].endpoint;
        let hints: Vec<ToolHints> = self
            .operations
            .iter()
            .filter_map(|operation| operation.endpoint.tool.as_ref().map(|t| t.annotations))
            .collect();
        let routes: Vec<String> = self
            .operations
            .iter()
            .map(|operation| format!("{} {}", operation.endpoint.method.as_str(), operation.endpoint.path))
            .collect();
        let description = first.tool.as_ref().map_or("", |tool| tool.description);
        Tool::new(self.name, format!("{description} (REST: {})", routes.join(" or ")), Arc::new(schema))
            .with_title(first.summary)
            .with_annotations(
                ToolAnnotations::new()
                    .read_only(hints.iter().all(|h| h.read_only))
                    .destructive(hints.iter().any(|h| h.destructive))
                    .idempotent(hints.iter().all(|h| h.idempotent))
                    .open_world(hints.iter().any(|h| h.open_world)),
            )
    }
}

pub struct Tools {
    tools: Vec<ToolEntry>,
    listing: Vec<Tool>,
    instructions: String,
}

impl Tools {
    pub fn build(endpoints: &[Endpoint]) -> anyhow::Result<Self> {
        let mut tools: Vec<ToolEntry> = Vec::new();
        for endpoint in endpoints {
            let Some(tool) = &endpoint.tool else {
                continue;
            };
            let operation = Operation::new(endpoint)?;
            match tools.iter_mut().find(|entry| entry.name == tool.name) {
                Some(entry) => entry.operations.push(operation),
                None => tools.push(ToolEntry { name: tool.name, operations: vec![operation] }),
            }
        }
        let listing = tools.iter().map(ToolEntry::describe).collect();
        Ok(Self { instructions: instructions(&tool_names(endpoints)), tools, listing })
    }

    pub fn listing(&self) -> Vec<Tool> {
        self.listing.clone()
    }

    pub fn find(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    pub fn instructions(&self) -> &str {
        &self.instructions
    }
}

/// The tool names, in the order their endpoints are declared.
pub fn tool_names(endpoints: &[Endpoint]) -> Vec<&'static str> {
    let mut names = Vec::new();
    for tool in endpoints.iter().filter_map(|endpoint| endpoint.tool.as_ref()) {
        if !names.contains(&tool.name) {
            names.push(tool.name);
        }
    }
    names
}

fn instructions(names: &[&str]) -> String {
    format!(
        "Tools of the Switchboard v1 API: {}. Call whoami first: it confirms the key and reports the team and its \
         credit balance. Find ids by listing (list_agents). search_knowledge costs 1 credit per search. Pass teamId \
         to act on a client subteam of an agency.",
        names.join(", ")
    )
}

/// The REST answer as a tool result: its JSON body as text and as structured content; an error
/// status makes it an error result the model can read and act on.
pub fn result(reply: Reply) -> CallToolResult {
    let failed = reply.status >= 400;
    let body = reply.json_body().unwrap_or(Value::Null);
    let text = serde_json::to_string(&body).unwrap_or_default();
    let mut result = if failed {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    if body.is_object() {
        result.structured_content = Some(body);
    }
    result
}

/// The MCP endpoint in the OpenAPI document, as far as HTTP goes; its tools are listed.
pub fn openapi_path(endpoints: &[Endpoint], error: &Value) -> Value {
    let message = json!({
        "type": "object",
        "required": ["jsonrpc", "method"],
        "properties": {
            "jsonrpc": { "const": "2.0" },
            "id": { "type": ["string", "integer"] },
            "method": { "type": "string", "examples": ["initialize", "tools/list", "tools/call", "ping"] },
            "params": { "type": "object" },
        },
    });
    let mut tools = Vec::new();
    for endpoint in endpoints {
        if let Some(tool) = &endpoint.tool {
            tools.push(format!("{} ({} {})", tool.name, endpoint.method.as_str(), endpoint.path));
        }
    }
    json!({
        "post": {
            "operationId": "mcp",
            "tags": ["Meta"],
            "summary": "MCP server: JSON-RPC 2.0 over Streamable HTTP",
            "description": format!(
                "initialize, ping, tools/list and tools/call. Tools and the operations they run: {}. Also served at \
                 `/mcp`, beside `/v1`. `Authorization: Bearer` and `X-API-Key` may both be sent only when they carry \
                 the same key.",
                tools.join(", ")
            ),
            "security": [{ "Bearer": [] }, { "ApiKey": [] }],
            "requestBody": { "required": true, "content": { "application/json": { "schema": message } } },
            "responses": {
                "200": {
                    "description": "The JSON-RPC answer: `result`, or `error` for an unknown method or tool.",
                    "content": { "application/json": { "schema": { "type": "object" } } },
                },
                "202": { "description": "A notification, accepted." },
                "400": { "description": "Unparsable JSON (-32700) or not a JSON-RPC request (-32600)." },
                "401": {
                    "description": "Missing, invalid or conflicting credentials; `WWW-Authenticate: Bearer`.",
                    "content": { "application/json": { "schema": error } },
                },
                "405": {
                    "description": "Not a POST: this server offers no event stream.",
                    "content": { "application/json": { "schema": error } },
                },
            },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(tools: &Tools, name: &str) -> Value {
        let tool = tools.listing().into_iter().find(|tool| tool.name == name).unwrap();
        serde_json::to_value(tool).unwrap()
    }

    #[test]
    fn the_spec_tools_have_self_contained_schemas_and_the_right_annotations() {
        let tools = Tools::build(&crate::api::endpoints()).unwrap();
        assert!(!serde_json::to_string(&tools.listing()).unwrap().contains("$ref"));
        assert_eq!(listed(&tools, "whoami")["annotations"]["readOnlyHint"], true);
        let update = listed(&tools, "update_agent_instructions");
        assert_eq!(update["annotations"]["destructiveHint"], true);
        assert_eq!(update["annotations"]["idempotentHint"], false, "each call adds a version");
        assert_eq!(update["inputSchema"]["required"], json!(["agentId", "instructions"]));
        // Reached through an agent or by id: neither is required alone, the query always is.
        let search = listed(&tools, "search_knowledge");
        assert_eq!(search["inputSchema"]["required"], json!(["query"]));
        assert_eq!(search["annotations"]["readOnlyHint"], true);
        for argument in ["agentId", "knowledgebaseId", "teamId", "limit", "threshold"] {
            assert!(search["inputSchema"]["properties"][argument].is_object(), "{argument}");
        }
        let add = listed(&tools, "add_knowledge_answer");
        assert_eq!(add["inputSchema"]["required"], json!(["question", "answer"]));
        assert_eq!(add["annotations"]["readOnlyHint"], false);
        let by_id: JsonObject = [("knowledgebaseId".to_owned(), json!("x"))].into_iter().collect();
        let (endpoint, _) = tools.find("search_knowledge").unwrap().pick(&by_id).unwrap();
        assert_eq!(endpoint.operation_id, "searchKnowledgebase");
    }
}
