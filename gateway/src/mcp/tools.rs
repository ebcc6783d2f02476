//! The MCP tools: the spec's tool names, each run by one REST operation (or one of two, where
//! a tool reaches a knowledge base through its agent or by its own id). Input schemas put the
//! path parameters, `teamId`, the query parameters and the body fields side by side, as a model
//! fills them in most reliably.

use anyhow::{Context, anyhow, bail};
use serde_json::{Map, Value, json};

use crate::openapi;
use crate::routes::{self, Method, Route};

/// `(tool, operations, description)`. The spec also names list_calls, get_call, list_chats,
/// get_chat, find_contacts, get_contact, create_contact and add_contact_note: they come with
/// the calls, chats and CRM operations they would run.
const TOOLS: &[(&str, &[&str], &str)] = &[
    (
        "whoami",
        &["getMe"],
        "Confirms the key works and reports the team, its credit balance, its subscription and the key's access. Call it first.",
    ),
    ("list_agents", &["listAgents"], "Lists the team's phone and chat agents, newest first."),
    ("get_agent_instructions", &["getAgentInstructions"], "Reads an agent's current instructions (its prompt)."),
    (
        "update_agent_instructions",
        &["updateAgentInstructions"],
        "Replaces an agent's instructions. The previous text is kept in the agent's history (last 20 versions).",
    ),
    (
        "search_knowledge",
        &["searchAgentKnowledgebase", "searchKnowledgebase"],
        "Semantic search in a knowledge base, given an agentId (its knowledge base) or a knowledgebaseId. Costs 1 credit.",
    ),
    (
        "add_knowledge_answer",
        &["createAgentReference", "createReference"],
        "Adds a Q&A reference to a knowledge base, given an agentId (its knowledge base) or a knowledgebaseId; searchable at once.",
    ),
];

/// Where an argument goes when the tool is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Path,
    Query,
    Body,
}

/// One operation a tool can run, with the arguments it takes.
pub struct Operation {
    pub route: Route,
    pub arguments: Vec<(String, Place)>,
    required: Vec<String>,
    /// The JSON schema of each argument.
    schemas: Map<String, Value>,
}

impl Operation {
    fn schema(&self, argument: &str) -> anyhow::Result<Value> {
        self.schemas.get(argument).cloned().ok_or_else(|| anyhow!("no schema for {argument}"))
    }

    /// Whether `given` has every path parameter of this operation.
    pub fn addressed_by(&self, given: &Map<String, Value>) -> bool {
        self.arguments.iter().filter(|(_, place)| *place == Place::Path).all(|(name, _)| given.contains_key(name))
    }
}

pub struct Tool {
    pub name: &'static str,
    pub operations: Vec<Operation>,
}

pub struct Tools {
    tools: Vec<Tool>,
    listing: Value,
}

impl Tools {
    pub fn build() -> anyhow::Result<Self> {
        let (operations, schemas) = openapi::written()?;
        let table = routes::table();
        let mut tools = Vec::new();
        let mut listing = Vec::new();
        for (name, operation_ids, description) in TOOLS {
            let mut backing = Vec::new();
            for operation_id in *operation_ids {
                let route = table
                    .iter()
                    .find(|route| route.operation_id == *operation_id)
                    .with_context(|| format!("{name}: no route {operation_id}"))?;
                let written = operations.get(*operation_id).with_context(|| format!("{operation_id} undescribed"))?;
                backing.push(operation(route.clone(), written, &schemas)?);
            }
            listing.push(describe(name, description, &backing)?);
            tools.push(Tool { name, operations: backing });
        }
        Ok(Self { tools, listing: Value::Array(listing) })
    }

    pub fn listing(&self) -> &Value {
        &self.listing
    }

    pub fn find(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|tool| tool.name == name)
    }
}

/// The `tools/list` entry: the union of the operations' arguments, required where every
/// operation requires them.
fn describe(name: &str, description: &str, operations: &[Operation]) -> anyhow::Result<Value> {
    let mut properties = Map::new();
    let mut required: Vec<Value> = Vec::new();
    for operation in operations {
        for (argument, _) in &operation.arguments {
            let schema = operation.schema(argument)?;
            properties.entry(argument.clone()).or_insert(schema);
            let everywhere = operations.iter().all(|other| other.required.contains(argument));
            if everywhere && !required.contains(&Value::from(argument.as_str())) {
                required.push(Value::from(argument.as_str()));
            }
        }
    }
    let read_only = operations.iter().all(|operation| operation.route.method == Method::Get);
    let destructive = operations.iter().any(|operation| matches!(operation.route.method, Method::Put | Method::Delete));
    let routes: Vec<String> = operations
        .iter()
        .map(|operation| format!("{} {}", operation.route.method.as_str(), operation.route.path))
        .collect();
    Ok(json!({
        "name": name,
        "title": operations.first().map(|operation| operation.route.summary).unwrap_or(name),
        "description": format!("{description} (REST: {})", routes.join(" or ")),
        "inputSchema": { "type": "object", "properties": properties, "required": required },
        "annotations": {
            "readOnlyHint": read_only,
            "destructiveHint": destructive,
            "idempotentHint": operations.iter().all(|operation| operation.route.method != Method::Post),
            "openWorldHint": false,
        },
    }))
}

fn operation(route: Route, operation: &Value, schemas: &Map<String, Value>) -> anyhow::Result<Operation> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut arguments = Vec::new();
    let mut add = |name: &str, schema: Value, needed: bool, place: Place| -> anyhow::Result<()> {
        if properties.insert(name.to_owned(), schema).is_some() {
            bail!("{}: two arguments named {name}", route.operation_id);
        }
        if needed {
            required.push(Value::from(name));
        }
        arguments.push((name.to_owned(), place));
        Ok(())
    };
    for name in route.path.split('/').filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}'))) {
        let schema = if name.ends_with("Id") {
            json!({ "type": "string", "format": "uuid" })
        } else {
            json!({ "type": "integer", "minimum": 1 })
        };
        add(name, schema, true, Place::Path)?;
    }
    add(
        "teamId",
        json!({ "type": "string", "format": "uuid", "description": "Act on this client subteam of the key's agency." }),
        false,
        Place::Query,
    )?;
    for query in operation.get("query").and_then(Value::as_array).into_iter().flatten() {
        let name = query.get("name").and_then(Value::as_str).context("query parameter without name")?;
        let mut schema = inline(query.get("schema").cloned().unwrap_or(json!({})), schemas, 0)?;
        if let Some(description) = query.get("description") {
            schema["description"] = description.clone();
        }
        add(name, schema, query.get("required").and_then(Value::as_bool).unwrap_or(false), Place::Query)?;
    }
    if let Some(request) = operation.get("request").and_then(|r| r.get("schema")).and_then(Value::as_str) {
        let schema = inline(json!({ "$ref": format!("#/components/schemas/{request}") }), schemas, 0)?;
        let needed: Vec<&str> =
            schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        for (name, field) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
            add(name, field.clone(), needed.contains(&name.as_str()), Place::Body)?;
        }
    }
    let required = required.iter().filter_map(Value::as_str).map(str::to_owned).collect();
    Ok(Operation { route, arguments, required, schemas: properties })
}

/// Replaces `$ref`s by the schemas they name: a tool's input schema must stand alone.
fn inline(value: Value, schemas: &Map<String, Value>, depth: usize) -> anyhow::Result<Value> {
    if depth > 16 {
        bail!("schemas nest too deep");
    }
    Ok(match value {
        Value::Object(map) => {
            if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                let name =
                    reference.strip_prefix("#/components/schemas/").ok_or_else(|| anyhow!("bad $ref {reference}"))?;
                let target = schemas.get(name).cloned().ok_or_else(|| anyhow!("{reference} names no schema"))?;
                return inline(target, schemas, depth + 1);
            }
            let mut inlined = Map::new();
            for (key, value) in map {
                inlined.insert(key, inline(value, schemas, depth + 1)?);
            }
            Value::Object(inlined)
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|item| inline(item, schemas, depth + 1)).collect::<Result<_, _>>()?)
        }
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(tools: &Tools, name: &str) -> Value {
        tools.listing().as_array().unwrap().iter().find(|tool| tool["name"] == name).unwrap().clone()
    }

    #[test]
    fn the_spec_tools_have_self_contained_schemas_and_the_right_annotations() {
        let tools = Tools::build().unwrap();
        assert!(!serde_json::to_string(tools.listing()).unwrap().contains("$ref"));
        assert_eq!(listed(&tools, "whoami")["annotations"]["readOnlyHint"], true);
        let update = listed(&tools, "update_agent_instructions");
        assert_eq!(update["annotations"]["destructiveHint"], true);
        assert_eq!(update["inputSchema"]["required"][0], "agentId");
        assert_eq!(update["inputSchema"]["required"].as_array().unwrap().len(), 2);
        // Reached through an agent or by id: neither is required alone, the query always is.
        let search = listed(&tools, "search_knowledge");
        assert_eq!(search["inputSchema"]["required"], json!(["query"]));
        assert_eq!(search["annotations"]["readOnlyHint"], true);
        for argument in ["agentId", "knowledgebaseId", "teamId", "limit", "threshold"] {
            assert!(search["inputSchema"]["properties"][argument].is_object(), "{argument}");
        }
        let add = listed(&tools, "add_knowledge_answer");
        let mut required: Vec<&str> =
            add["inputSchema"]["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        required.sort_unstable();
        assert_eq!(required, ["answer", "question"]);
        assert_eq!(add["annotations"]["readOnlyHint"], false);
        let by_id: Map<String, Value> = [("knowledgebaseId".to_owned(), json!("x"))].into_iter().collect();
        let tool = tools.find("search_knowledge").unwrap();
        assert_eq!(
            tool.operations.iter().find(|o| o.addressed_by(&by_id)).unwrap().route.operation_id,
            "searchKnowledgebase"
        );
    }
}
