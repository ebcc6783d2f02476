//! The hosted MCP server at `/mcp`, spoken to as an MCP client would: JSON-RPC over HTTP POST
//! with the API key as a bearer token.

use serde_json::{Value, json};

use crate::common::{Api, Response, Stack};

/// An MCP client for one key: `Authorization: Bearer`, as the spec says.
struct Mcp {
    api: Api,
    key: String,
}

impl Mcp {
    fn new(stack: &Stack, key: &str) -> Mcp {
        let root = stack.base.trim_end_matches("/v1").to_owned();
        Mcp { api: Api::new(&root, None), key: key.to_owned() }
    }

    async fn post(&self, message: Value) -> Response {
        let request = self
            .api
            .request(reqwest::Method::POST, "/mcp")
            .header("Authorization", format!("Bearer {}", self.key))
            .header("Accept", "application/json, text/event-stream")
            .json(&message);
        self.api.send(request).await
    }

    async fn rpc(&self, method: &str, params: Value) -> Value {
        let answer = self.post(json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params })).await;
        let body = answer.expect(200).clone();
        assert_eq!(body["jsonrpc"], "2.0");
        assert_eq!(body["id"], 7);
        body
    }

    /// The result of a tool call that must succeed: its structured content.
    async fn call(&self, tool: &str, arguments: Value) -> Value {
        let result = self.call_result(tool, arguments).await;
        assert_eq!(result["isError"], false, "{tool}: {result}");
        result["structuredContent"].clone()
    }

    async fn call_result(&self, tool: &str, arguments: Value) -> Value {
        let body = self.rpc("tools/call", json!({ "name": tool, "arguments": arguments })).await;
        let result = body["result"].clone();
        let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, result["structuredContent"], "the text and the structured content agree");
        result
    }
}

#[tokio::test]
async fn a_client_initialises_lists_tools_and_searches_knowledge_for_a_credit() {
    let stack = Stack::start().await;
    let team = stack.team("MCP", false, 10).await;
    let mcp = Mcp::new(&stack, &team.key);

    let init = mcp
        .rpc(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "test", "version": "1" },
            }),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["serverInfo"]["name"], "switchboard");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    let initialized = mcp.post(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).await;
    assert_eq!(initialized.status, 202);
    assert_eq!(mcp.rpc("ping", json!({})).await["result"], json!({}));

    let tools = mcp.rpc("tools/list", json!({})).await["result"]["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "whoami",
            "list_agents",
            "get_agent",
            "update_agent",
            "get_agent_instructions",
            "update_agent_instructions",
            "search_knowledge",
            "add_knowledge_answer",
            "list_calls",
            "get_call",
            "get_call_analytics",
            "list_chats",
            "get_chat",
            "find_contacts",
            "create_contact",
            "get_contact",
            "add_contact_note"
        ]
    );
    let annotation =
        |name: &str, hint: &str| tools.iter().find(|t| t["name"] == name).unwrap()["annotations"][hint].clone();
    assert_eq!(annotation("whoami", "readOnlyHint"), true);
    assert_eq!(annotation("search_knowledge", "readOnlyHint"), true);
    assert_eq!(annotation("update_agent_instructions", "destructiveHint"), true);
    assert_eq!(annotation("add_knowledge_answer", "readOnlyHint"), false);
    assert_eq!(annotation("list_calls", "readOnlyHint"), true);
    assert_eq!(annotation("find_contacts", "readOnlyHint"), true);
    assert_eq!(annotation("get_contact", "readOnlyHint"), true);
    for writer in ["create_contact", "add_contact_note"] {
        assert_eq!(
            (annotation(writer, "readOnlyHint"), annotation(writer, "destructiveHint")),
            (false.into(), false.into())
        );
    }

    let me = mcp.call("whoami", json!({})).await;
    assert_eq!(me["data"]["team"]["id"], team.id.as_str());
    assert_eq!(me["data"]["credits"]["balance"], 10);
    let calls = mcp.call("list_calls", json!({ "limit": 5 })).await;
    assert_eq!(calls["pagination"]["limit"], 5);
    assert_eq!(calls["data"], json!([]));

    // Knowledge bases and agents are made over REST; the tools work on them.
    let api = stack.client(&team.key);
    let kb = api.post("/knowledgebase", json!({ "name": "Support" })).await.expect(201)["data"]["id"].clone();
    let agent = api.post("/agents", json!({ "name": "Desk", "type": "chat", "knowledgebaseId": kb })).await;
    let agent = agent.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    let listed = mcp.call("list_agents", json!({})).await;
    assert_eq!(listed["data"][0]["id"], agent.as_str());

    let updated = mcp.call("update_agent_instructions", json!({ "agentId": agent, "instructions": "Be brief." })).await;
    assert_eq!(updated["message"], "Agent instructions updated successfully");
    mcp.call("update_agent_instructions", json!({ "agentId": agent, "instructions": "Be very brief." })).await;
    let read = mcp.call("get_agent_instructions", json!({ "agentId": agent })).await;
    assert_eq!(read["data"]["instructions"], "Be very brief.");

    let added = mcp
        .call(
            "add_knowledge_answer",
            json!({ "agentId": agent, "question": "Do you ship abroad?", "answer": "Yes, to 30 countries." }),
        )
        .await;
    assert_eq!(added["data"]["type"], "QA");
    let by_agent =
        mcp.call("search_knowledge", json!({ "agentId": agent, "query": "international delivery", "limit": 3 })).await;
    assert_eq!(by_agent["data"][0]["reference"]["question"], "Do you ship abroad?");
    assert_eq!(by_agent["meta"]["agentId"], agent.as_str());
    let by_id =
        mcp.call("search_knowledge", json!({ "knowledgebaseId": kb, "query": "shipping to other countries" })).await;
    assert_eq!(by_id["data"][0]["reference"]["question"], "Do you ship abroad?");
    assert_eq!(by_id["meta"]["creditsUsed"], 1);
    assert_eq!(mcp.call("whoami", json!({})).await["data"]["credits"]["balance"], 8);

    // The same data over REST: one API, two doors.
    let history = api.get(&format!("/agents/{agent}/instructions/history")).await;
    let versions = history.expect(200)["data"].as_array().unwrap().clone();
    assert_eq!(versions.len(), 1, "the second update kept the first text");
    assert_eq!(versions[0]["instructions"], "Be brief.");
}

#[tokio::test]
async fn tool_errors_are_results_the_model_can_read_and_protocol_errors_are_json_rpc_errors() {
    let stack = Stack::start().await;
    let owner = stack.team("Owner", false, 10).await;
    let other = stack.team("Other", false, 10).await;
    let kb = stack.client(&owner.key).post("/knowledgebase", json!({ "name": "Private" })).await;
    let kb = kb.expect(201)["data"]["id"].as_str().unwrap().to_owned();

    let agent = stack.client(&owner.key).post("/agents", json!({ "name": "Ava", "type": "phone" })).await;
    let agent = agent.expect(201)["data"]["id"].as_str().unwrap().to_owned();

    // Another team's knowledge base and agent do not exist for this key.
    let foreign = Mcp::new(&stack, &other.key);
    let result = foreign.call_result("search_knowledge", json!({ "knowledgebaseId": kb, "query": "x" })).await;
    assert_eq!(result["isError"], true);
    assert_eq!(result["structuredContent"]["code"], "NOT_FOUND");
    let result = foreign.call_result("get_agent_instructions", json!({ "agentId": agent })).await;
    assert_eq!(result["structuredContent"]["error"], "Agent not found");
    assert_eq!(foreign.call("whoami", json!({})).await["data"]["credits"]["balance"], 10, "nothing charged");

    // Bad arguments: no address, an unknown argument, an out-of-range value, a malformed id.
    let mcp = Mcp::new(&stack, &owner.key);
    let result = mcp.call_result("search_knowledge", json!({ "query": "x" })).await;
    assert_eq!(result["structuredContent"]["code"], "VALIDATION_ERROR");
    assert_eq!(result["structuredContent"]["details"][0]["field"], "agentId");
    let result = mcp.call_result("list_agents", json!({ "colour": "blue" })).await;
    assert_eq!(result["structuredContent"]["details"][0]["field"], "colour");
    let result = mcp.call_result("search_knowledge", json!({ "knowledgebaseId": kb, "query": "x", "limit": 51 })).await;
    assert_eq!(result["structuredContent"]["code"], "VALIDATION_ERROR");
    let result = mcp.call_result("get_agent_instructions", json!({ "agentId": "not-a-uuid" })).await;
    assert_eq!(result["structuredContent"]["code"], "VALIDATION_ERROR");
    let result = mcp.call_result("update_agent_instructions", json!({ "agentId": agent, "instructions": "" })).await;
    assert_eq!(result["structuredContent"]["details"][0]["field"], "instructions");

    // A read-only key may read but not write.
    let reader = Mcp::new(&stack, &stack.key(&owner.id, true).await);
    assert_eq!(reader.call("list_agents", json!({})).await["data"][0]["id"], agent.as_str());
    let result =
        reader.call_result("update_agent_instructions", json!({ "agentId": agent, "instructions": "No" })).await;
    assert_eq!(result["structuredContent"]["code"], "FORBIDDEN");
    let history = stack.client(&owner.key).get(&format!("/agents/{agent}/instructions/history")).await;
    assert!(history.expect(200)["data"].as_array().unwrap().is_empty());
    let result = reader.call_result("update_agent", json!({ "agentId": agent, "firstMessage": "Hi there" })).await;
    assert_eq!(result["structuredContent"]["code"], "FORBIDDEN");
    let kept = stack.client(&owner.key).get(&format!("/agents/{agent}")).await;
    assert!(kept.expect(200)["data"]["firstMessage"].is_null(), "a refused update changes nothing: {}", kept.body);

    // Protocol errors.
    let unknown_tool = mcp.rpc("tools/call", json!({ "name": "launchRocket", "arguments": {} })).await;
    assert_eq!(unknown_tool["error"]["code"], -32602);
    assert_eq!(mcp.rpc("resources/list", json!({})).await["error"]["code"], -32601);
    let malformed = mcp.api.raw("POST", "/mcp", Some("application/json"), b"{not json".to_vec()).await;
    assert_eq!(malformed.status, 401, "the key is checked first");
    let request = mcp
        .api
        .request(reqwest::Method::POST, "/mcp")
        .header("Authorization", format!("Bearer {}", owner.key))
        .header("Content-Type", "application/json")
        .body("{not json");
    let malformed = mcp.api.send(request).await;
    assert_eq!(malformed.status, 400);
    assert_eq!(malformed.body["error"]["code"], -32700);
}

#[tokio::test]
async fn the_endpoint_wants_a_valid_bearer_key_and_post() {
    let stack = Stack::start().await;
    let root = stack.base.trim_end_matches("/v1").to_owned();
    let anonymous = Api::new(&root, None);
    let message = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });

    let missing = anonymous.post("/mcp", message.clone()).await;
    assert_eq!(missing.error_code(401), "UNAUTHORIZED");
    assert_eq!(missing.header("www-authenticate"), Some("Bearer"));
    let wrong = Mcp::new(&stack, "ew_not_a_real_key").post(message.clone()).await;
    assert_eq!(wrong.error_code(401), "UNAUTHORIZED");
    // Credentials that disagree are refused, whichever of them is valid.
    for authorization in ["Bearer ew_not_a_real_key", "Basic dXNlcjpwYXNz", "Bearer"] {
        let request = anonymous
            .request(reqwest::Method::POST, "/mcp")
            .header("Authorization", authorization)
            .header("X-API-Key", &stack.demo_key)
            .json(&message);
        let conflicting = anonymous.send(request).await;
        assert_eq!(conflicting.error_code(401), "UNAUTHORIZED", "{authorization}");
        assert_eq!(conflicting.header("www-authenticate"), Some("Bearer"));
    }
    assert!(missing.body["error"].as_str().unwrap().contains("Bearer"), "{}", missing.text);
    // X-API-Key works too, and /v1/mcp is the same endpoint.
    let keyed = Api::new(&root, Some(&stack.demo_key)).post("/v1/mcp", message).await;
    assert!(keyed.expect(200)["result"]["tools"].is_array());
    let get = Api::new(&root, Some(&stack.demo_key)).get("/mcp").await;
    assert_eq!(get.error_code(405), "METHOD_NOT_ALLOWED");
    assert_eq!(get.header("allow"), Some("POST"));
}
