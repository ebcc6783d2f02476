//! The skill file (Agent Skills format): the prose of `skill.md` with its tables filled in from
//! the endpoints, so that it lists exactly the operations and MCP tools the gateway serves.

use crate::endpoint::Endpoint;

const TEMPLATE: &str = include_str!("skill.md");

/// The skill file for these endpoints.
pub fn skill(endpoints: &[Endpoint]) -> String {
    let tools = crate::mcp::tool_names(endpoints);
    let listed: Vec<String> = tools.iter().map(|name| format!("`{name}`")).collect();
    TEMPLATE
        .replace("{{tool_count}}", &tools.len().to_string())
        .replace("{{tools}}", &listed.join(", "))
        .replace("{{endpoints}}", &capabilities(endpoints))
}

/// One table per tag: the call, what it does, and what it needs or costs.
fn capabilities(endpoints: &[Endpoint]) -> String {
    let mut tags: Vec<&str> = Vec::new();
    for endpoint in endpoints {
        if !tags.contains(&endpoint.tag) {
            tags.push(endpoint.tag);
        }
    }
    let mut out = String::new();
    for tag in tags {
        out.push_str(&format!("### {tag}\n\n| call | what | notes |\n|---|---|---|\n"));
        for endpoint in endpoints.iter().filter(|endpoint| endpoint.tag == tag) {
            let mut notes = Vec::new();
            if endpoint.class != crate::config::RateClass::Standard {
                notes.push(format!("{} rate", endpoint.class.name()));
            }
            if let Some(tool) = &endpoint.tool {
                notes.push(format!("MCP `{}`", tool.name));
            }
            out.push_str(&format!(
                "| `{} {}` | {} | {} |\n",
                endpoint.method.as_str(),
                endpoint.path,
                endpoint.summary,
                notes.join("; ")
            ));
        }
        out.push('\n');
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skill_file_lists_every_endpoint_and_tool_under_its_front_matter() {
        let endpoints = crate::api::endpoints();
        let skill = skill(&endpoints);
        let front = skill.strip_prefix("---\n").unwrap().split("\n---\n").next().unwrap();
        for key in ["name:", "description:", "version:", "last_updated:"] {
            assert!(front.lines().any(|line| line.starts_with(key)), "{key}");
        }
        for endpoint in &endpoints {
            assert!(skill.contains(&format!("`{} {}`", endpoint.method.as_str(), endpoint.path)), "{}", endpoint.path);
        }
        assert!(skill.contains("`whoami`") && !skill.contains("{{"));
    }
}
