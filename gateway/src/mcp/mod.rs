//! The hosted MCP server: JSON-RPC 2.0 over MCP's Streamable HTTP transport at `/mcp`.
//!
//! Messages are parsed into and answered with the protocol types of rmcp, the official Rust
//! SDK, so the protocol surface follows the SDK as MCP revisions land; the transport is the
//! gateway's own. Every message is a POST answered with one JSON body: the server never pushes,
//! so it offers no event stream (GET is 405) and keeps no session, and any gateway replica
//! answers. The key comes as `Authorization: Bearer` (the spec) or `X-API-Key`. The tools are
//! the endpoints that declare one (`tools.rs`); a tool call runs its endpoint through the same
//! admission as a REST request (rate class, `teamId` scoping, access checks) and the same input
//! checks and handler, so a tool can do exactly what its operation can, no more.

mod tools;

use std::sync::Arc;

use pingora::http::RequestHeader;
use pingora::proxy::Session;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, Implementation, InitializeResult,
    JsonRpcMessage, ListToolsResult, ProtocolVersion, RequestId, ServerCapabilities, ServerJsonRpcMessage,
    ServerResult, ToolsCapability,
};
use serde_json::{Value, json};
use switchboard_kit::{ErrorKind, ServiceError};

use crate::limits::Decision;
use crate::origin::Client;
use crate::pipeline::{Admit, Pipeline};
use crate::principal::Principal;
use crate::reply::{HandlerResult, Reply};
use crate::services::Services;

pub use tools::{Tools, openapi_path, tool_names};

pub const PATHS: [&str; 2] = ["/mcp", "/v1/mcp"];

/// The newest revision this server speaks that still begins with `initialize`.
const NEWEST: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The revisions a client may ask for; any other gets [`NEWEST`].
const SUPPORTED: [ProtocolVersion; 4] = [
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2024_11_05,
];

/// The methods this server answers; a known method whose params do not parse is `-32602`.
const KNOWN_METHODS: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];

/// The MCP transport over the admission pipeline.
pub struct Server {
    tools: Tools,
    max_body_bytes: usize,
}

impl Server {
    pub fn new(tools: Tools, max_body_bytes: usize) -> Self {
        Self { tools, max_body_bytes }
    }

    pub(crate) async fn serve(
        &self,
        pipeline: &Pipeline,
        session: &mut Session,
        decision: &mut Option<Decision>,
    ) -> HandlerResult {
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
        let services = pipeline.services().await?;
        let principal = match pipeline.auth.authenticate(&services, Some(&key)).await {
            Ok(principal) => principal,
            Err(error) => return Ok(unauthorized(error)),
        };
        let client = pipeline.origins.client(session);
        let message = match crate::body::read_json(session, self.max_body_bytes).await {
            Ok(Some(message)) => message,
            Ok(None) => return Ok(rpc_error(400, None, ErrorData::invalid_request("Empty body", None))),
            Err(error) if error.kind == ErrorKind::MalformedJson => {
                return Ok(rpc_error(400, None, ErrorData::parse_error("Parse error", None)));
            }
            Err(error) => return Err(error),
        };
        let id_hint = message.get("id").and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
        let (id, request) = match serde_json::from_value::<ClientJsonRpcMessage>(message) {
            Ok(JsonRpcMessage::Request(request)) => (request.id, request.request),
            // Notifications and the client's answers need no reply.
            Ok(_) => return Ok(Reply::empty(202)),
            Err(error) => {
                let error = ErrorData::invalid_request(format!("Not a JSON-RPC 2.0 message: {error}"), None);
                return Ok(rpc_error(400, id_hint, error));
            }
        };
        let answered = match request {
            ClientRequest::InitializeRequest(request) => {
                Ok(initialize(&request.params.protocol_version, self.tools.instructions()))
            }
            ClientRequest::PingRequest(_) => Ok(ServerResult::empty(())),
            ClientRequest::ListToolsRequest(_) => Ok(ListToolsResult::with_all_items(self.tools.listing()).into()),
            ClientRequest::CallToolRequest(request) => {
                let caller = Caller { pipeline, principal, services, client };
                self.call_tool(caller, request.params, decision).await
            }
            ClientRequest::CustomRequest(request) if KNOWN_METHODS.contains(&request.method.as_str()) => {
                Err(ErrorData::invalid_params(format!("Invalid params for {}", request.method), None))
            }
            other => {
                Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, format!("Method not found: {}", other.method()), None))
            }
        };
        Ok(match answered {
            Ok(mut result) => {
                // Fields of revisions after the ones served would confuse their clients.
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
                let answer = ServerJsonRpcMessage::response(result, id);
                Reply::json(200, serde_json::to_value(answer).unwrap_or(Value::Null))
            }
            Err(error) => rpc_error(200, Some(id), error),
        })
    }

    async fn call_tool(
        &self,
        caller: Caller<'_>,
        params: CallToolRequestParams,
        decision: &mut Option<Decision>,
    ) -> Result<ServerResult, ErrorData> {
        let tool = self
            .tools
            .find(&params.name)
            .ok_or_else(|| ErrorData::invalid_params(format!("Unknown tool: {}", params.name), None))?;
        let arguments = params.arguments.unwrap_or_default();
        let reply = match tool.pick(&arguments) {
            Ok((endpoint, raw)) => {
                let team_id = raw.query.get("teamId").and_then(Value::as_str).map(str::to_owned);
                let request = Admit {
                    route: endpoint,
                    services: caller.services,
                    principal: caller.principal,
                    team_id,
                    client: caller.client,
                    session_token: None,
                    sso_binding: None,
                };
                caller.pipeline.admit_and_run(request, raw, decision).await.unwrap_or_else(|error| Reply::error(&error))
            }
            Err(error) => Reply::error(&error),
        };
        Ok(tools::result(reply).into())
    }
}

/// Who calls a tool, as the MCP request's key proved.
struct Caller<'a> {
    pipeline: &'a Pipeline,
    principal: Arc<Principal>,
    services: Arc<Services>,
    client: Client,
}

/// The answer to `initialize`: the client's revision when this server speaks it, else the newest.
fn initialize(requested: &ProtocolVersion, instructions: &str) -> ServerResult {
    let version = SUPPORTED.iter().find(|known| *known == requested).cloned().unwrap_or(NEWEST);
    let mut capabilities = ServerCapabilities::default();
    let mut tools = ToolsCapability::default();
    tools.list_changed = Some(false);
    capabilities.tools = Some(tools);
    InitializeResult::new(capabilities)
        .with_protocol_version(version)
        .with_server_info(Implementation::new("switchboard", env!("CARGO_PKG_VERSION")).with_title("Switchboard"))
        .with_instructions(instructions.to_owned())
        .into()
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

/// A JSON-RPC error; JSON-RPC 2.0 wants `"id": null` when the request's id is unknown.
fn rpc_error(status: u16, id: Option<RequestId>, error: ErrorData) -> Reply {
    let id = id.map_or(Value::Null, |id| serde_json::to_value(id).unwrap_or(Value::Null));
    Reply::json(status, json!({ "jsonrpc": "2.0", "id": id, "error": error }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiated(requested: &str) -> Value {
        let requested: ProtocolVersion = serde_json::from_value(json!(requested)).unwrap();
        serde_json::to_value(initialize(&requested, "Call whoami first.")).unwrap()
    }

    #[test]
    fn initialize_keeps_a_known_version_and_offers_the_newest_otherwise() {
        assert_eq!(negotiated("2025-03-26")["protocolVersion"], "2025-03-26");
        assert_eq!(negotiated("1999-01-01")["protocolVersion"], NEWEST.to_string());
        let answer = negotiated("2025-06-18");
        assert_eq!(answer["capabilities"]["tools"]["listChanged"], false);
        assert_eq!(answer["serverInfo"]["name"], "switchboard");
    }
}
