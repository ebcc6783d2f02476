//! The process's life: `dev` prints its demo key once and keeps its data across restarts,
//! SIGTERM lets the request in flight finish and exits 0, and the components run as separate
//! services on PostgreSQL.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{Api, Process, Stack, admin, admin_with, free_port};

#[tokio::test]
async fn dev_prints_a_demo_key_once_and_keeps_its_data() {
    let stack = Stack::start().await;
    assert!(stack.demo_key.starts_with("ew_"));
    let me = stack.client(&stack.demo_key).get("/me").await;
    let demo_team = me.expect(200)["data"]["team"]["id"].as_str().unwrap().to_owned();
    assert_eq!(me.body["data"]["ownsAgency"], true);

    let Stack { process, data_dir, demo_key, .. } = stack;
    assert_eq!(process.terminate().await, Some(0));
    let again = Stack::start_in(data_dir, &[]).await;
    assert!(again.demo_key.is_empty(), "the demo key is printed on first start only");
    let me = again.client(&demo_key).get("/me").await;
    assert_eq!(me.expect(200)["data"]["team"]["id"], demo_team.as_str());
}

/// Issue 40, defect 10: `--listen` had a default of its own, so the documented variable never
/// reached `dev`. The flag, when given, still wins.
#[tokio::test]
async fn dev_listens_where_switchboard_listen_says_unless_the_flag_says_otherwise() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path().to_str().expect("utf-8 path");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let process = Process::start(&["dev", "--data-dir", dir], &[("SWITCHBOARD_LISTEN", &listen)], "Stop with").await;
    let base = process.line_after("API base URL:").expect("base URL line");
    assert_eq!(base, format!("http://{listen}/v1"), "dev listens at SWITCHBOARD_LISTEN");
    assert_eq!(process.terminate().await, Some(0));

    let flagged = Process::start(
        &["dev", "--data-dir", dir, "--listen", "127.0.0.1:0"],
        &[("SWITCHBOARD_LISTEN", &listen)],
        "Stop with",
    )
    .await;
    let base = flagged.line_after("API base URL:").expect("base URL line");
    assert!(!base.contains(&format!(":{port}/")), "the flag wins over the variable: {base}");
}

#[tokio::test]
async fn sigterm_lets_the_request_in_flight_finish_then_exits_zero() {
    let stack = Stack::start().await;
    let team = stack.team("Agency", true, 100).await;
    let address = stack.base.trim_start_matches("http://").trim_end_matches("/v1").to_owned();
    let body = serde_json::to_vec(&crate::auth::subteam_body("Slow")).unwrap();

    // The request is in flight: headers and half the body are sent before SIGTERM.
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /v1/agency/subteams HTTP/1.1\r\nHost: {address}\r\nX-API-Key: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        team.key,
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(&body[..10]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let Stack { process, data_dir, .. } = stack;
    let exit = tokio::spawn(process.terminate());
    tokio::time::sleep(Duration::from_millis(500)).await;
    socket.write_all(&body[10..]).await.unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    assert_eq!(exit.await.unwrap(), Some(0));

    // It was really written.
    let keys = admin(&["--data-dir", data_dir.path().to_str().unwrap()], &["list-keys", "--team", &team.id]).await;
    assert_eq!(keys.as_array().unwrap().len(), 1);
}

const TOKEN: &str = "lifecycle-test-service-token";

/// What Kubernetes runs: each component its own process with its own PostgreSQL database,
/// talking gRPC; a reference written through the gateway is found by a search at once.
#[tokio::test]
async fn the_components_run_as_separate_services_on_postgres() {
    let Some(identity_db) = switchboard_kit::testdb::postgres().await.unwrap() else {
        return;
    };
    let agents_db = switchboard_kit::testdb::postgres().await.unwrap().unwrap();
    let knowledgebase_db = switchboard_kit::testdb::postgres().await.unwrap().unwrap();
    let conversations_db = switchboard_kit::testdb::postgres().await.unwrap().unwrap();
    let crm_db = switchboard_kit::testdb::postgres().await.unwrap().unwrap();
    let data_dir = tempfile::tempdir().unwrap();
    let data = data_dir.path().to_str().unwrap();
    // The services call each other (knowledgebase → identity, agents; agents → knowledgebase):
    // every process is told every address up front, as a Kubernetes ConfigMap does.
    let ports = [free_port(), free_port(), free_port(), free_port(), free_port()];
    let urls = ports.map(|port| format!("http://127.0.0.1:{port}"));
    let peers = [
        ("SWITCHBOARD_IDENTITY_URL", urls[0].as_str()),
        ("SWITCHBOARD_AGENTS_URL", urls[1].as_str()),
        ("SWITCHBOARD_KNOWLEDGEBASE_URL", urls[2].as_str()),
        ("SWITCHBOARD_CONVERSATIONS_URL", urls[3].as_str()),
        ("SWITCHBOARD_CRM_URL", urls[4].as_str()),
        ("SWITCHBOARD_SERVICE_TOKEN", TOKEN),
        ("SWITCHBOARD_ENCRYPTION_KEYS", crate::common::ENCRYPTION_KEYS),
    ];
    let serve = |component: &'static str, url: String, port: u16| async move {
        let listen = format!("127.0.0.1:{port}");
        let mut env =
            vec![("DATABASE_URL", url.as_str()), ("SWITCHBOARD_GRPC_LISTEN", &listen), ("SWITCHBOARD_DATA_DIR", data)];
        env.extend(peers);
        let ready = format!("{component} gRPC listening on");
        Process::start(&["serve", component], &env, &ready).await
    };
    let identity = serve("identity", identity_db.url.clone(), ports[0]).await;
    let agents = serve("agents", agents_db.url.clone(), ports[1]).await;
    let knowledgebase = serve("knowledgebase", knowledgebase_db.url.clone(), ports[2]).await;
    let conversations = serve("conversations", conversations_db.url.clone(), ports[3]).await;
    let crm = serve("crm", crm_db.url.clone(), ports[4]).await;
    let mut env = vec![("SWITCHBOARD_LISTEN", "127.0.0.1:0")];
    env.extend(peers);
    let gateway = Process::start(&["serve", "gateway"], &env, "gateway listening on").await;
    let base = gateway.line_after("gateway listening on").unwrap();

    let location = ["--database-url", identity_db.url.as_str()];
    let team = admin(&location, &["create-team", "--name", "On Postgres", "--credits", "7"]).await;
    let team_id = team["id"].as_str().unwrap();
    let key = admin(&location, &["create-key", "--team", team_id]).await["key"].as_str().unwrap().to_owned();
    let api = Api::new(&base, Some(&key));
    let me = api.get("/me").await;
    assert_eq!(me.expect(200)["data"]["team"]["name"], "On Postgres");
    assert_eq!(me.body["data"]["credits"]["balance"], 7);

    let kb = api.post("/knowledgebase", json!({ "name": "Support" })).await.expect(201)["data"]["id"].clone();
    let agent = api.post("/agents", json!({ "name": "Desk", "type": "chat", "knowledgebaseId": kb })).await;
    let agent_id = agent.expect(201)["data"]["id"].as_str().unwrap().to_owned();
    let reference = json!({ "question": "Can I pay by card?", "answer": "Yes, every major card is accepted." });
    api.post(&format!("/agents/{agent_id}/knowledgebase/references"), reference).await.expect(201);
    let search = api.get(&format!("/agents/{agent_id}/knowledgebase/search?query=credit%20card%20payment")).await;
    assert_eq!(search.expect(200)["data"][0]["reference"]["question"], "Can I pay by card?");
    assert_eq!(search.body["meta"]["agentName"], "Desk");
    assert_eq!(api.get("/me").await.body["data"]["credits"]["balance"], 6);

    // Conversations on PostgreSQL, written by a runtime over gRPC (seed-demo told where).
    let seed = ["seed-demo", "--team", team_id, "--calls", "6", "--chats", "2", "--url", urls[3].as_str()];
    let seed = [&seed[..], &["--contacts", "5", "--crm-url", urls[4].as_str()]].concat();
    let written = admin_with(&location, &seed, &[("SWITCHBOARD_SERVICE_TOKEN", TOKEN)]).await;
    assert_eq!(written["calls"], 6);
    assert_eq!(written["crm"]["contacts"], 5);
    let calls = api.get("/calls?search=the&sortBy=duration&sortOrder=asc").await;
    assert!(calls.expect(200)["pagination"]["totalCount"].as_u64().unwrap() > 0, "{}", calls.text);
    let call = calls.body["data"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(api.get(&format!("/calls/{call}")).await.expect(200)["data"]["id"], call.as_str());
    let recorded = api.get("/calls?limit=100").await;
    let url = recorded.body["data"].as_array().unwrap().iter().find_map(|call| call["recordingUrl"].as_str());
    let playback = reqwest::get(url.expect("a recording URL")).await.unwrap();
    assert_eq!(playback.status(), 200);
    assert_eq!(playback.headers()["content-type"], "audio/wav");
    assert_eq!(api.get("/chats").await.expect(200)["pagination"]["totalCount"], 2);

    // The CRM on PostgreSQL: a contact with a new tag, found by a part of its number.
    let contact = json!({ "number": "(415) 555-2671", "firstName": "Grace", "tagNames": ["VIP"] });
    let created = api.post("/contacts", contact).await;
    assert_eq!(created.expect(201)["data"]["number"], "+14155552671");
    assert_eq!(api.get("/contacts").await.expect(200)["pagination"]["totalCount"], 6);
    let found = api.get("/contacts?search=5552671").await;
    assert_eq!(found.expect(200)["data"][0]["firstName"], "Grace");
    assert!(found.body["availableTags"].as_array().unwrap().iter().any(|tag| tag["name"] == "VIP"));

    assert_eq!(gateway.terminate().await, Some(0));
    for process in [crm, conversations, knowledgebase, agents, identity] {
        assert_eq!(process.terminate().await, Some(0));
    }
}
