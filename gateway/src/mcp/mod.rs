//! The hosted MCP server: JSON-RPC 2.0 over MCP's Streamable HTTP transport at `/mcp`.
//!
//! Every message is a POST answered with one JSON body; the server never pushes, so it offers no
//! event stream (GET is 405) and keeps no session. The key comes as `Authorization: Bearer`
//! (the spec) or `X-API-Key`. The tools are the spec's (`tools.rs`); a tool call runs its REST
//! operation through the same admission as a REST request (rate class, `teamId` scoping, access
//! checks) and the same handler, so a tool can do exactly what its operation can, no more.

pub mod tools;

use std::sync::Arc;

use pingora::http::RequestHeader;
use pingora::proxy::Session;
use serde_json::{Map, Value, json};
use switchboard_kit::{ErrorKind, FieldViolation, ServiceError};

use crate::app::{Admission, App, RequestCtx};
use crate::call::{HandlerResult, Principal, Reply};
use crate::routes::Body;
use crate::services::Services;
use tools::{Operation, Place, Tool};

pub const PATHS: [&str; 2] = ["/mcp", "/v1/mcp"];

/// Newest first; a client asking for another version gets the newest.
const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

const INSTRUCTIONS: &str = "Tools of the Switchboard v1 API: agents, their instructions and their knowledge. \
Call whoami first: it confirms the key and reports the team and its credit balance. Find agent ids \
with list_agents. search_knowledge costs 1 credit per search. Pass teamId to act on a client \
subteam of an agency.";

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

type RpcResult = Result<Value, (i64, String)>;

impl App {
    pub(crate) async fn mcp(&self, session: &mut Session, ctx: &mut RequestCtx) -> HandlerResult {
        let header = session.req_header();
        if header.method != http::Method::POST {
            let error = ServiceError::new(ErrorKind::MethodNotAllowed, "Method not allowed")
                .with_hint("Send JSON-RPC messages by POST; this server offers no event stream.");
            return Ok(Reply::error(&error).with_header("Allow", "POST".to_owned()));
        }
        let unauthorized =
            |error: ServiceError| Reply::error(&error).with_header("WWW-Authenticate", "Bearer".to_owned());
        let key = match presented_key(header) {
            Ok(key) => key,
            Err(error) => return Ok(unauthorized(error)),
        };
        let services = self.services().await?;
        let principal = match self.auth.authenticate(&services, Some(&key)).await {
            Ok(principal) => principal,
            Err(error) => return Ok(unauthorized(error)),
        };
        let message = match crate::body::read_json(session, self.config.max_body_bytes).await {
            Ok(Some(Value::Object(message))) => message,
            Ok(Some(_)) => return Ok(rpc_error(400, Value::Null, INVALID_REQUEST, "Send one JSON-RPC object")),
            Ok(None) => return Ok(rpc_error(400, Value::Null, INVALID_REQUEST, "Empty body")),
            Err(error) if error.kind == ErrorKind::MalformedJson => {
                return Ok(rpc_error(400, Value::Null, PARSE_ERROR, "Parse error"));
            }
            Err(error) => return Err(error),
        };
        let id = message.get("id").cloned();
        let method = message.get("method").and_then(Value::as_str);
        let (Some(id), Some(method)) = (id, method) else {
            // Notifications and the client's answers need no reply.
            return Ok(Reply::empty(202));
        };
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Ok(rpc_error(400, id, INVALID_REQUEST, "jsonrpc must be \"2.0\""));
        }
        let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
        let result = match method {
            "initialize" => Ok(initialize(&params)),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({ "tools": self.tools.listing() })),
            "tools/call" => self.call_tool(services, principal, &params, ctx).await,
            other => Err((METHOD_NOT_FOUND, format!("Method not found: {other}"))),
        };
        Ok(match result {
            Ok(result) => Reply::json(200, json!({ "jsonrpc": "2.0", "id": id, "result": result })),
            Err((code, message)) => rpc_error(200, id, code, &message),
        })
    }

    async fn call_tool(
        &self,
        services: Services,
        principal: Arc<Principal>,
        params: &Value,
        ctx: &mut RequestCtx,
    ) -> RpcResult {
        let name =
            params.get("name").and_then(Value::as_str).ok_or((INVALID_PARAMS, "tools/call needs a name".to_owned()))?;
        let tool = self.tools.find(name).ok_or_else(|| (INVALID_PARAMS, format!("Unknown tool: {name}")))?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(arguments)) => arguments.clone(),
            Some(_) => return Err((INVALID_PARAMS, "arguments must be an object".to_owned())),
        };
        let reply = match tool.operations.iter().find(|operation| operation.addressed_by(&arguments)) {
            Some(operation) => self
                .run_operation(operation, services, principal, arguments, ctx)
                .await
                .unwrap_or_else(|e| Reply::error(&e)),
            None => Reply::error(&ServiceError::validation(missing_address(tool))),
        };
        Ok(tool_result(reply))
    }

    /// Runs one of a tool's operations; the caller picked it because `arguments` give all of
    /// its path parameters.
    async fn run_operation(
        &self,
        operation: &Operation,
        services: Services,
        principal: Arc<Principal>,
        arguments: Map<String, Value>,
        ctx: &mut RequestCtx,
    ) -> HandlerResult {
        let route = &operation.route;
        let mut violations = Vec::new();
        let mut params: Vec<(&'static str, String)> = Vec::new();
        let mut query = Vec::new();
        let mut body = Map::new();
        for (name, value) in arguments {
            let Some((_, place)) = operation.arguments.iter().find(|(known, _)| *known == name) else {
                violations.push(FieldViolation::new(name, "is not an argument of this tool"));
                continue;
            };
            match place {
                Place::Body => {
                    body.insert(name, value);
                }
                Place::Path | Place::Query => match scalar(&value) {
                    Some(text) if *place == Place::Query => query.push((name, text)),
                    Some(text) => {
                        if let Some(segment) = path_parameter(route.path, &name) {
                            params.push((segment, text));
                        }
                    }
                    None => violations.push(FieldViolation::new(name, "must be a string or a number")),
                },
            }
        }
        if !violations.is_empty() {
            return Err(ServiceError::validation(violations));
        }

        let mut call = match self.admit(route, services, principal, params, query, ctx).await? {
            Admission::Continue(call) => call,
            Admission::Respond(reply) => return Ok(reply),
        };
        call.body = (route.body == Body::Json && operation.arguments.iter().any(|(_, place)| *place == Place::Body))
            .then_some(Value::Object(body));
        (route.handler)(*call).await
    }
}

/// What a tool call lacks when it gives none of its operations' path parameters.
fn missing_address(tool: &Tool) -> Vec<FieldViolation> {
    let mut names: Vec<&str> = Vec::new();
    for operation in &tool.operations {
        let path: Vec<&str> = operation
            .arguments
            .iter()
            .filter(|(_, place)| *place == Place::Path)
            .map(|(name, _)| name.as_str())
            .collect();
        names.push(path.first().copied().unwrap_or_default());
    }
    let message =
        if names.len() > 1 { format!("is required (or {})", names[1..].join(", ")) } else { "is required".to_owned() };
    vec![FieldViolation::new(names.first().copied().unwrap_or_default(), message)]
}

/// The route template's own `&'static str` for a parameter name, as the router gives it.
fn path_parameter(path: &'static str, name: &str) -> Option<&'static str> {
    path.split('/').filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).find(|s| *s == name)
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// The key of an MCP request: `Authorization: Bearer <key>` (the spec's way) or `X-API-Key`.
/// Both may come only when they carry the same key, and an `Authorization` header must be a
/// bearer key: a request whose credentials disagree is refused rather than guessed at.
fn presented_key(header: &RequestHeader) -> Result<String, ServiceError> {
    let unauthorized = |message: &str| {
        ServiceError::new(ErrorKind::Unauthorized, message)
            .with_hint("Send the API key as `Authorization: Bearer <API_KEY>`.")
    };
    let text = |name: &str| {
        header.headers.get(name).map(|value| value.to_str().map(str::trim).map_err(|_| unauthorized("Invalid API key")))
    };
    let bearer = match text("authorization").transpose()? {
        None => None,
        Some(value) => match value.split_once(' ') {
            Some((scheme, key)) if scheme.eq_ignore_ascii_case("bearer") && !key.trim().is_empty() => Some(key.trim()),
            _ => return Err(unauthorized("The Authorization header must be `Bearer <API key>`")),
        },
    };
    let api_key = text("x-api-key").transpose()?.filter(|key| !key.is_empty());
    match (bearer, api_key) {
        (Some(bearer), Some(api_key)) if bearer != api_key => {
            Err(unauthorized("Authorization: Bearer and X-API-Key carry different keys"))
        }
        (Some(key), _) | (None, Some(key)) => Ok(key.to_owned()),
        (None, None) => Err(unauthorized("Missing Authorization: Bearer header")),
    }
}

fn initialize(params: &Value) -> Value {
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    let version = requested.filter(|v| PROTOCOL_VERSIONS.contains(v)).unwrap_or(PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": { "name": "switchboard", "title": "Switchboard", "version": env!("CARGO_PKG_VERSION") },
        "instructions": INSTRUCTIONS,
    })
}

/// The REST answer as a tool result: its JSON body as text and as structured content; an error
/// status makes it an error result the model can read and act on.
fn tool_result(reply: Reply) -> Value {
    let text = serde_json::to_string(&reply.body).unwrap_or_default();
    let mut result = json!({
        "content": [{ "type": "text", "text": text }],
        "isError": reply.status >= 400,
    });
    if reply.body.is_object() {
        result["structuredContent"] = reply.body;
    }
    result
}

fn rpc_error(status: u16, id: Value, code: i64, message: &str) -> Reply {
    Reply::json(status, json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_keeps_a_known_version_and_offers_the_newest_otherwise() {
        assert_eq!(initialize(&json!({ "protocolVersion": "2025-03-26" }))["protocolVersion"], "2025-03-26");
        assert_eq!(initialize(&json!({ "protocolVersion": "1999-01-01" }))["protocolVersion"], PROTOCOL_VERSIONS[0]);
        assert_eq!(initialize(&json!({}))["capabilities"]["tools"]["listChanged"], false);
    }

    #[test]
    fn an_error_answer_is_an_error_result_with_the_body_as_text() {
        let result = tool_result(Reply::json(404, json!({ "error": "Agent not found", "code": "NOT_FOUND" })));
        assert_eq!(result["isError"], true);
        assert_eq!(result["structuredContent"]["code"], "NOT_FOUND");
        let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["error"], "Agent not found");
    }
}
