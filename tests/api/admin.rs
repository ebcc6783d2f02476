//! The `switchboard admin` commands an operator runs: teams, keys and credits managed from the
//! shell, each answering JSON that scripts can read.

use crate::common::Stack;
use serde_json::{Value, json};

#[tokio::test]
async fn admin_commands_manage_teams_keys_and_credits_as_json() {
    let stack = Stack::start().await;
    let agency = stack.admin(&["create-team", "--name", "Agency", "--agency", "--credits", "50"]).await;
    assert_eq!(agency["ownsAgency"], true);
    assert_eq!(agency["credits"]["balance"], 50);
    let agency_id = agency["id"].as_str().unwrap();

    let client = stack.admin(&["create-team", "--name", "Client", "--parent", agency_id]).await;
    assert_eq!(client["parentTeamId"], agency_id);

    let key = stack.admin(&["create-key", "--team", agency_id, "--name", "ci", "--read-only"]).await;
    let secret = key["key"].as_str().unwrap();
    assert!(secret.starts_with("ew_") && secret.len() >= 30);
    assert_eq!(key["access"], "read_only");

    let listed = stack.admin(&["list-keys", "--team", agency_id]).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(!listed.to_string().contains(secret), "listing must not reveal the key");
    assert_eq!(listed[0]["prefix"], key["prefix"]);

    let revoked = stack.admin(&["revoke-key", key["id"].as_str().unwrap()]).await;
    assert!(revoked["revokedAt"].is_string());
    let granted = stack.admin(&["grant-credits", "--team", agency_id, "25"]).await;
    assert_eq!(granted["balance"], 75);
}

/// The first names a demo contact or caller can have (src/seed/crm.rs holds them all).
const DEMO_NAMES: [&str; 32] = [
    "Grace", "Liam", "Sofia", "Noah", "Amara", "Mateo", "Chloé", "Kenji", "Priya", "Oliver", "Zanele", "Lukas", "Ada",
    "Alan", "Maya", "Ravi", "Elena", "Tomás", "Ingrid", "Yusuf", "Hannah", "Diego", "Mei", "Kwame", "Freya", "Arjun",
    "Lucía", "Emil", "Nadia", "Owen", "Sakura", "Tariq",
];
const BUSINESSES: [&str; 2] = ["Bright Smile Dental", "Northwind Goods"];

/// The demo names a text says, as whole words.
fn names_in(text: &str) -> Vec<&'static str> {
    let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).collect();
    DEMO_NAMES.iter().copied().filter(|name| words.contains(name)).collect()
}

/// Issue 40: seed-demo's data contradicted itself (a contact owning the team's line and linked to
/// 17 strangers' calls, a trattoria's summaries beside a dental clinic's chats, a bare-number chat
/// opening "Hi Priya", recordings of 3 s on 39 s calls). One seed is one business; the team's
/// lines are nobody's; a conversation names only its own contact; a recording lasts its call.
#[tokio::test]
async fn seed_demo_writes_one_coherent_business() {
    let stack = Stack::start().await;
    let team = stack.team("Demo", false, 0).await;
    let api = stack.client(&team.key);
    let args = ["seed-demo", "--team", &team.id, "--calls", "40", "--chats", "20", "--recordings", "3"];
    stack.admin(&args).await;
    let calls = api.get("/calls?limit=100").await.expect(200)["data"].as_array().unwrap().clone();
    let chats = api.get("/chats?limit=100").await.expect(200)["data"].as_array().unwrap().clone();
    let contacts = api.get("/contacts?limit=100").await.expect(200)["data"].as_array().unwrap().clone();
    assert_eq!((calls.len(), chats.len(), contacts.len()), (40, 20, 30));

    // One business: every summary, every chat names it.
    let first_summary = calls.iter().find_map(|call| call["summary"].as_str()).expect("a summary");
    let business = *BUSINESSES.iter().find(|b| first_summary.contains(*b)).expect("the summary names a business");
    for summary in calls.iter().chain(&chats).filter_map(|c| c["summary"].as_str()) {
        assert!(summary.contains(business), "{summary:?} is not about {business}");
    }

    // The analysis agrees with the call: a transferred call was a billing complaint that failed
    // and ended in a transfer, an unanswered one has no analysis, every answered one has a
    // sentiment and an outcome.
    for call in &calls {
        let (summary, analysis, reason) = (call["summary"].as_str(), &call["analysis"], &call["disconnectionReason"]);
        match summary {
            None if call["status"] == "no-answer" => {
                assert_eq!((analysis, reason), (&Value::Null, &json!("no_answer")), "{call}");
            }
            None => assert_eq!(analysis, &Value::Null, "a call in progress: {call}"),
            Some(summary) if summary.contains("transferred") => {
                assert_eq!(reason, "transfer", "{call}");
                assert_eq!((&analysis["sentiment"], &analysis["successful"]), (&json!("negative"), &json!(false)));
            }
            Some(_) => {
                assert!(["customer_hangup", "agent_hangup"].contains(&reason.as_str().unwrap()), "{call}");
                assert!(["positive", "neutral"].contains(&analysis["sentiment"].as_str().unwrap()), "{call}");
                assert_eq!(analysis["successful"], true, "{call}");
            }
        }
    }

    // The team's own lines are no contact's number.
    let lines: std::collections::HashSet<&str> = calls
        .iter()
        .map(|call| if call["type"] == "INCOMING" { &call["to"] } else { &call["from"] })
        .map(|n| n.as_str().unwrap())
        .collect();
    let by_number: std::collections::HashMap<&str, &Value> =
        contacts.iter().map(|c| (c["number"].as_str().unwrap(), c)).collect();
    let by_email: std::collections::HashMap<&str, &Value> =
        contacts.iter().filter_map(|c| Some((c["email"].as_str()?, c))).collect();
    for line in &lines {
        assert!(!by_number.contains_key(line), "the team's line {line} is a contact's number");
    }

    // A call names nobody but its own contact (a stranger may give any name).
    let mut with_contacts = 0;
    for call in &calls {
        let theirs = if call["type"] == "INCOMING" { &call["from"] } else { &call["to"] };
        let Some(contact) = by_number.get(theirs.as_str().unwrap()) else { continue };
        with_contacts += 1;
        let text: String = call["transcript"].as_array().unwrap().iter().map(|s| format!("{}\n", s["text"])).collect();
        for name in names_in(&text) {
            assert_eq!(name, contact["firstName"].as_str().unwrap(), "call {} of {contact}: {text}", call["id"]);
        }
    }
    assert!(with_contacts > 0, "no call is with a contact");

    // A chat greets by name only the contact whose number or address it is from; every chat
    // names the business.
    let mut anonymous = 0;
    for chat in &chats {
        let id = chat["id"].as_str().unwrap();
        let detail = api.get(&format!("/chats/{id}?messagesLimit=100")).await.expect(200)["data"].clone();
        let text: String = detail["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| format!("{}\n", m["text"].as_str().unwrap()))
            .collect();
        assert!(text.contains(business), "chat {id} does not name {business}: {text}");
        let contact = chat["contact"]["number"]
            .as_str()
            .and_then(|n| by_number.get(n))
            .or_else(|| chat["contact"]["email"].as_str().and_then(|e| by_email.get(e)));
        match contact {
            Some(contact) => {
                for name in names_in(&text) {
                    assert_eq!(name, contact["firstName"].as_str().unwrap(), "chat {id} of {contact}: {text}");
                }
            }
            None => {
                anonymous += 1;
                assert_eq!(names_in(&text), Vec::<&str>::new(), "chat {id} of nobody known greets by name: {text}");
            }
        }
    }
    assert!(anonymous > 0 && anonymous < chats.len(), "both kinds of chats: {anonymous} of {}", chats.len());

    // Each recording lasts its call: the WAV header's data size over its byte rate.
    let http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(20)).build().unwrap();
    let recorded: Vec<&Value> = calls.iter().filter(|call| call["recordingUrl"].is_string()).collect();
    assert_eq!(recorded.len(), 3);
    for call in recorded {
        let url = call["recordingUrl"].as_str().unwrap();
        let head = http.get(url).header("Range", "bytes=0-43").send().await.unwrap().bytes().await.unwrap();
        assert_eq!(&head[..4], b"RIFF", "{url}");
        let word = |at: usize| f64::from(u32::from_le_bytes(head[at..at + 4].try_into().unwrap()));
        let seconds = word(40) / word(28);
        let duration = call["duration"].as_f64().expect("a recorded call has ended");
        assert!((seconds - duration).abs() <= 1.0, "a recording of {seconds} s on a call of {duration} s");
    }
}
