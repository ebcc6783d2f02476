//! Proto messages as the public JSON shapes (camelCase, ISO timestamps).

use serde_json::{Value, json};
use switchboard_kit::time::iso_ms;
use switchboard_proto::v1::{
    AccessConfig, Agent, AgentType, ApiKey, Document, Identity, InstructionVersion, Instructions, KeyAccess,
    Knowledgebase, Reference, SearchHit, Subteam, Team, TeamRef, User, Webpage,
};

pub fn team(team: &Team) -> Value {
    json!({ "id": team.id, "name": team.name, "createdAt": iso_ms(team.created_at_ms) })
}

pub fn team_ref(team: &TeamRef) -> Value {
    json!({ "id": team.id, "name": team.name })
}

pub fn access_config(access: &AccessConfig) -> Value {
    json!({
        "users": access.users,
        "instructions": access.instructions,
        "instructionsWrite": access.instructions_write,
        "testing": access.testing,
        "knowledgeBase": access.knowledge_base,
        "agentConfiguration": access.agent_configuration,
        "agentCreation": access.agent_creation,
    })
}

pub fn key_access(key: &ApiKey) -> &'static str {
    match key.access() {
        KeyAccess::ReadOnly => "read_only",
        _ => "full",
    }
}

/// A key as `GET /me` shows it: never the secret.
pub fn api_key(key: &ApiKey) -> Value {
    json!({ "id": key.id, "name": key.name, "prefix": key.prefix, "access": key_access(key) })
}

pub fn identity(identity: &Identity, key: &ApiKey) -> Value {
    let team = identity.team.clone().unwrap_or_default();
    let subscription = identity.subscription.clone().unwrap_or_default();
    let mut view = json!({
        "team": self::team(&team),
        "ownsAgency": team.owns_agency,
        "credits": { "balance": identity.credit_balance },
        "subscription": {
            "plan": subscription.plan,
            "status": subscription.status,
            "currentPeriodEnd": subscription.current_period_end_ms.map(iso_ms),
        },
        "apiKey": api_key(key),
    });
    if let Some(agency) = &identity.agency_team {
        view["agencyTeam"] = team_ref(agency);
    }
    view
}

pub fn user(user: &User) -> Value {
    json!({
        "id": user.id,
        "firstName": user.first_name,
        "lastName": user.last_name,
        "email": user.email,
        "role": user.role,
        "createdAt": iso_ms(user.created_at_ms),
    })
}

pub fn subteam(subteam: &Subteam) -> Value {
    let team = subteam.team.clone().unwrap_or_default();
    json!({
        "id": team.id,
        "name": team.name,
        "createdAt": iso_ms(team.created_at_ms),
        "totalMonthlyCredits": team.monthly_credits,
        "credits": { "balance": subteam.credit_balance },
        "accessConfig": access_config(&team.access.unwrap_or_default()),
        "users": subteam.users.iter().map(user).collect::<Vec<_>>(),
    })
}

pub fn agent_type(agent: &Agent) -> &'static str {
    match agent.r#type() {
        AgentType::Phone => "phone",
        _ => "chat",
    }
}

/// An agent; `knowledgebase_name` is `None` when it has no (or no longer a) knowledge base.
pub fn agent(agent: &Agent, knowledgebase: Option<(&str, Option<&str>)>) -> Value {
    json!({
        "id": agent.id,
        "name": agent.name,
        "description": agent.description,
        "type": agent_type(agent),
        "knowledgebase": knowledgebase.map(|(id, name)| json!({ "id": id, "name": name })),
        "createdAt": iso_ms(agent.created_at_ms),
        "updatedAt": iso_ms(agent.updated_at_ms),
    })
}

pub fn agent_ref(agent: &Agent) -> Value {
    json!({ "id": agent.id, "name": agent.name, "type": agent_type(agent) })
}

pub fn instructions(instructions: &Instructions) -> Value {
    let optimization = instructions.optimization.clone().unwrap_or_default();
    json!({
        "id": instructions.agent_id,
        "name": instructions.agent_name,
        "instructions": instructions.instructions,
        "version": instructions.version,
        "updatedAt": iso_ms(instructions.updated_at_ms),
        "promptOptimization": {
            "status": optimization.status,
            "version": optimization.version,
            "completedAt": optimization.completed_at_ms.map(iso_ms),
            "error": optimization.error,
        },
    })
}

pub fn instruction_version(version: &InstructionVersion) -> Value {
    json!({
        "version": version.version,
        "instructions": version.instructions,
        "createdAt": iso_ms(version.created_at_ms),
        "replacedAt": iso_ms(version.replaced_at_ms),
    })
}

/// A Q&A entry: `type` is always `QA` (the hosted value); `source` says where it came from.
pub fn reference(reference: &Reference) -> Value {
    let source = reference.source.clone().unwrap_or_default();
    let mut source_view = json!({ "type": if source.r#type.is_empty() { "manual" } else { source.r#type.as_str() } });
    if let Some(id) = &source.id {
        source_view["id"] = Value::from(id.as_str());
        source_view["name"] = source.name.as_deref().map_or(Value::Null, Value::from);
    }
    json!({
        "id": reference.id,
        "question": reference.question,
        "answer": reference.answer,
        "type": "QA",
        "source": source_view,
        "createdAt": iso_ms(reference.created_at_ms),
        "updatedAt": iso_ms(reference.updated_at_ms),
    })
}

/// The spec's Knowledgebase: `references` holds manual references only.
pub fn knowledgebase(knowledgebase: &Knowledgebase) -> Value {
    json!({
        "id": knowledgebase.id,
        "name": knowledgebase.name,
        "description": knowledgebase.description,
        "webpages": knowledgebase.webpages.iter().map(webpage).collect::<Vec<_>>(),
        "documents": knowledgebase.documents.iter().map(document).collect::<Vec<_>>(),
        "references": knowledgebase.references.iter().map(reference).collect::<Vec<_>>(),
        "createdAt": iso_ms(knowledgebase.created_at_ms),
        "updatedAt": iso_ms(knowledgebase.updated_at_ms),
    })
}

/// A knowledge base in a list: its counts instead of its content.
pub fn knowledgebase_summary(knowledgebase: &Knowledgebase) -> Value {
    let counts = knowledgebase.counts.unwrap_or_default();
    json!({
        "id": knowledgebase.id,
        "name": knowledgebase.name,
        "description": knowledgebase.description,
        "counts": { "webpages": counts.webpages, "documents": counts.documents, "references": counts.references },
        "createdAt": iso_ms(knowledgebase.created_at_ms),
        "updatedAt": iso_ms(knowledgebase.updated_at_ms),
    })
}

pub fn search_hit(hit: &SearchHit) -> Value {
    let reference = hit.reference.clone().unwrap_or_default();
    let full = self::reference(&reference);
    json!({
        "reference": {
            "id": full["id"],
            "question": full["question"],
            "answer": full["answer"],
            "type": full["type"],
            "source": full["source"],
        },
        "similarity": hit.similarity,
    })
}

/// A webpage source: the spec's fields, the hosted `lastScrapedAt` and `isUpdating`, and
/// why the last scrape failed.
pub fn webpage(webpage: &Webpage) -> Value {
    json!({
        "id": webpage.id,
        "name": webpage.name,
        "url": webpage.url,
        "notes": webpage.notes,
        "status": webpage.status,
        "isUpdating": matches!(webpage.status.as_str(), "pending" | "refreshing"),
        "lastScrapedAt": webpage.last_scraped_at_ms.map(iso_ms),
        "failureReason": webpage.failure_reason,
        "entryCount": webpage.entry_count,
        "createdAt": iso_ms(webpage.created_at_ms),
        "updatedAt": iso_ms(webpage.updated_at_ms),
    })
}

/// The detail view: the record and the Q&A content extracted from the page.
pub fn webpage_detail(webpage: &Webpage) -> Value {
    let mut view = self::webpage(webpage);
    view["content"] = webpage.content.iter().map(reference).collect();
    view
}

/// An uploaded document: the spec's fields, the hosted `fileName` and `isUpdating`, and
/// what was stored.
pub fn document(document: &Document) -> Value {
    json!({
        "id": document.id,
        "name": document.name,
        "notes": document.notes,
        "fileName": document.file_name,
        "contentType": document.content_type,
        "size": document.size_bytes,
        "status": document.status,
        "isUpdating": document.status == "pending",
        "extractedAt": document.extracted_at_ms.map(iso_ms),
        "failureReason": document.failure_reason,
        "entryCount": document.entry_count,
        "createdAt": iso_ms(document.created_at_ms),
        "updatedAt": iso_ms(document.updated_at_ms),
    })
}

pub fn document_detail(document: &Document) -> Value {
    let mut view = self::document(document);
    view["content"] = document.content.iter().map(reference).collect();
    view
}
