//! The MCP tools: one per JSON operation of the route table, with an input schema that puts
//! the path parameters, `teamId`, the query parameters and the body fields side by side, as a
//! model fills them in most reliably.

use anyhow::{Context, anyhow, bail};
use serde_json::{Map, Value, json};

use crate::openapi;
use crate::routes::{self, Body, Method, Route};

/// Where an argument goes when the tool is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Path,
    Query,
    Body,
}

pub struct Tool {
    pub route: Route,
    /// The MCP description of the tool, as `tools/list` shows it.
    pub listing: Value,
    pub arguments: Vec<(String, Place)>,
}

pub struct Tools {
    tools: Vec<Tool>,
    listing: Value,
}

impl Tools {
    pub fn build() -> anyhow::Result<Self> {
        let (operations, schemas) = openapi::written()?;
        let mut tools = Vec::new();
        // Uploads need a file, which a tool call cannot carry: they stay REST-only.
        for route in routes::table().into_iter().filter(|route| route.body != Body::Multipart) {
            let operation =
                operations.get(route.operation_id).with_context(|| format!("{} undescribed", route.operation_id))?;
            tools.push(tool(route, operation, &schemas)?);
        }
        let listing = Value::Array(tools.iter().map(|tool| tool.listing.clone()).collect());
        Ok(Self { tools, listing })
    }

    pub fn listing(&self) -> &Value {
        &self.listing
    }

    pub fn find(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|tool| tool.route.operation_id == name)
    }
}

fn tool(route: Route, operation: &Value, schemas: &Map<String, Value>) -> anyhow::Result<Tool> {
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
    let description = operation.get("description").and_then(Value::as_str).unwrap_or(route.summary);
    let listing = json!({
        "name": route.operation_id,
        "title": route.summary,
        "description": format!("{} ({} {})\n\n{description}", route.summary, route.method.as_str(), route.path),
        "inputSchema": { "type": "object", "properties": properties, "required": required },
        "annotations": {
            "title": route.summary,
            "readOnlyHint": route.method == Method::Get,
            "destructiveHint": route.method == Method::Delete,
            "idempotentHint": matches!(route.method, Method::Get | Method::Put | Method::Delete),
            "openWorldHint": false,
        },
    });
    Ok(Tool { route, listing, arguments })
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

    #[test]
    fn every_json_operation_is_a_tool_with_a_self_contained_schema() {
        let tools = Tools::build().unwrap();
        let listed = tools.listing().as_array().unwrap();
        let json_routes = routes::table().into_iter().filter(|r| r.body != Body::Multipart).count();
        assert_eq!(listed.len(), json_routes);
        assert!(!serde_json::to_string(tools.listing()).unwrap().contains("$ref"));
        let create = tools.find("createAgent").unwrap();
        let required = create.listing["inputSchema"]["required"].as_array().unwrap();
        assert!(required.contains(&json!("name")) && required.contains(&json!("type")), "{required:?}");
        let search = tools.find("searchKnowledgebase").unwrap();
        assert!(search.arguments.contains(&("knowledgebaseId".to_owned(), Place::Path)));
        assert!(search.arguments.contains(&("query".to_owned(), Place::Query)));
        assert_eq!(search.listing["annotations"]["readOnlyHint"], true);
    }
}
