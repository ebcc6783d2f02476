//! Calls a runtime reports back (issue 41): an analysis, a disconnection reason and a cost sent
//! with EndCall over gRPC, as a runtime would; the cost taken from the balance once, the
//! outcome filtered, counted per day and exported as CSV over HTTP through the gateway. Every
//! test runs on `dev` (SQLite) and on `serve` processes on PostgreSQL.

use serde_json::{Value, json};
use switchboard_kit::ServiceError;
use switchboard_proto::v1::{CallAnalysis, EndCallRequest};

use crate::auth::subteam_body;
use crate::common::{Api, Stack, Team};
use crate::conversations::{Runtime, upsert};
use crate::webhooks::{FAST_RETRIES, Receiver};

/// The components a PostgreSQL stack needs for these tests.
const SERVED: [&str; 5] = ["identity", "agents", "conversations", "webhooks", "crm"];

/// A summary with everything CSV must quote: a comma, quotes and a line break.
const AWKWARD: &str = "Asked \"when\", then booked,\nand said bye";

fn analysis(sentiment: &str, successful: Option<bool>, custom: &str) -> CallAnalysis {
    CallAnalysis { summary: None, sentiment: sentiment.into(), successful, custom_json: custom.into() }
}

pub(crate) fn end(team: &Team, external_id: &str, ended_at: &str) -> EndCallRequest {
    EndCallRequest {
        team_id: team.id.clone(),
        external_id: external_id.into(),
        ended_at: ended_at.into(),
        status: "completed".into(),
        ..EndCallRequest::default()
    }
}

async fn balance(api: &Api) -> i64 {
    api.get("/me").await.expect(200)["data"]["credits"]["balance"].as_i64().expect("a balance")
}

pub(crate) async fn ended(runtime: &mut Runtime, request: EndCallRequest) -> Result<(), ServiceError> {
    let request = runtime.signed(request);
    runtime.client.end_call(request).await.map(|_| ()).map_err(|status| ServiceError::from_status(&status))
}

/// The rows of a CSV export, header first, as a spreadsheet reads them.
pub fn rows(text: &str) -> Vec<Vec<String>> {
    let mut reader = csv::ReaderBuilder::new().has_headers(false).from_reader(text.as_bytes());
    reader.records().map(|record| record.unwrap().iter().map(str::to_owned).collect()).collect()
}

pub fn cell<'a>(rows: &'a [Vec<String>], row: usize, column: &str) -> &'a str {
    let at = rows[0].iter().position(|name| name == column).unwrap_or_else(|| panic!("no {column} in {:?}", rows[0]));
    &rows[row][at]
}

async fn outcomes_are_ingested_paid_once_filtered_counted_and_exported(stack: &Stack) {
    let receiver = Receiver::start().await;
    let team = stack.team("Reporting", false, 100).await;
    let api = stack.client(&team.key);
    let hook = json!({ "url": format!("{}/calls", receiver.url), "events": ["credits.low", "call.ended"] });
    api.post("/webhooks", hook).await.expect(201);
    api.put("/credits/alert", json!({ "threshold": 50 })).await.expect(200);
    let agent = api.post("/agents", json!({ "name": "Front desk", "type": "phone" })).await.expect(201)["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut runtime = Runtime::connect(stack).await;

    // A successful call, paid in full; its EndCall sent twice debits once.
    let mut first = upsert(&team, "won", "+14155550101", "INCOMING", "2026-03-01T10:00:00Z");
    first.agent_id = Some(agent.clone());
    let won = runtime.call(first).await.unwrap();
    let report = EndCallRequest {
        analysis: Some(CallAnalysis { summary: Some(AWKWARD.into()), ..analysis("positive", Some(true), "") }),
        disconnection_reason: Some("customer_hangup".into()),
        cost_credits: Some(60),
        score: Some(0.9),
        ..end(&team, "won", "2026-03-01T10:02:00Z")
    };
    ended(&mut runtime, report.clone()).await.unwrap();
    ended(&mut runtime, report.clone()).await.unwrap();
    assert_eq!(balance(&api).await, 40, "debited once");

    // A different cost for the same call is refused, and takes nothing.
    let changed = EndCallRequest { cost_credits: Some(61), ..report.clone() };
    assert_eq!(ended(&mut runtime, changed).await.unwrap_err().details[0].field, "costCredits");
    assert_eq!(balance(&api).await, 40);

    // Custom values the agent does not declare, a bad sentiment or reason: refused, naming the
    // field, and nothing of the call changes.
    runtime.call(upsert(&team, "lost", "+14155550102", "OUTGOING", "2026-03-01T12:00:00Z")).await.unwrap();
    let refusals = [
        (
            EndCallRequest {
                analysis: Some(analysis("negative", None, r#"{"mood": "sad"}"#)),
                ..end(&team, "lost", "2026-03-01T12:01:00Z")
            },
            "analysis.custom.mood",
        ),
        (
            EndCallRequest {
                analysis: Some(analysis("negative", None, "[1]")),
                ..end(&team, "lost", "2026-03-01T12:01:00Z")
            },
            "analysis.custom",
        ),
        (
            EndCallRequest {
                analysis: Some(analysis("grumpy", None, "")),
                ..end(&team, "lost", "2026-03-01T12:01:00Z")
            },
            "analysis.sentiment",
        ),
        (
            EndCallRequest {
                disconnection_reason: Some("vanished".into()),
                ..end(&team, "lost", "2026-03-01T12:01:00Z")
            },
            "disconnectionReason",
        ),
        (EndCallRequest { cost_credits: Some(-1), ..end(&team, "lost", "2026-03-01T12:01:00Z") }, "costCredits"),
    ];
    for (request, field) in refusals {
        let error = ended(&mut runtime, request).await.unwrap_err();
        assert_eq!(error.kind, switchboard_kit::ErrorKind::Validation, "{error:?}");
        assert_eq!(error.details.iter().map(|d| d.field.as_str()).collect::<Vec<_>>(), [field]);
    }
    let lost = api.get("/calls?callType=outgoing").await.expect(200)["data"][0].clone();
    assert_eq!((lost["endedAt"].clone(), lost["analysis"].clone()), (Value::Null, Value::Null), "nothing written");
    assert_eq!(balance(&api).await, 40);

    // An unsuccessful call that costs more than is left: the balance is emptied, the rest unpaid.
    let report_lost = EndCallRequest {
        analysis: Some(analysis("negative", Some(false), "{}")),
        disconnection_reason: Some("agent_hangup".into()),
        cost_credits: Some(50),
        ..end(&team, "lost", "2026-03-01T12:00:30Z")
    };
    ended(&mut runtime, report_lost).await.unwrap();
    assert_eq!(balance(&api).await, 0);
    // A call in progress the next day, never analysed.
    runtime.call(upsert(&team, "open", "+14155550103", "INCOMING", "2026-03-02T08:00:00Z")).await.unwrap();

    // credits.low once (100 → 40 crossed 50), and call.ended carrying the outcome.
    let got = receiver.wait_for("/calls", 3, "credits.low and two call.ended").await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let got = receiver.on("/calls").into_iter().chain(got).collect::<Vec<_>>();
    let low: Vec<_> = got.iter().filter(|r| r.kind() == "credits.low").map(|r| r.json()["data"].clone()).collect();
    assert!(!low.is_empty() && low.iter().all(|data| data["balance"] == 40), "{low:?}");
    assert_eq!(receiver.on("/calls").iter().filter(|r| r.kind() == "credits.low").count(), 1, "told once");
    let told =
        receiver.on("/calls").into_iter().find(|r| r.kind() == "call.ended" && r.json()["data"]["id"] == won.as_str());
    let told = told.expect("call.ended of the won call").json()["data"].clone();
    assert_eq!(told["analysis"]["sentiment"], "positive");
    assert_eq!((told["disconnectionReason"].as_str(), told["cost"].as_i64()), (Some("customer_hangup"), Some(60)));

    // The calls show their outcome.
    let read = api.get(&format!("/calls/{won}")).await;
    let read = &read.expect(200)["data"];
    assert_eq!(
        read["analysis"],
        json!({ "summary": AWKWARD, "sentiment": "positive", "successful": true, "custom": {} })
    );
    assert_eq!((read["cost"].as_i64(), read["costUnpaid"].as_i64()), (Some(60), Some(0)));
    let lost = api.get("/calls?successful=false").await;
    let lost = &lost.expect(200)["data"];
    assert_eq!(lost.as_array().unwrap().len(), 1);
    assert_eq!((lost[0]["cost"].as_i64(), lost[0]["costUnpaid"].as_i64()), (Some(50), Some(10)));
    assert_eq!(lost[0]["disconnectionReason"], "agent_hangup");

    // Filters, alone and together; bad values name their parameter.
    let count = |query: &'static str| {
        let api = api.clone();
        async move { api.get(&format!("/calls?{query}")).await.expect(200)["data"].as_array().unwrap().len() }
    };
    assert_eq!(count("sentiment=positive").await, 1);
    assert_eq!(count("sentiment=unknown").await, 0, "a call without analysis has no sentiment");
    assert_eq!(count("successful=true").await, 1);
    assert_eq!(count("disconnectionReason=agent_hangup").await, 1);
    assert_eq!(count("disconnectionReason=agent_hangup&successful=true").await, 0);
    for (query, field) in [
        ("sentiment=happy", "sentiment"),
        ("successful=maybe", "successful"),
        ("disconnectionReason=vanished", "disconnectionReason"),
    ] {
        let refused = api.get(&format!("/calls?{query}")).await;
        assert_eq!(refused.error_code(400), "VALIDATION_ERROR", "{query}");
        assert_eq!(refused.fields(), [field]);
        let refused = api.get(&format!("/calls/export?{query}")).await;
        assert_eq!((refused.status, refused.fields()), (400, vec![field.to_owned()]), "export {query}");
    }

    // Analytics: one entry per day, zeros included.
    let analytics = api.get("/analytics/calls?from=2026-03-01&to=2026-03-03&interval=day").await;
    let days = analytics.expect(200)["data"].as_array().unwrap().clone();
    assert_eq!(days.len(), 3);
    let reasons = |customer: i64, agent: i64| {
        json!({ "customer_hangup": customer, "agent_hangup": agent, "transfer": 0, "voicemail": 0,
                "no_answer": 0, "busy": 0, "error": 0, "other": 0 })
    };
    assert_eq!(
        days[0],
        json!({ "date": "2026-03-01", "calls": 2, "minutes": 2.5, "successful": 1, "unsuccessful": 1,
                "sentiment": { "positive": 1, "neutral": 0, "negative": 1, "unknown": 0 },
                "disconnectionReasons": reasons(1, 1), "cost": 110 })
    );
    assert_eq!(
        days[1],
        json!({ "date": "2026-03-02", "calls": 1, "minutes": 0.0, "successful": 0, "unsuccessful": 0,
                "sentiment": { "positive": 0, "neutral": 0, "negative": 0, "unknown": 1 },
                "disconnectionReasons": reasons(0, 0), "cost": 0 })
    );
    assert_eq!(days[2]["calls"], 0);
    let of_agent = api.get(&format!("/analytics/calls?from=2026-03-01&to=2026-03-01&agentId={agent}")).await;
    assert_eq!(of_agent.expect(200)["data"][0]["calls"], 1);
    assert_eq!(api.get("/analytics/calls?from=2026-03-02&to=2026-03-01").await.fields(), ["from"]);
    assert_eq!(api.get("/analytics/calls?from=2024-01-01&to=2026-03-01").await.fields(), ["from"]);
    assert_eq!(api.get("/analytics/calls?agentId=nope").await.fields(), ["agentId"]);
    assert_eq!(api.get("/analytics/calls").await.expect(200)["data"].as_array().unwrap().len(), 30);

    // The export: CSV, every call once, the awkward summary read back as it was. The people
    // called are named by the CRM: the caller of an incoming call, the callee of an outgoing one.
    let contact = json!({ "number": "+14155550101", "firstName": "Ada", "lastName": "King" });
    api.post("/contacts", contact).await.expect(201);
    api.post("/contacts", json!({ "number": "+1 (628) 555-0100", "firstName": "Front Line" })).await.expect(201);
    let export = api.get("/calls/export").await;
    assert_eq!(export.status, 200, "{}", export.text);
    assert_eq!(export.headers["content-type"], "text/csv; charset=utf-8");
    let table = rows(&export.text);
    assert_eq!(table.len(), 4, "{table:?}");
    assert_eq!(&table[0][..4], ["id", "created_at", "ended_at", "type"]);
    assert_eq!(cell(&table, 1, "id"), won);
    assert_eq!(cell(&table, 1, "summary"), AWKWARD);
    assert_eq!(
        [cell(&table, 1, "sentiment"), cell(&table, 1, "successful"), cell(&table, 1, "disconnection_reason")],
        ["positive", "true", "customer_hangup"]
    );
    assert_eq!([cell(&table, 2, "cost"), cell(&table, 2, "cost_unpaid")], ["50", "10"]);
    assert_eq!(cell(&table, 1, "agent_name"), "Front desk");
    assert_eq!([cell(&table, 3, "sentiment"), cell(&table, 3, "cost"), cell(&table, 3, "ended_at")], ["", "", ""]);
    // Issue 55: what an analyst asks for first. The columns added last keep the older ones' places.
    assert_eq!(&table[0][16..20], ["contact_name", "score", "call_url", "recording_url"]);
    assert_eq!([cell(&table, 1, "contact_name"), cell(&table, 1, "score")], ["Ada King", "0.9"]);
    assert_eq!(cell(&table, 2, "contact_name"), "Front Line", "an outgoing call names whom it called");
    assert_eq!([cell(&table, 3, "contact_name"), cell(&table, 3, "score")], ["", ""], "no contact, no score");
    let call_url = cell(&table, 1, "call_url");
    assert!(call_url.starts_with("http") && call_url.ends_with(&format!("/calls/{won}")), "{call_url}");
    assert_eq!(cell(&table, 1, "recording_url"), "", "a call without a recording links none");
    let filtered = rows(&api.get("/calls/export?sentiment=negative").await.text);
    assert_eq!((filtered.len(), cell(&filtered, 1, "summary")), (2, ""));

    // Another team sees none of it.
    let other = stack.team("Reporting Other", false, 0).await;
    let stranger = stack.client(&other.key);
    assert_eq!(rows(&stranger.get("/calls/export").await.text).len(), 1, "a header only");
    let theirs = stranger.get("/analytics/calls?from=2026-03-01&to=2026-03-03").await;
    assert!(theirs.expect(200)["data"].as_array().unwrap().iter().all(|day| day["calls"] == 0));
    assert_eq!(stranger.get(&format!("/calls/{won}")).await.error_code(404), "NOT_FOUND");
}

/// An agency reads a subteam's analytics and export with `teamId`, as it reads its usage;
/// another team cannot.
async fn an_agency_reads_a_subteams_outcomes_with_team_id(stack: &Stack) {
    let agency = stack.team("Outcomes Agency", true, 100).await;
    let api = stack.client(&agency.key);
    let subteam = api.post("/agency/subteams", subteam_body("Outcomes Client")).await.expect(201)["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let client = Team { id: subteam.clone(), key: String::new() };
    let mut runtime = Runtime::connect(stack).await;
    runtime.call(upsert(&client, "sub", "+14155550104", "INCOMING", "2026-03-05T09:00:00Z")).await.unwrap();
    let report = EndCallRequest {
        analysis: Some(analysis("neutral", Some(true), "")),
        disconnection_reason: Some("transfer".into()),
        cost_credits: Some(3),
        ..end(&client, "sub", "2026-03-05T09:03:00Z")
    };
    ended(&mut runtime, report).await.unwrap();

    let scoped = api.get(&format!("/analytics/calls?from=2026-03-05&to=2026-03-05&teamId={subteam}")).await;
    let day = &scoped.expect(200)["data"][0];
    assert_eq!((day["calls"].as_i64(), day["minutes"].as_f64(), day["cost"].as_i64()), (Some(1), Some(3.0), Some(3)));
    assert_eq!(day["disconnectionReasons"]["transfer"], 1);
    let own = api.get("/analytics/calls?from=2026-03-05&to=2026-03-05").await;
    assert_eq!(own.expect(200)["data"][0]["calls"], 0, "the agency's own calls are its own");
    let export = api.get(&format!("/calls/export?teamId={subteam}")).await;
    let table = rows(&export.text);
    assert_eq!((table.len(), cell(&table, 1, "sentiment")), (2, "neutral"));
    let call_url = cell(&table, 1, "call_url");
    assert!(call_url.ends_with(&format!("?teamId={subteam}")), "the link opens the subteam's call: {call_url}");

    let other = stack.team("Outcomes Other", false, 0).await;
    let stranger = stack.client(&other.key);
    for path in ["/analytics/calls", "/calls/export"] {
        let refused = stranger.get(&format!("{path}?teamId={subteam}")).await;
        assert!(matches!(refused.status, 403 | 404), "{path}: {}", refused.status);
    }
}

#[tokio::test]
async fn call_outcomes_on_sqlite() {
    let stack = Stack::start_with(&FAST_RETRIES).await;
    outcomes_are_ingested_paid_once_filtered_counted_and_exported(&stack).await;
    an_agency_reads_a_subteams_outcomes_with_team_id(&stack).await;
}

#[tokio::test]
async fn call_outcomes_on_postgres() {
    let Some(stack) = Stack::serve_on_postgres(&SERVED, &FAST_RETRIES).await else {
        return;
    };
    outcomes_are_ingested_paid_once_filtered_counted_and_exported(&stack).await;
    an_agency_reads_a_subteams_outcomes_with_team_id(&stack).await;
}

/// With identity down, an EndCall with a cost fails UNAVAILABLE and writes nothing: the runtime
/// retries later, and the debit's reference makes that safe.
#[tokio::test]
async fn an_end_with_a_cost_fails_unavailable_while_identity_is_down() {
    let Some(mut stack) = Stack::serve_on_postgres(&SERVED, &[]).await else {
        return;
    };
    let team = stack.team("Outage", false, 100).await;
    let mut runtime = Runtime::connect(&stack).await;
    let id = runtime.call(upsert(&team, "down", "+14155550105", "INCOMING", "2026-03-06T09:00:00Z")).await.unwrap();
    let url = stack.grpc_url("conversations");
    stack.stop("identity").await;
    let report = EndCallRequest { cost_credits: Some(5), ..end(&team, "down", "2026-03-06T09:01:00Z") };
    let error = ended(&mut runtime, report).await.unwrap_err();
    assert_eq!(error.kind, switchboard_kit::ErrorKind::Unavailable, "{error:?}");
    let channel = tonic::transport::Channel::from_shared(url).unwrap().connect().await.unwrap();
    let mut reader = switchboard_proto::v1::conversations_service_client::ConversationsServiceClient::new(channel);
    let read = reader
        .get_call(runtime.signed(switchboard_proto::v1::GetCallRequest { team_id: team.id.clone(), call_id: id }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((read.ended_at_ms, read.cost_credits), (None, None), "nothing written");
}
