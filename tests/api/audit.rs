//! The audit log records every write of a team's data (issue 55): the walk below performs
//! each write the OpenAPI description declares with `x-audit-action`, as a client would, and
//! finds its entry: the action, who did it, the target by id and by name, and the fields it set.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::accounts::{PASSWORD, browser, owner, token_of};
use crate::auth::subteam_body;
use crate::common::multipart::{self, Part};
use crate::common::{Api, Response, Stack};
use crate::knowledge_sources::{ENV, FAQ, Pages, page, settled, web_server};
use crate::webhooks::{Receiver, deliveries_until};

/// Audited writes whose entries another test asserts, and why they are not walked here.
const WALKED_ELSEWHERE: [(&str, &str); 3] = [
    ("setSso", "tests/api/sso.rs (sso_domains_count_only_once_proven_by_dns_or_https): needs an OpenID provider"),
    ("verifySsoDomain", "tests/api/sso.rs (sso_domains_count_only_once_proven_by_dns_or_https): needs DNS proofs"),
    ("deleteSso", "tests/api/sso.rs (sso_domains_count_only_once_proven_by_dns_or_https): needs SSO set up first"),
];

/// What a write should have left in the log.
struct Expected {
    operation: &'static str,
    target: String,
    /// The target's name, when the answer names it.
    name: Option<String>,
    changes: Vec<&'static str>,
    actor: &'static str,
}

/// The writes done so far, and the audit actions the description declares for them.
struct Walk {
    declared: BTreeMap<String, String>,
    expected: Vec<Expected>,
}

impl Walk {
    /// `operation` answered 2xx; its `data`.
    fn done(&mut self, operation: &'static str, answer: &Response) -> Value {
        assert!(self.declared.contains_key(operation), "{operation} declares no x-audit-action");
        assert!((200..300).contains(&answer.status), "{operation}: {} {:#}", answer.status, answer.body);
        answer.body["data"].clone()
    }

    fn expect(&mut self, operation: &'static str, target: &str, name: Option<&str>, changes: &[&'static str]) {
        self.expect_by(operation, target, name, changes, "key");
    }

    fn expect_by(
        &mut self,
        operation: &'static str,
        target: &str,
        name: Option<&str>,
        changes: &[&'static str],
        actor: &'static str,
    ) {
        self.expected.push(Expected {
            operation,
            target: target.to_owned(),
            name: name.map(str::to_owned),
            changes: changes.to_vec(),
            actor,
        });
    }

    /// Every expected entry is in `log` (of the team the writes acted on).
    fn check(&self, log: &[Value], operations: &[&'static str]) {
        for expected in self.expected.iter().filter(|e| operations.contains(&e.operation)) {
            let action = &self.declared[expected.operation];
            let found = log.iter().find(|entry| {
                entry["action"] == action.as_str()
                    && entry["target"] == expected.target.as_str()
                    && entry["actor"]["type"] == expected.actor
                    && expected.name.as_ref().is_none_or(|name| entry["targetName"] == name.as_str())
                    && changes_of(entry) == expected.changes.iter().map(|c| (*c).to_owned()).collect::<BTreeSet<_>>()
            });
            assert!(
                found.is_some(),
                "{} ({action}) on {} named {:?} changing {:?} by a {}: not in the log {:#}",
                expected.operation,
                expected.target,
                expected.name,
                expected.changes,
                expected.actor,
                Value::from(log.iter().filter(|e| e["action"] == action.as_str()).cloned().collect::<Vec<_>>())
            );
            let entry = found.unwrap();
            assert!(!entry["device"].as_str().unwrap_or_default().is_empty(), "a device: {entry}");
        }
    }
}

fn changes_of(entry: &Value) -> BTreeSet<String> {
    entry["changes"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()).collect()
}

fn id_of(data: &Value) -> String {
    data["id"].as_str().unwrap_or_else(|| panic!("an id: {data}")).to_owned()
}

/// All of a team's entries, every page.
async fn whole_log(api: &Api) -> Vec<Value> {
    let mut all = Vec::new();
    for page in 1..=20 {
        let answer = api.get(&format!("/audit-log?limit=100&page={page}")).await.expect(200).clone();
        let entries = answer["data"].as_array().unwrap().clone();
        all.extend(entries);
        if answer["pagination"]["totalPages"].as_u64().unwrap() <= page {
            return all;
        }
    }
    panic!("more than 2,000 audit entries");
}

/// The operations the description says write a team's data: every write but a person's own
/// account, the session flow (the identity service audits those itself), MCP (whose tools
/// are the operations themselves) and those it marks `x-changes-nothing`.
fn audited_writes(description: &Value) -> BTreeMap<String, String> {
    let mut declared = BTreeMap::new();
    for (path, item) in description["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if !["post", "put", "patch", "delete"].contains(&method.as_str()) {
                continue;
            }
            if path.starts_with("/auth/") || path == "/me" || path.starts_with("/me/") || path == "/mcp" {
                continue;
            }
            // The "Try it" chat: a POST that writes nothing of the team's.
            if operation["x-changes-nothing"] == true {
                continue;
            }
            let id = operation["operationId"].as_str().unwrap().to_owned();
            let action = operation["x-audit-action"].as_str();
            let action = action.unwrap_or_else(|| panic!("{method} {path} ({id}) writes the team's data unaudited"));
            declared.insert(id, action.to_owned());
        }
    }
    declared
}

#[tokio::test]
async fn every_declared_write_of_a_teams_data_leaves_an_audit_entry() {
    let pages: Pages = Arc::default();
    page(&pages, "/faq", 200, "text/html; charset=utf-8", FAQ);
    page(&pages, "/about", 200, "text/html; charset=utf-8", FAQ);
    let site = web_server(pages.clone()).await;
    let receiver = Receiver::start().await;
    let mut env = ENV.to_vec();
    env.push(("SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE", "true"));
    env.push(("SWITCHBOARD_RATE_LIMIT_BULK", "100000"));
    let stack = Stack::start_with(&env).await;
    let description = stack.anonymous().get("/openapi.json").await.expect(200).clone();
    let mut walk = Walk { declared: audited_writes(&description), expected: Vec::new() };
    let team = stack.team("Audited", false, 1000).await;
    let api = stack.client(&team.key);
    let owner_session = owner(&stack, &team.id, "owner@audited.example").await;

    // Agents and their instructions.
    let body = json!({ "name": "Front desk", "type": "phone", "instructions": "Greet callers." });
    let agent = id_of(&walk.done("createAgent", &api.post("/agents", body).await));
    walk.expect("createAgent", &agent, Some("Front desk"), &["name", "type", "instructions"]);
    let body = json!({ "description": "Answers the lobby line", "unknownMember": 1 });
    walk.done("updateAgent", &api.put(&format!("/agents/{agent}"), body).await);
    walk.expect("updateAgent", &agent, Some("Front desk"), &["description"]);
    let body = json!({ "instructions": "Greet callers warmly." });
    walk.done("updateAgentInstructions", &api.put(&format!("/agents/{agent}/instructions"), body).await);
    walk.expect("updateAgentInstructions", &agent, Some("Front desk"), &["instructions"]);
    let restore = format!("/agents/{agent}/instructions/history/1/restore");
    walk.done("restoreAgentInstructions", &api.post(&restore, json!({})).await);
    walk.expect("restoreAgentInstructions", &agent, Some("Front desk"), &[]);

    // A knowledge base, its webpages, documents and references; then the same through the agent.
    let kb = id_of(&walk.done("createKnowledgebase", &api.post("/knowledgebase", json!({ "name": "Handbook" })).await));
    walk.expect("createKnowledgebase", &kb, Some("Handbook"), &["name"]);
    let body = json!({ "name": "Staff handbook" });
    walk.done("updateKnowledgebase", &api.put(&format!("/knowledgebase/{kb}"), body).await);
    walk.expect("updateKnowledgebase", &kb, Some("Staff handbook"), &["name"]);
    walk.done("updateAgent", &api.put(&format!("/agents/{agent}"), json!({ "knowledgebaseId": kb })).await);
    walk.expect("updateAgent", &agent, Some("Front desk"), &["knowledgebaseId"]);
    let sources = [
        (format!("/knowledgebase/{kb}"), ["createWebpage", "updateWebpage", "refreshWebpage", "deleteWebpage"], "/faq"),
        (
            format!("/agents/{agent}/knowledgebase"),
            ["createAgentWebpage", "updateAgentWebpage", "refreshAgentWebpage", "deleteAgentWebpage"],
            "/about",
        ),
    ];
    for (base, [create, update, refresh, delete], path) in &sources {
        let body = json!({ "name": "FAQ", "url": format!("{site}{path}") });
        let webpage = id_of(&walk.done(create, &api.post(&format!("{base}/webpages"), body).await));
        walk.expect(create, &webpage, Some("FAQ"), &["name", "url"]);
        let item = format!("{base}/webpages/{webpage}");
        settled(&api, &item).await;
        walk.done(update, &api.put(&item, json!({ "notes": "The public FAQ" })).await);
        walk.expect(update, &webpage, Some("FAQ"), &["notes"]);
        walk.done(refresh, &api.post(&format!("{item}/refresh"), json!({})).await);
        walk.expect(refresh, &webpage, None, &[]);
        settled(&api, &item).await;
        walk.done(delete, &api.delete(&item).await);
        walk.expect(delete, &webpage, Some("FAQ"), &[]);
    }
    let documents = [
        (format!("/knowledgebase/{kb}"), ["uploadDocument", "updateDocument", "deleteDocument"]),
        (
            format!("/agents/{agent}/knowledgebase"),
            ["uploadAgentDocument", "updateAgentDocument", "deleteAgentDocument"],
        ),
    ];
    for (base, [upload, update, delete]) in &documents {
        let (content_type, form) = multipart::form(&[Part::file("file", "hours.txt", b"We open at nine.")]);
        let sent = api.raw("POST", &format!("{base}/documents"), Some(&content_type), form).await;
        let document = id_of(&walk.done(upload, &sent));
        walk.expect(upload, &document, Some("hours.txt"), &["file"]);
        let item = format!("{base}/documents/{document}");
        walk.done(update, &api.put(&item, json!({ "name": "Opening hours" })).await);
        walk.expect(update, &document, Some("Opening hours"), &["name"]);
        walk.done(delete, &api.delete(&item).await);
        walk.expect(delete, &document, Some("Opening hours"), &[]);
    }
    let references = [
        (format!("/knowledgebase/{kb}"), ["createReference", "updateReference", "deleteReference"]),
        (
            format!("/agents/{agent}/knowledgebase"),
            ["createAgentReference", "updateAgentReference", "deleteAgentReference"],
        ),
    ];
    for (base, [create, update, delete]) in &references {
        let body = json!({ "question": "When do you open?", "answer": "At nine." });
        let reference = id_of(&walk.done(create, &api.post(&format!("{base}/references"), body).await));
        walk.expect(create, &reference, Some("When do you open?"), &["question", "answer"]);
        let item = format!("{base}/references/{reference}");
        walk.done(update, &api.put(&item, json!({ "answer": "At half past eight." })).await);
        walk.expect(update, &reference, Some("When do you open?"), &["answer"]);
        walk.done(delete, &api.delete(&item).await);
        walk.expect(delete, &reference, Some("When do you open?"), &[]);
    }
    let body = json!({ "references": [{ "question": "Do you deliver?", "answer": "Yes, daily." }] });
    walk.done("bulkCreateReferences", &api.post(&format!("/knowledgebase/{kb}/references/bulk"), body).await);
    walk.expect("bulkCreateReferences", &kb, None, &["references"]);

    // Calls and chats, as seeded.
    stack.admin(&["seed-demo", "--team", &team.id, "--calls", "2", "--chats", "1"]).await;
    let listed = api.get("/calls").await.expect(200)["data"][0].clone();
    let call = id_of(&listed);
    let numbers = format!("{} → {}", listed["from"].as_str().unwrap(), listed["to"].as_str().unwrap());
    walk.done("updateCall", &api.patch(&format!("/calls/{call}"), json!({ "favorite": true })).await);
    walk.expect("updateCall", &call, Some(&numbers), &["favorite"]);
    walk.done("deleteCall", &api.delete(&format!("/calls/{call}")).await);
    walk.expect("deleteCall", &call, Some(&numbers), &[]);
    let chat = id_of(&api.get("/chats").await.expect(200)["data"][0]);
    walk.done("deleteChat", &api.delete(&format!("/chats/{chat}")).await);
    walk.expect("deleteChat", &chat, None, &[]);

    // Members: an invitation accepted, another revoked; the team's sign-in policy.
    let body = json!({ "email": "mia@audited.example", "role": "member" });
    let invitation = walk.done("inviteMember", &api.post("/members/invitations", body).await);
    assert_eq!(invitation["mailed"], false, "a platform without SMTP mails nothing, and says so");
    walk.expect("inviteMember", &id_of(&invitation), Some("mia@audited.example"), &["email", "role"]);
    let accept =
        json!({ "token": token_of(&invitation["url"]), "password": PASSWORD, "firstName": "Mia", "lastName": "Lee" });
    let mia_session = browser(&stack, &stack.anonymous().post("/auth/accept-invite", accept).await);
    let mia = id_of(&mia_session.get("/me").await.expect(200)["data"]["user"]);
    walk.done("updateMember", &api.put(&format!("/members/{mia}"), json!({ "role": "admin" })).await);
    walk.expect("updateMember", &mia, Some("Mia Lee"), &["role"]);
    let body = json!({ "email": "leo@audited.example" });
    let leo = id_of(&walk.done("inviteMember", &api.post("/members/invitations", body).await));
    walk.done("revokeInvitation", &api.delete(&format!("/members/invitations/{leo}")).await);
    walk.expect("revokeInvitation", &leo, Some("leo@audited.example"), &[]);
    let body = json!({ "requireSecondFactor": false });
    walk.done("setSecurityPolicy", &owner_session.put("/members/security", body).await);
    walk.expect_by("setSecurityPolicy", "", None, &["requireSecondFactor"], "user");

    // The CRM.
    let tag = id_of(&walk.done("createTag", &api.post("/tags", json!({ "name": "Key account" })).await));
    walk.expect("createTag", &tag, Some("Key account"), &["name"]);
    walk.done("updateTag", &api.put(&format!("/tags/{tag}"), json!({ "color": "#10B981" })).await);
    walk.expect("updateTag", &tag, Some("Key account"), &["color"]);
    let body = json!({ "name": "Renewals", "stages": [{ "name": "New" }, { "name": "Won" }] });
    let board = id_of(&walk.done("createBoard", &api.post("/boards", body).await));
    walk.expect("createBoard", &board, Some("Renewals"), &["name", "stages"]);
    walk.done("updateBoard", &api.put(&format!("/boards/{board}"), json!({ "name": "Renewals pipeline" })).await);
    walk.expect("updateBoard", &board, Some("Renewals pipeline"), &["name"]);
    let body = json!({ "name": "licences", "label": "Licences", "type": "number" });
    let field = id_of(&walk.done("createCustomField", &api.post("/contacts/custom-fields", body).await));
    walk.expect("createCustomField", &field, Some("licences"), &["name", "label", "type"]);
    let path = format!("/contacts/custom-fields/{field}");
    walk.done("updateCustomField", &api.put(&path, json!({ "label": "Licence count" })).await);
    walk.expect("updateCustomField", &field, Some("licences"), &["label"]);
    let body = json!({ "number": "+14155550123", "firstName": "Ada", "lastName": "King", "tagIds": [tag] });
    let contact = id_of(&walk.done("createContact", &api.post("/contacts", body).await));
    walk.expect("createContact", &contact, Some("Ada King"), &["number", "firstName", "lastName", "tagIds"]);
    let body = json!({ "contacts": [{ "number": "+14155550124" }] });
    walk.done("bulkCreateContacts", &api.post("/contacts/bulk", body).await);
    walk.expect("bulkCreateContacts", "", None, &["contacts"]);
    let body = json!({ "email": "ada@example.com" });
    walk.done("updateContact", &api.put(&format!("/contacts/{contact}"), body).await);
    walk.expect("updateContact", &contact, Some("Ada King"), &["email"]);
    let note = walk.done(
        "addContactNote",
        &api.post(&format!("/contacts/{contact}/notes"), json!({ "note": "Called back" })).await,
    );
    let note = id_of(&note);
    walk.expect("addContactNote", &note, Some("Called back"), &["note"]);
    walk.done("deleteContactNote", &api.delete(&format!("/contacts/{contact}/notes/{note}")).await);
    walk.expect("deleteContactNote", &note, None, &[]);
    for (operation, method) in [("addContactAssignments", "POST"), ("replaceContactAssignments", "PUT")] {
        let path = format!("/contacts/{contact}/assignments");
        let request = api.request(method.parse().unwrap(), &path).json(&json!({ "userIds": [mia] }));
        walk.done(operation, &api.send(request).await);
        walk.expect(operation, &contact, None, &["userIds"]);
    }
    for (operation, method) in [("addContactBoards", "POST"), ("replaceContactBoards", "PUT")] {
        let path = format!("/contacts/{contact}/boards");
        let request = api.request(method.parse().unwrap(), &path).json(&json!({ "boardIds": [board] }));
        walk.done(operation, &api.send(request).await);
        walk.expect(operation, &contact, Some("Ada King"), &["boardIds"]);
    }
    walk.done("deleteContact", &api.delete(&format!("/contacts/{contact}")).await);
    walk.expect("deleteContact", &contact, Some("Ada King"), &[]);
    walk.done("deleteCustomField", &api.delete(&format!("/contacts/custom-fields/{field}")).await);
    walk.expect("deleteCustomField", &field, Some("licences"), &[]);
    walk.done("deleteBoard", &api.delete(&format!("/boards/{board}")).await);
    walk.expect("deleteBoard", &board, Some("Renewals pipeline"), &[]);
    walk.done("deleteTag", &api.delete(&format!("/tags/{tag}")).await);
    walk.expect("deleteTag", &tag, Some("Key account"), &[]);
    walk.done("removeMember", &api.delete(&format!("/members/{mia}")).await);
    walk.expect("removeMember", &mia, Some("Mia Lee"), &[]);

    // Webhooks (pausing one is a change of `enabled`), a test event and its delivery sent again.
    let body = json!({ "url": receiver.url, "events": ["contact.created"] });
    let made = walk.done("createWebhook", &api.post("/webhooks", body).await);
    let (webhook, url) = (id_of(&made), made["url"].as_str().unwrap().to_owned());
    walk.expect("createWebhook", &webhook, Some(&url), &["url", "events"]);
    walk.done("updateWebhook", &api.put(&format!("/webhooks/{webhook}"), json!({ "enabled": false })).await);
    walk.expect("updateWebhook", &webhook, Some(&url), &["enabled"]);
    api.put(&format!("/webhooks/{webhook}"), json!({ "enabled": true })).await.expect(200);
    walk.done("testWebhook", &api.post(&format!("/webhooks/{webhook}/test"), json!({})).await);
    walk.expect("testWebhook", &webhook, None, &[]);
    let delivered = deliveries_until(&api, &webhook, "the test event delivered", |all| {
        all.first().is_some_and(|delivery| delivery["status"] == "delivered")
    })
    .await;
    let delivery = id_of(&delivered[0]);
    let retry = format!("/webhooks/{webhook}/deliveries/{delivery}/retry");
    walk.done("retryWebhookDelivery", &api.post(&retry, json!({})).await);
    walk.expect("retryWebhookDelivery", &delivery, None, &[]);
    walk.done("deleteWebhook", &api.delete(&format!("/webhooks/{webhook}")).await);
    walk.expect("deleteWebhook", &webhook, Some(&url), &[]);
    walk.done("setCreditsAlert", &api.put("/credits/alert", json!({ "threshold": 10 })).await);
    walk.expect("setCreditsAlert", "", None, &["threshold"]);

    // Keys.
    let key = id_of(&walk.done("createApiKey", &api.post("/api-keys", json!({ "name": "ci" })).await));
    walk.expect("createApiKey", &key, Some("ci"), &["name"]);
    walk.done("revokeApiKey", &api.delete(&format!("/api-keys/{key}")).await);
    walk.expect("revokeApiKey", &key, Some("ci"), &[]);

    // What is left goes last.
    walk.done("deleteKnowledgebase", &api.delete(&format!("/knowledgebase/{kb}")).await);
    walk.expect("deleteKnowledgebase", &kb, Some("Staff handbook"), &[]);
    walk.done("deleteAgent", &api.delete(&format!("/agents/{agent}")).await);
    walk.expect("deleteAgent", &agent, Some("Front desk"), &[]);

    // An agency's subteams, in the agency's own log.
    let agency = stack.team("Agency", true, 1000).await;
    let agency_api = stack.client(&agency.key);
    let subteam =
        id_of(&walk.done("createSubteam", &agency_api.post("/agency/subteams", subteam_body("Client")).await));
    let subteam_fields = ["firstName", "lastName", "teamName", "email", "totalMonthlyCredits"];
    walk.expect("createSubteam", &subteam, Some("Client"), &subteam_fields);
    let path = format!("/agency/subteams/{subteam}");
    walk.done("updateSubteam", &agency_api.put(&path, json!({ "name": "Client two" })).await);
    walk.expect("updateSubteam", &subteam, Some("Client two"), &["name"]);
    walk.done("addSubteamCredits", &agency_api.post(&format!("{path}/credits"), json!({ "amount": 5 })).await);
    walk.expect("addSubteamCredits", &subteam, Some("Client two"), &["amount"]);
    walk.done("deleteSubteam", &agency_api.delete(&path).await);
    walk.expect("deleteSubteam", &subteam, Some("Client two"), &[]);

    // A write that failed wrote nothing.
    let missing = uuid::Uuid::new_v4();
    assert_eq!(api.delete(&format!("/agents/{missing}")).await.status, 404);

    let agency_operations = ["createSubteam", "updateSubteam", "addSubteamCredits", "deleteSubteam"];
    let team_operations: Vec<&'static str> =
        walk.expected.iter().map(|e| e.operation).filter(|op| !agency_operations.contains(op)).collect();
    let log = whole_log(&api).await;
    walk.check(&log, &team_operations);
    assert!(log.iter().all(|entry| entry["target"] != missing.to_string().as_str()), "a failed write was logged");
    let agency_log = whole_log(&agency_api).await;
    walk.check(&agency_log, &agency_operations);
    // Each team sees its own writes only.
    assert!(agency_log.iter().all(|entry| entry["target"] != agent.as_str()), "{agency_log:#?}");
    assert!(log.iter().all(|entry| entry["target"] != subteam.as_str()));

    // Every declared audited write was walked, or its test is named.
    let walked: BTreeSet<&str> = walk.expected.iter().map(|e| e.operation).collect();
    for operation in walk.declared.keys() {
        let elsewhere = WALKED_ELSEWHERE.iter().any(|(name, _)| name == operation);
        assert!(walked.contains(operation.as_str()) || elsewhere, "{operation} is audited, but not walked");
    }
}
