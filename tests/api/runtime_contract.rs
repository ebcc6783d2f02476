//! Issue 41's "done when": a runtime written in another language (tests/grpc_clients/runtime.py,
//! grpcio with stubs generated from proto/ in the test) reads an agent's configuration, follows
//! a change through WatchAgents across a disconnect, ingests a call with its analysis and cost,
//! and sees the call in /v1/analytics/calls and in the CSV export.

use std::time::Duration;

use serde_json::{Value, json};

use crate::agents::{create_agent, id};
use crate::call_outcomes::{cell, rows};
use crate::common::Stack;

#[tokio::test]
async fn a_python_runtime_runs_an_agent_and_reports_its_call() {
    let stack = Stack::start().await;
    let team = stack.team("Trattoria", false, 100).await;
    let api = stack.client(&team.key);
    let booking = json!({ "type": "object", "properties": { "partySize": { "type": "integer", "minimum": 1 } }, "required": ["partySize"] });
    let agent = create_agent(
        &api,
        "Host",
        json!({
            "instructions": "Take table bookings.",
            "firstMessage": "Trattoria, how can I help?",
            "language": "it-IT",
            "tools": [
                { "type": "function", "name": "book_table", "parameters": booking, "url": "https://bookings.example.com/book" },
                { "type": "end_call" }
            ],
            "postCallAnalysis": [
                { "name": "outcome", "type": "enum", "choices": ["booked", "lost"] },
                { "name": "partySize", "type": "number" }
            ]
        }),
    )
    .await;

    let python = std::env::var("SWITCHBOARD_TEST_GRPC_PYTHON")
        .expect("SWITCHBOARD_TEST_GRPC_PYTHON names a Python with grpcio (scripts/test: ensure_grpc_clients)");
    let root = env!("CARGO_MANIFEST_DIR");
    let plan = json!({
        "proto": format!("{root}/proto"),
        "token": stack.service_token,
        "agents": stack.grpc_url("agents"),
        "conversations": stack.grpc_url("conversations"),
        "api": stack.base,
        "key": team.key,
        "team_id": team.id,
        "agent_id": id(&agent),
    });
    let mut child = tokio::process::Command::new(python)
        .arg(format!("{root}/tests/grpc_clients/runtime.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, plan.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("the Python runtime finished in 180 s")
        .unwrap();
    assert!(output.status.success(), "the Python runtime: {}", String::from_utf8_lossy(&output.stderr));
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();

    let config = &seen["config"];
    assert_eq!(
        (config["instructions"].clone(), config["instructionsVersion"].clone()),
        (json!("Take table bookings."), json!(1))
    );
    assert_eq!(
        (config["firstMessage"].clone(), config["language"].clone()),
        (json!("Trattoria, how can I help?"), json!("it-IT"))
    );
    assert_eq!(config["tools"], json!(["function", "end_call"]));
    assert_eq!(config["functionParameters"][0], booking);
    assert_eq!(config["analysisFields"], json!(["outcome", "partySize"]));
    assert_eq!(seen["followed"]["kind"], "AGENT_CHANGE_KIND_UPDATED");
    assert!(seen["resumed"]["version"].as_i64() > seen["followed"]["version"].as_i64(), "{seen}");

    assert_eq!(
        (seen["ingested"]["cost"].clone(), seen["ingested"]["sentiment"].clone()),
        (json!(3), json!("positive"))
    );
    let balance = api.get("/me").await.expect(200)["data"]["credits"]["balance"].clone();
    assert_eq!(balance, 97, "the cost is debited once though EndCall was sent twice");

    let days = seen["analytics"].as_array().unwrap();
    let called: Vec<&Value> = days.iter().filter(|day| day["calls"] != 0).collect();
    assert_eq!(called.len(), 1, "{days:?}");
    let day = called[0];
    assert_eq!(
        (day["calls"].clone(), day["successful"].clone(), day["unsuccessful"].clone()),
        (json!(1), json!(1), json!(0))
    );
    assert_eq!(
        (day["sentiment"]["positive"].clone(), day["disconnectionReasons"]["customer_hangup"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!((day["minutes"].as_f64(), day["cost"].clone()), (Some(3.0), json!(3)));

    assert!(seen["export"]["contentType"].as_str().unwrap().starts_with("text/csv"), "{seen}");
    let table = rows(seen["export"]["csv"].as_str().unwrap());
    assert_eq!(table.len(), 2, "a header and the call: {table:?}");
    assert_eq!(cell(&table, 1, "id"), seen["ingested"]["id"].as_str().unwrap());
    assert_eq!(cell(&table, 1, "summary"), "Booked a table for two, at eight; \"window\" seat.");
    assert_eq!((cell(&table, 1, "sentiment"), cell(&table, 1, "successful")), ("positive", "true"));
    assert_eq!((cell(&table, 1, "custom.outcome"), cell(&table, 1, "custom.partySize")), ("booked", "2"));
}
