//! Proto messages as the public JSON shapes (camelCase, ISO timestamps).

use serde_json::{Value, json};
use switchboard_kit::time::iso_ms;
use switchboard_proto::v1::{AccessConfig, ApiKey, Identity, KeyAccess, Subteam, Team, TeamRef, User};

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
