//! The published OpenAPI 3.1 description and the skill file, both read off the endpoints.
//!
//! Paths, methods, parameters, bodies, answers, rate classes, access features and errors all
//! come from the endpoint declarations and the Rust types of their inputs and answers, so the
//! description cannot list a route the gateway does not serve, miss one it does, or describe a
//! field other than the one sent.

mod skill;

use anyhow::{Context, bail};
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::endpoint::schema::{Generators, is_required, properties};
use crate::endpoint::{BodyKind, Endpoint};
use switchboard_api::errors::{ErrorBody, RateLimitBody};

pub use skill::skill;

/// Public paths that need no key, served at the root and under `/v1`.
pub const DOCUMENT_PATH: &str = "/openapi.json";
pub const SKILL_PATH: &str = "/skill.md";

/// The description, serialised once at start.
pub fn document_bytes() -> anyhow::Result<Bytes> {
    let document = sorted(document(&crate::api::endpoints())?);
    let mut text = serde_json::to_string_pretty(&document).context("serialising the OpenAPI description")?;
    text.push('\n');
    Ok(Bytes::from(text))
}

pub fn document(endpoints: &[Endpoint]) -> anyhow::Result<Value> {
    let mut generators = Generators::default();
    let error = generators.answer::<ErrorBody>();
    let rate_limited = generators.answer::<RateLimitBody>();
    let errors = ErrorRefs { error: Value::from(error), rate_limited: Value::from(rate_limited) };

    let mut paths = Map::new();
    for endpoint in endpoints {
        let operation = operation(endpoint, endpoints, &mut generators, &errors)
            .with_context(|| format!("describing {}", endpoint.operation_id))?;
        let path = endpoint.path.strip_prefix("/v1").unwrap_or(endpoint.path);
        let item = paths.entry(path.to_owned()).or_insert_with(|| json!({}));
        if item.get(endpoint.method.key()).is_some() {
            bail!("{} {} is declared twice", endpoint.method.as_str(), endpoint.path);
        }
        item[endpoint.method.key()] = operation;
    }
    let mut ids: Vec<&str> = endpoints.iter().map(|endpoint| endpoint.operation_id).collect();
    ids.sort_unstable();
    if let Some(twice) = ids.windows(2).find(|pair| pair[0] == pair[1]) {
        bail!("the operation id {} is used twice", twice[0]);
    }
    let mut schemas = generators.into_components()?;
    schemas.insert(
        "Health".to_owned(),
        json!({ "type": "object", "properties": { "status": { "const": "ok" } }, "required": ["status"], "additionalProperties": false }),
    );
    paths.insert(
        "/openapi.json".to_owned(),
        public_get("getOpenApi", "This description.", "application/json", Some(json!({ "type": "object" }))),
    );
    paths.insert(
        "/skill.md".to_owned(),
        public_get("getSkill", "The skill file (Agent Skills format).", "text/markdown", None),
    );
    paths.insert("/mcp".to_owned(), crate::mcp::openapi_path(endpoints, &errors.error));
    paths.insert("/calls/{callId}/recording".to_owned(), crate::playback::openapi_path(&errors.error));
    paths.insert(
        "/healthz".to_owned(),
        public_get(
            "getHealth",
            "Liveness of the gateway; also served at the root, `/healthz`, where probes look.",
            "application/json",
            Some(json!({ "$ref": "#/components/schemas/Health" })),
        ),
    );
    let mut ready = public_get(
        "getReadiness",
        "Readiness of the gateway: 503 while it drains before stopping (`SWITCHBOARD_DRAIN_SECONDS`), \
         so that a load balancer stops sending to it; also served at the root, `/readyz`.",
        "application/json",
        Some(json!({ "$ref": "#/components/schemas/Health" })),
    );
    ready["get"]["responses"]["503"] = json!({
        "description": "The gateway is draining.",
        "content": { "application/json": { "schema": errors.error.clone() } },
    });
    paths.insert("/readyz".to_owned(), ready);
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
        "security": [{ "ApiKey": [] }, { "Session": [] }],
        "tags": tags(endpoints),
        "paths": paths,
        "components": {
            "securitySchemes": {
                "ApiKey": { "type": "apiKey", "in": "header", "name": "X-API-Key", "description": "A team's API key (`ew_...`)." },
                "Bearer": {
                    "type": "http", "scheme": "bearer",
                    "description": "The same API key as a bearer token; the MCP server's way in.",
                },
                "Session": {
                    "type": "apiKey", "in": "cookie", "name": "switchboard_session",
                    "description": "A signed-in person's session (`POST /auth/sign-in`); its writes also need `X-CSRF-Token`.",
                },
                "AgencyKey": {
                    "type": "apiKey", "in": "header", "name": "X-AGENCY-KEY",
                    "description": "Accepted on `/agency/...` as an alias of `X-API-Key`.",
                },
            },
            "schemas": schemas,
            "responses": shared_responses(&errors),
        },
    });
    check_references(&document)?;
    Ok(document)
}

const INFO_DESCRIPTION: &str = "\
Every request carries a team's API key in `X-API-Key`, or the session cookie of a person signed \
in through `/auth` (whose writes also send `X-CSRF-Token`). Answers are JSON: `{\"data\": ...}`, \
with a human `message` on writes and `pagination` on paged lists; errors are \
`{\"error\", \"code\", \"hint\"?, \"details\"?}`. Any operation accepts `teamId` to act on a client \
subteam of the key's agency; rate limits always count against the key's own team. Each \
operation belongs to a rate class (`x-rate-class`), and every answer carries `X-RateLimit-*` \
headers. Read-only keys are refused writes with 403; a subteam's access configuration can switch \
off features (`x-access-feature`). Knowledge-base searches cost credits. Any write may carry \
an `Idempotency-Key` header to make retries safe. Every answer schema is \
closed: a member not described is never sent.";

/// References to the error schemas.
pub struct ErrorRefs {
    pub error: Value,
    pub rate_limited: Value,
}

/// The same bytes whether or not serde_json keeps insertion order, so that the committed copy can
/// be compared byte for byte.
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

fn tags(endpoints: &[Endpoint]) -> Vec<Value> {
    let mut names: Vec<&str> = Vec::new();
    for endpoint in endpoints {
        if !names.contains(&endpoint.tag) {
            names.push(endpoint.tag);
        }
    }
    names.into_iter().map(|name| json!({ "name": name })).collect()
}

/// A parameter from a property of a path or query type.
fn parameter(name: &str, location: &str, schema: &Value, required: bool) -> Value {
    let mut schema = schema.clone();
    let description = schema.as_object_mut().and_then(|object| object.remove("description"));
    let mut parameter = json!({ "name": name, "in": location, "required": required, "schema": schema });
    if let Some(description) = description {
        parameter["description"] = description;
    }
    parameter
}

fn operation(
    endpoint: &Endpoint,
    endpoints: &[Endpoint],
    generators: &mut Generators,
    errors: &ErrorRefs,
) -> anyhow::Result<Value> {
    let inputs = &endpoint.inputs;
    let mut parameters = Vec::new();
    let declared: Vec<&str> = properties(&inputs.path).map(|(name, _)| name.as_str()).collect();
    let in_path: Vec<&str> = endpoint.path_parameters().collect();
    if declared != in_path {
        bail!("the path names {in_path:?}, its type {declared:?}");
    }
    for (name, schema) in properties(&inputs.path) {
        parameters.push(parameter(name, "path", schema, true));
    }
    if !endpoint.visitor {
        parameters.push(json!({
            "name": "teamId", "in": "query", "required": false,
            "description": "Act on this client subteam of the key's agency.",
            "schema": { "type": "string", "format": "uuid" },
        }));
    }
    for (name, schema) in properties(&inputs.query) {
        parameters.push(parameter(name, "query", schema, is_required(&inputs.query, name)));
    }
    if endpoint.keeps_idempotent_answers() {
        parameters.push(json!({
            "name": "Idempotency-Key", "in": "header", "required": false,
            "description": "Makes a retry safe: the first answer (status and body) to a request with this key is kept for \
                24 hours per caller (the API key, or the signed-in person), and a repeat by the same caller with the \
                same method, path and body gets it again, with `Idempotent-Replayed: true`, without doing the work, \
                counting against the rate limit or charging credits. Access is checked before a repeat is answered. \
                The same key with another request is 422 `IDEMPOTENCY_KEY_REUSED`; while the first request is being \
                answered, 409 `IDEMPOTENCY_KEY_IN_USE`. Answers 5xx and 429 are not kept. An answer that showed a \
                secret once (a new API key, a webhook secret, an invitation link) is not kept either: its repeat is \
                409 `IDEMPOTENCY_SECRET_SHOWN`.",
            "schema": { "type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7E]*[\\x21-\\x7E][\\x20-\\x7E]*$" },
        }));
    }

    let mut rules = vec![format!("Rate class `{}`.", endpoint.class.name())];
    if endpoint.visitor {
        rules.push("Needs no credential; limited per client address.".to_owned());
    }
    if endpoint.own_account {
        rules.push("Needs the session cookie of a signed-in person, of any role; an API key gets 401.".to_owned());
    } else if endpoint.write && !endpoint.visitor {
        rules.push("Needs a full-access key, or a signed-in role that writes (not `viewer`).".to_owned());
    }
    if endpoint.recent_sign_in {
        rules.push(
            "Only within a few minutes (5 by default) of the session's sign-in or its last `POST \
             /v1/auth/reauthenticate`; else 403 `REAUTHENTICATION_REQUIRED`."
                .to_owned(),
        );
    }
    if endpoint.admins_only {
        rules.push("Signed in: owners and admins only.".to_owned());
    }
    if let Some(feature) = endpoint.feature {
        rules.push(format!("A subteam's own keys need the `{}` access feature.", feature.name()));
    }
    if endpoint.spends_credits && endpoint.method == crate::endpoint::Method::Get {
        rules.push(
            "Signed in by the session cookie, it needs `X-CSRF-Token` like a write: it spends credits.".to_owned(),
        );
    }
    let description = [endpoint.description, &rules.join(" ")]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");

    let described = endpoint.describe(generators);
    let mut operation = json!({
        "operationId": endpoint.operation_id,
        "tags": [endpoint.tag],
        "summary": endpoint.summary,
        "description": description,
        "parameters": parameters,
        "responses": responses(endpoint, (described.status, described.media_type), Value::from(described.answer), links(endpoint, endpoints), errors)?,
        "x-rate-class": endpoint.class.name(),
    });
    for also in &endpoint.also_answers {
        let schema = Value::from((also.schema)(generators));
        let answer =
            json!({ "description": also.description, "content": { "application/json": { "schema": schema } } });
        operation["responses"][also.status.to_string()] = answer;
    }
    if let Some(feature) = endpoint.feature {
        operation["x-access-feature"] = json!(feature.name());
    }
    if let Some(tool) = &endpoint.tool {
        operation["x-mcp-tool"] = json!(tool.name);
    }
    if let Some(action) = endpoint.audit {
        operation["x-audit-action"] = json!(action.as_str());
    }
    if endpoint.changes_nothing {
        // A POST that writes nothing of the team's: no audit entry is due.
        operation["x-changes-nothing"] = json!(true);
    }
    if endpoint.agency_key_header {
        operation["security"] = json!([{ "ApiKey": [] }, { "AgencyKey": [] }, { "Session": [] }]);
    }
    if endpoint.visitor {
        operation["security"] = json!([]);
    }
    if let Some(request) = described.request {
        let content_type = match endpoint.body {
            BodyKind::Multipart => "multipart/form-data",
            BodyKind::Json | BodyKind::None => "application/json",
        };
        let mut media = json!({ "schema": request });
        if endpoint.body == BodyKind::Multipart {
            media["encoding"] = json!({ "file": { "contentType": crate::endpoint::input::UPLOAD_CONTENT_TYPES } });
        }
        operation["requestBody"] = json!({ "required": true, "content": { content_type: media } });
    }
    Ok(operation)
}

/// The OpenAPI links of an operation's answer: for each path parameter it gives (an id it
/// created or listed), every other operation that takes that parameter and otherwise only
/// parameters of this operation's own path, which the link passes on from the request.
fn links(source: &Endpoint, endpoints: &[Endpoint]) -> Map<String, Value> {
    let known: Vec<&str> = source.path_parameters().collect();
    let mut links = Map::new();
    for given in &source.gives {
        for target in endpoints {
            let needed: Vec<&str> = target.path_parameters().collect();
            let reachable = needed.contains(&given.parameter)
                && needed.iter().all(|name| *name == given.parameter || known.contains(name));
            if !reachable || std::ptr::eq(target, source) {
                continue;
            }
            let parameters: Map<String, Value> = needed
                .iter()
                .map(|name| {
                    let value = if *name == given.parameter {
                        format!("$response.body#{}", given.pointer)
                    } else {
                        format!("$request.path.{name}")
                    };
                    ((*name).to_owned(), Value::from(value))
                })
                .collect();
            links.insert(
                target.operation_id.to_owned(),
                json!({ "operationId": target.operation_id, "parameters": parameters }),
            );
        }
    }
    links
}

/// The answer, the operation's own errors, then the errors every operation can give.
fn responses(
    endpoint: &Endpoint,
    (status, media_type): (u16, &str),
    answer: Value,
    links: Map<String, Value>,
    errors: &ErrorRefs,
) -> anyhow::Result<Value> {
    let mut responses = Map::new();
    let summary = if status == 201 { "Created." } else { "Done." };
    let mut success = json!({ "description": summary, "content": { media_type: { "schema": answer } } });
    if !links.is_empty() {
        success["links"] = Value::Object(links);
    }
    responses.insert(status.to_string(), success);
    let mut failures = endpoint.failures.clone();
    if endpoint.body == BodyKind::Json {
        failures.push(crate::endpoint::Failure {
            status: 413,
            description: "The JSON body is larger than the gateway's limit (2 MiB by default, `SWITCHBOARD_MAX_BODY_BYTES`).",
        });
    }
    if endpoint.keeps_idempotent_answers() {
        failures.push(crate::endpoint::Failure {
            status: 409,
            description: "IDEMPOTENCY_KEY_IN_USE: a request with the same `Idempotency-Key` is still being answered.",
        });
        if endpoint.shows_secret {
            failures.push(crate::endpoint::Failure {
                status: 409,
                description: "IDEMPOTENCY_SECRET_SHOWN: a repeat of a request with this `Idempotency-Key` whose \
                    answer showed a secret once; the secret is not shown again.",
            });
        }
        failures.push(crate::endpoint::Failure {
            status: 422,
            description: "IDEMPOTENCY_KEY_REUSED: the `Idempotency-Key` was used with another method, path or body.",
        });
    }
    if endpoint.recent_sign_in {
        failures.push(crate::endpoint::Failure {
            status: 403,
            description: "REAUTHENTICATION_REQUIRED: the session has not proved who its person is in the last few \
                minutes; POST /v1/auth/reauthenticate, then send the request again.",
        });
    }
    if endpoint.body != BodyKind::Multipart && endpoint.method != crate::endpoint::Method::Get {
        failures.push(crate::endpoint::Failure {
            status: 415,
            description: "A non-empty body whose Content-Type is not application/json (or another `+json` type).",
        });
    }
    // Failures of one status are one response, their descriptions joined in declaration order.
    let mut by_status: Vec<(u16, Vec<&str>)> = Vec::new();
    for failure in &failures {
        match by_status.iter_mut().find(|(status, _)| *status == failure.status) {
            Some((_, descriptions)) => descriptions.push(failure.description),
            None => by_status.push((failure.status, vec![failure.description])),
        }
    }
    for (status, descriptions) in by_status {
        let key = status.to_string();
        if responses.contains_key(&key) {
            continue;
        }
        let schema = if status == 429 {
            json!({ "anyOf": [errors.error.clone(), errors.rate_limited.clone()] })
        } else {
            errors.error.clone()
        };
        responses.insert(key, json_answer(status, &descriptions.join(" "), schema));
    }
    // 404 too: an operation without ids still answers it once the team (the key's, or
    // `teamId`'s) has been deleted.
    for (status, name, _) in SHARED_RESPONSES {
        // A visitor's operation has no credential to refuse, and no team to lose.
        if endpoint.visitor && matches!(status, 401 | 403 | 404) {
            continue;
        }
        if !responses.contains_key(&status.to_string()) {
            responses.insert(status.to_string(), json!({ "$ref": format!("#/components/responses/{name}") }));
        }
    }
    Ok(Value::Object(responses))
}

/// `(status, name, description)` of the answers every operation can give.
const SHARED_RESPONSES: [(u16, &str, &str); 7] = [
    (400, "BadRequest", "Invalid input: malformed JSON, a missing field, a wrong type, a value out of range."),
    (401, "Unauthorized", "Missing or invalid API key."),
    (403, "Forbidden", "The key may not do this (read-only key, or a feature switched off for the subteam)."),
    (404, "NotFound", "Not found for this team; on any operation, `Team not found` once the team has been deleted."),
    (429, "TooManyRequests", "Rate limit exceeded."),
    (500, "InternalError", "Unexpected server error."),
    (503, "Unavailable", "A backing service (a database, the index, file storage) is unavailable; retry later."),
];

fn shared_responses(errors: &ErrorRefs) -> Value {
    let mut responses = Map::new();
    for (status, name, description) in SHARED_RESPONSES {
        let schema = if status == 429 { errors.rate_limited.clone() } else { errors.error.clone() };
        responses.insert(name.to_owned(), json_answer(status, description, schema));
    }
    Value::Object(responses)
}

/// An error answer with a JSON body; a 429 also names the headers every 429 carries.
fn json_answer(status: u16, description: &str, schema: Value) -> Value {
    let mut answer = json!({
        "description": description,
        "content": { "application/json": { "schema": schema } },
    });
    if status == 429 {
        answer["headers"] = json!({
            "Retry-After": { "schema": { "type": "integer" }, "description": "Seconds to wait." },
            "X-RateLimit-Limit": { "schema": { "type": "integer" } },
            "X-RateLimit-Remaining": { "schema": { "type": "integer" } },
            "X-RateLimit-Reset": { "schema": { "type": "integer" }, "description": "Unix time in seconds." },
        });
    }
    answer
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

    fn document() -> Value {
        super::document(&crate::api::endpoints()).unwrap()
    }

    #[test]
    fn every_endpoint_is_described_with_its_answer() {
        let document = document();
        assert_eq!(document["openapi"], "3.1.0");
        for endpoint in crate::api::endpoints() {
            let path = endpoint.path.strip_prefix("/v1").unwrap();
            let operation = &document["paths"][path][endpoint.method.key()];
            assert_eq!(operation["operationId"], endpoint.operation_id, "{path}");
            assert!(operation["responses"].as_object().unwrap().keys().any(|s| s.starts_with('2')), "{path}");
            assert!(!endpoint.summary.is_empty() && !endpoint.tag.is_empty(), "{path} is documented");
        }
    }

    /// Follows a JSON pointer of an answer through its schema (`$ref`s, object members and
    /// array items), to the schema of the value there.
    fn schema_at<'a>(document: &'a Value, mut schema: &'a Value, pointer: &str) -> Option<&'a Value> {
        let resolve = |mut schema: &'a Value| {
            while let Some(name) = schema.get("$ref").and_then(Value::as_str) {
                schema = document.pointer(&name.replacen('#', "", 1))?;
            }
            Some(schema)
        };
        for part in pointer.split('/').skip(1) {
            schema = resolve(schema)?;
            schema = if part.parse::<usize>().is_ok() {
                schema.get("items")?
            } else {
                schema.get("properties")?.get(part)?
            };
        }
        resolve(schema)
    }

    /// Every operation on an id can be reached by following links from one that makes or lists
    /// it, and each link reads a member its answer has: what a stateful client (schemathesis)
    /// needs to get past 404.
    #[test]
    fn every_operation_on_an_id_is_linked_from_one_that_gives_it() {
        let document = document();
        let mut linked = std::collections::HashSet::new();
        for item in document["paths"].as_object().unwrap().values() {
            for operation in item.as_object().unwrap().values() {
                for (status, answer) in operation["responses"].as_object().into_iter().flatten() {
                    let schema = &answer["content"]["application/json"]["schema"];
                    for link in answer["links"].as_object().into_iter().flatten().map(|(_, link)| link) {
                        linked.insert(link["operationId"].as_str().unwrap().to_owned());
                        for value in link["parameters"].as_object().unwrap().values() {
                            let Some(pointer) = value.as_str().unwrap().strip_prefix("$response.body#") else {
                                continue;
                            };
                            let at = schema_at(&document, schema, pointer);
                            let id = operation["operationId"].as_str().unwrap();
                            assert!(at.is_some(), "{id} {status}: its answer has nothing at {pointer}");
                        }
                    }
                }
            }
        }
        for endpoint in crate::api::endpoints() {
            if endpoint.path_parameters().next().is_some() {
                assert!(linked.contains(endpoint.operation_id), "no link leads to {}", endpoint.operation_id);
            }
        }
    }

    /// An answer may not carry a member its schema does not name.
    #[test]
    fn every_answer_schema_is_closed() {
        let document = document();
        let schemas = document["components"]["schemas"].as_object().unwrap();
        let mut open = Vec::new();
        let mut pending: Vec<(String, &Value)> = Vec::new();
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                for (status, answer) in operation["responses"].as_object().into_iter().flatten() {
                    if let Some(schema) = answer.pointer("/content/application~1json/schema") {
                        pending.push((format!("{method} {path} {status}"), schema));
                    }
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        while let Some((at, schema)) = pending.pop() {
            let Some(object) = schema.as_object() else { continue };
            if let Some(name) =
                object.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/"))
            {
                if seen.insert(name.to_owned()) {
                    pending.push((name.to_owned(), &schemas[name]));
                }
                continue;
            }
            let is_object = object
                .get("type")
                .is_some_and(|t| t == "object" || t.as_array().is_some_and(|a| a.contains(&json!("object"))));
            if is_object
                && object.get("additionalProperties") != Some(&Value::Bool(false))
                && object.contains_key("properties")
            {
                open.push(at.clone());
            }
            for (key, value) in object {
                match key.as_str() {
                    "properties" => {
                        pending.extend(value.as_object().into_iter().flatten().map(|(k, v)| (format!("{at}.{k}"), v)))
                    }
                    "items" | "additionalProperties" => pending.push((at.clone(), value)),
                    "anyOf" | "oneOf" | "allOf" => {
                        pending.extend(value.as_array().into_iter().flatten().map(|v| (at.clone(), v)))
                    }
                    _ => {}
                }
            }
        }
        assert!(open.is_empty(), "open answer schemas: {open:?}");
    }

    /// The committed copy changes with the description, in the same commit. `SWITCHBOARD_BLESS=1`
    /// writes the rendered document over it (as `cargo run -- openapi > docs/openapi.json` does).
    #[test]
    fn the_committed_copy_is_current() {
        let committed = include_str!("../../../docs/openapi.json");
        let generated = document_bytes().unwrap();
        if std::env::var("SWITCHBOARD_BLESS").is_ok_and(|value| value == "1") {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
            std::fs::write(path, &generated).unwrap();
            return;
        }
        assert!(
            committed.as_bytes() == generated.as_ref(),
            "docs/openapi.json is stale: run `cargo run -- openapi > docs/openapi.json` (or this test with \
             SWITCHBOARD_BLESS=1)"
        );
    }
}
