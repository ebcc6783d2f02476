//! The published OpenAPI 3.1 description and the skill file.
//!
//! Paths, methods, path parameters, security, rate classes, access features and the errors
//! every operation shares come from the route table, so the description cannot list a route
//! the gateway does not serve or miss one it does. What the table cannot know (query
//! parameters, request and response bodies, operation-specific errors) is written by hand in
//! `operations.json`; building fails when the two disagree, which the tests catch.

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::routes::{self, Body, Method, Route};

const OPERATIONS: &str = include_str!("operations.json");

/// The skill file in the Agent Skills format, served at `/v1/skill.md`.
pub const SKILL: &str = include_str!("skill.md");

/// Public paths that need no key, served at the root and under `/v1`.
pub const DOCUMENT_PATH: &str = "/openapi.json";
pub const SKILL_PATH: &str = "/skill.md";

/// The description, serialised once at start.
pub fn document_bytes() -> anyhow::Result<Bytes> {
    let document = sorted(document()?);
    let mut text = serde_json::to_string_pretty(&document).context("serialising the OpenAPI description")?;
    text.push('\n');
    Ok(Bytes::from(text))
}

/// What `operations.json` says: the operations by id, and the schemas they reference.
pub(crate) fn written() -> anyhow::Result<(Map<String, Value>, Map<String, Value>)> {
    let mut written: Value = serde_json::from_str(OPERATIONS).context("operations.json is not valid JSON")?;
    let Some(operations) = written.get_mut("operations").map(Value::take).and_then(into_object) else {
        bail!("operations.json lacks `operations`");
    };
    let Some(schemas) = written.get_mut("schemas").map(Value::take).and_then(into_object) else {
        bail!("operations.json lacks `schemas`");
    };
    Ok((operations, schemas))
}

fn into_object(value: Value) -> Option<Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

pub fn document() -> anyhow::Result<Value> {
    let (operations, mut schemas) = written()?;
    let operations = &operations;
    for shared in ["Error", "ValidationError", "RateLimitError"] {
        if !schemas.contains_key(shared) {
            bail!("operations.json lacks the shared schema {shared}");
        }
    }
    schemas.insert("Health".to_owned(), json!({ "type": "object", "properties": { "status": { "const": "ok" } } }));

    let table = routes::table();
    let mut paths = Map::new();
    for route in &table {
        let written = operations
            .get(route.operation_id)
            .ok_or_else(|| anyhow!("operations.json does not describe {}", route.operation_id))?;
        let operation = operation(route, written).with_context(|| format!("describing {}", route.operation_id))?;
        let path = route.path.strip_prefix("/v1").unwrap_or(route.path);
        let item = paths.entry(path.to_owned()).or_insert_with(|| json!({}));
        item[method_key(route.method)] = operation;
    }
    if let Some(extra) = operations.keys().find(|id| !table.iter().any(|route| route.operation_id == id.as_str())) {
        bail!("operations.json describes {extra}, which no route serves");
    }
    paths.insert("/openapi.json".to_owned(), public_get("getOpenApi", "This description.", "application/json", None));
    paths.insert(
        "/skill.md".to_owned(),
        public_get("getSkill", "The skill file (Agent Skills format).", "text/markdown", None),
    );
    paths.insert("/mcp".to_owned(), mcp_path());
    paths.insert(
        "/healthz".to_owned(),
        public_get(
            "getHealth",
            "Liveness of the gateway; also served at the root, `/healthz`, where probes look.",
            "application/json",
            Some(schema_ref("Health")),
        ),
    );
    let document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Switchboard API",
            // The version of the API description (the spec's), not of the binary.
            "version": "1.0.0",
            "summary": "Phone and chat AI agents, their instructions and knowledge bases.",
            "description": INFO_DESCRIPTION,
            "license": { "name": "Apache-2.0", "identifier": "Apache-2.0" },
        },
        "servers": [{ "url": "/v1", "description": "the gateway that serves this description" }],
        "security": [{ "ApiKey": [] }],
        "tags": tags(&table),
        "paths": paths,
        "components": {
            "securitySchemes": {
                "ApiKey": { "type": "apiKey", "in": "header", "name": "X-API-Key", "description": "A team's API key (`ew_...`)." },
                "Bearer": {
                    "type": "http", "scheme": "bearer",
                    "description": "The same API key as a bearer token; the MCP server's way in.",
                },
                "AgencyKey": {
                    "type": "apiKey", "in": "header", "name": "X-AGENCY-KEY",
                    "description": "Accepted on `/agency/...` as an alias of `X-API-Key`.",
                },
            },
            "schemas": schemas,
            "responses": shared_responses(),
        },
    });
    check_references(&document)?;
    Ok(document)
}

const INFO_DESCRIPTION: &str = "\
Every request carries a team's API key in `X-API-Key`. Answers are JSON: `{\"data\": ...}`, \
with a human `message` on writes and `pagination` on paged lists; errors are \
`{\"error\", \"code\", \"hint\"?, \"details\"?}`. Any operation accepts `teamId` to act on a client \
subteam of the key's agency; rate limits always count against the key's own team. Each \
operation belongs to a rate class (`x-rate-class`), and every answer carries `X-RateLimit-*` \
headers. Read-only keys are refused writes with 403; a subteam's access configuration can switch \
off features (`x-access-feature`). Knowledge-base searches cost credits.";

/// The same bytes whether or not serde_json keeps insertion order (a feature another crate of
/// the build may turn on), so that the committed copy can be compared byte for byte.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(key, value)| (key, sorted(value))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

fn method_key(method: Method) -> &'static str {
    match method {
        Method::Get => "get",
        Method::Post => "post",
        Method::Put => "put",
        Method::Patch => "patch",
        Method::Delete => "delete",
    }
}

fn tags(table: &[Route]) -> Vec<Value> {
    let mut names: Vec<&str> = Vec::new();
    for route in table {
        if !names.contains(&route.tag) {
            names.push(route.tag);
        }
    }
    names.into_iter().map(|name| json!({ "name": name })).collect()
}

fn operation(route: &Route, written: &Value) -> anyhow::Result<Value> {
    let mut parameters = path_parameters(route.path);
    parameters.push(json!({
        "name": "teamId", "in": "query", "required": false,
        "description": "Act on this client subteam of the key's agency.",
        "schema": { "type": "string", "format": "uuid" },
    }));
    for query in written.get("query").and_then(Value::as_array).into_iter().flatten() {
        let mut query = query.clone();
        query["in"] = json!("query");
        parameters.push(query);
    }

    let mut description = written.get("description").and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut rules = vec![format!("Rate class `{}`.", route.class.name())];
    if route.write {
        rules.push("Needs a full-access key.".to_owned());
    }
    if let Some(feature) = route.feature.filter(|f| !description.contains(&format!("`{}`", f.name()))) {
        rules.push(format!("A subteam needs the `{}` access.", feature.name()));
    }
    if !description.is_empty() {
        description.push_str("\n\n");
    }
    description.push_str(&rules.join(" "));

    let mut operation = json!({
        "operationId": route.operation_id,
        "tags": [route.tag],
        "summary": route.summary,
        "description": description,
        "parameters": parameters,
        "responses": responses(route, written)?,
        "x-rate-class": route.class.name(),
    });
    if let Some(feature) = route.feature {
        operation["x-access-feature"] = json!(feature.name());
    }
    if route.agency_key_header {
        operation["security"] = json!([{ "ApiKey": [] }, { "AgencyKey": [] }]);
    }
    match (route.body, written.get("request")) {
        (Body::None, None) => {}
        (Body::Json | Body::Multipart, Some(request)) => {
            let content_type =
                request.get("contentType").and_then(Value::as_str).context("request without contentType")?;
            let expected = if route.body == Body::Multipart { "multipart/form-data" } else { "application/json" };
            if content_type != expected {
                bail!("the route reads {expected}, operations.json says {content_type}");
            }
            let schema = request.get("schema").and_then(Value::as_str).context("request without schema")?;
            operation["requestBody"] = json!({
                "required": true,
                "content": { content_type: { "schema": schema_ref(schema) } },
            });
        }
        // Some writes (refresh, restore) take no body although the route accepts JSON.
        (Body::Json, None) => {}
        (Body::Multipart, None) | (Body::None, Some(_)) => {
            bail!("the route's body and operations.json's request disagree")
        }
    }
    Ok(operation)
}

fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| {
            let schema = if name.ends_with("Id") {
                json!({ "type": "string", "format": "uuid" })
            } else {
                json!({ "type": "integer", "minimum": 1 })
            };
            json!({ "name": name, "in": "path", "required": true, "schema": schema })
        })
        .collect()
}

/// The written responses, then the errors every operation can give.
fn responses(route: &Route, written: &Value) -> anyhow::Result<Value> {
    let mut responses = Map::new();
    let written = written.get("responses").and_then(Value::as_object).context("no responses")?;
    if !written.keys().any(|status| status.starts_with('2')) {
        bail!("no success response");
    }
    for (status, response) in written {
        let description = response.get("description").and_then(Value::as_str).unwrap_or("");
        let schema = match response.get("schema").and_then(Value::as_str) {
            Some(schema) => schema.to_owned(),
            None if status.starts_with('2') => {
                responses.insert(status.clone(), json!({ "description": description }));
                continue;
            }
            None => error_schema(status).to_owned(),
        };
        responses.insert(status.clone(), json_answer(status, description, &schema));
    }
    let has_ids = route.path.contains('{');
    for (status, name, _, _) in SHARED_RESPONSES {
        if (status != "404" || has_ids) && !responses.contains_key(status) {
            responses.insert(status.to_owned(), json!({ "$ref": format!("#/components/responses/{name}") }));
        }
    }
    Ok(Value::Object(responses))
}

/// `(status, name, description, schema)` of the answers every operation can give.
const SHARED_RESPONSES: [(&str, &str, &str, &str); 7] = [
    (
        "400",
        "BadRequest",
        "Invalid input: malformed JSON, a missing field, a wrong type, a value out of range.",
        "ValidationError",
    ),
    ("401", "Unauthorized", "Missing or invalid API key.", "Error"),
    (
        "403",
        "Forbidden",
        "The key may not do this (read-only key, or a feature switched off for the subteam).",
        "Error",
    ),
    ("404", "NotFound", "Not found for this team.", "Error"),
    ("429", "TooManyRequests", "Rate limit exceeded.", "RateLimitError"),
    ("500", "InternalError", "Unexpected server error.", "Error"),
    (
        "503",
        "Unavailable",
        "A backing service (a database, the index, file storage) is unavailable; retry later.",
        "Error",
    ),
];

fn shared_responses() -> Value {
    let mut responses = Map::new();
    for (status, name, description, schema) in SHARED_RESPONSES {
        responses.insert(name.to_owned(), json_answer(status, description, schema));
    }
    Value::Object(responses)
}

/// An answer with a JSON body; a 429 also names the headers every 429 carries.
fn json_answer(status: &str, description: &str, schema: &str) -> Value {
    let mut answer = json!({
        "description": description,
        "content": { "application/json": { "schema": schema_ref(schema) } },
    });
    if status == "429" {
        answer["headers"] = json!({
            "Retry-After": { "schema": { "type": "integer" }, "description": "Seconds to wait." },
            "X-RateLimit-Limit": { "schema": { "type": "integer" } },
            "X-RateLimit-Remaining": { "schema": { "type": "integer" } },
            "X-RateLimit-Reset": { "schema": { "type": "integer" }, "description": "Unix time in seconds." },
        });
    }
    answer
}

/// The body of an error with this status: the shared answer's, else the plain envelope.
fn error_schema(status: &str) -> &'static str {
    SHARED_RESPONSES.iter().find(|shared| shared.0 == status).map_or("Error", |shared| shared.3)
}

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn public_get(operation_id: &str, summary: &str, content_type: &str, schema: Option<Value>) -> Value {
    let schema = schema.unwrap_or_else(|| json!({ "type": "string" }));
    json!({
        "get": {
            "operationId": operation_id,
            "tags": ["Meta"],
            "summary": summary,
            "security": [],
            "responses": { "200": { "description": summary, "content": { content_type: { "schema": schema } } } },
        }
    })
}

/// The MCP endpoint, described as far as HTTP goes; its tools are the operations above.
fn mcp_path() -> Value {
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
    json!({
        "post": {
            "operationId": "mcp",
            "tags": ["Meta"],
            "summary": "MCP server: JSON-RPC 2.0 over Streamable HTTP",
            "description": "initialize, ping, tools/list and tools/call. Tools: whoami, list_agents, \
                get_agent_instructions, update_agent_instructions, search_knowledge, add_knowledge_answer; each \
                runs the REST operation it names in its description. Also served at `/mcp`, beside `/v1`.",
            "security": [{ "Bearer": [] }, { "ApiKey": [] }],
            "requestBody": { "required": true, "content": { "application/json": { "schema": message } } },
            "responses": {
                "200": {
                    "description": "The JSON-RPC answer: `result`, or `error` for an unknown method or tool.",
                    "content": { "application/json": { "schema": { "type": "object" } } },
                },
                "202": { "description": "A notification, accepted." },
                "400": { "description": "Unparsable JSON (-32700) or not a JSON-RPC request (-32600)." },
                "401": { "$ref": "#/components/responses/Unauthorized" },
            },
        }
    })
}

/// Every `$ref` names a schema or a response that exists.
fn check_references(document: &Value) -> anyhow::Result<()> {
    let components = &document["components"];
    let mut pending = vec![document];
    while let Some(value) = pending.pop() {
        match value {
            Value::Object(map) => {
                if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                    let mut parts = reference.strip_prefix("#/components/").unwrap_or_default().split('/');
                    let (Some(kind), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
                        bail!("unexpected reference {reference}");
                    };
                    if components[kind].get(name).is_none() {
                        bail!("{reference} names nothing");
                    }
                }
                pending.extend(map.values());
            }
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_described_and_every_reference_resolves() {
        let document = document().unwrap();
        assert_eq!(document["openapi"], "3.1.0");
        for route in routes::table() {
            let path = route.path.strip_prefix("/v1").unwrap();
            let operation = &document["paths"][path][method_key(route.method)];
            assert_eq!(operation["operationId"], route.operation_id, "{path}");
            assert!(operation["responses"].as_object().unwrap().keys().any(|s| s.starts_with('2')), "{path}");
        }
    }

    #[test]
    fn the_committed_copy_is_current() {
        let committed = include_str!("../../../docs/openapi.json");
        let generated = document_bytes().unwrap();
        assert!(
            committed.as_bytes() == generated.as_ref(),
            "docs/openapi.json is stale: run `cargo run -- openapi > docs/openapi.json`"
        );
    }

    #[test]
    fn the_skill_file_has_its_front_matter() {
        let front = SKILL.strip_prefix("---\n").unwrap().split("\n---\n").next().unwrap();
        for key in ["name:", "description:", "version:", "last_updated:"] {
            assert!(front.lines().any(|line| line.starts_with(key)), "{key}");
        }
    }
}
