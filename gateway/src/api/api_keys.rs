//! `/api-keys`: the keys a team manages itself, made and revoked over the API (identity
//! service). Only full-access keys and signed-in owners and admins may see or change them
//! (read-only keys not even list them): a key's names and prefixes are for whoever
//! administers the team. An agency acts on
//! a client's keys with `teamId`, which is how it gives a new client its first key.

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::api_keys::{KeyAccessView, NewApiKey, TeamApiKey};
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceResult, limits};
use switchboard_proto::v1::{CreateApiKeyRequest, KeyAccess, ListApiKeysRequest, RevokeApiKeyRequest};

use super::groups::IDENTITY;
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::{Created, Endpoint, Id, Input, Json, List, Nothing, Updated};

const KEY_GONE: &str = "API key not found (not one of the team's). Revoking a revoked key again answers it again.";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/api-keys", list)
            .doc("listApiKeys", IDENTITY, "The team's API keys that are not revoked, newest first")
            .lists("keyId")
            .about("Names, prefixes, access, when each was made and last used, and who made it; never a secret.")
            .needs_full_access()
            .for_admins()
            .class(RateClass::Write),
        Endpoint::post("/v1/api-keys", create)
            .shows_secret_once()
            .doc("createApiKey", IDENTITY, "Create an API key; the answer shows it once")
            .creates("keyId")
            .for_admins()
            .audited(AuditAction::ApiKeyCreated)
            .about(
                "The whole key is in the answer's `key`, and nowhere else ever after (it is stored as a hash). \
                 Its `createdBy` is the calling key, or the signed-in person.",
            )
            .fails(409, "The team has 100 active API keys already: revoke one first."),
        Endpoint::delete("/v1/api-keys/{keyId}", revoke)
            .doc("revokeApiKey", IDENTITY, "Revoke an API key for good")
            .for_admins()
            .audited(AuditAction::ApiKeyRevoked)
            .about(
                "The key is refused from then on: at once by the identity service, and by every gateway once its \
                 cache of the key expires (`SWITCHBOARD_AUTH_CACHE_TTL_MS`, 2 s by default). A key may revoke \
                 itself.",
            )
            .fails(404, KEY_GONE),
    ]
}

/// A key's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyPath {
    pub key_id: Id,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct CreateKey {
    /// A label saying what uses the key.
    #[schemars(length(min = limits::KEY_NAME.min, max = limits::KEY_NAME.max))]
    pub name: String,
    /// `full` (the default) or `read-only`.
    pub access: Option<KeyAccessView>,
}

async fn list(call: Call, _: Input) -> ServiceResult<List<TeamApiKey>> {
    let request = ListApiKeysRequest { team_id: call.team_id().to_owned() };
    let keys = call.services.identity.clone().list_api_keys(request).await?.into_inner().keys;
    Ok(List::new(keys.iter().filter(|key| key.revoked_at_ms.is_none()).map(TeamApiKey::from).collect()))
}

async fn create(call: Call, input: Input<Nothing, Nothing, Json<CreateKey>>) -> ServiceResult<Created<NewApiKey>> {
    let Json(body) = input.body;
    let request = CreateApiKeyRequest {
        team_id: call.team_id().to_owned(),
        name: body.name,
        access: KeyAccess::from(body.access.unwrap_or(KeyAccessView::Full)).into(),
        created_by: Some(call.principal.actor()),
    };
    let created = call.services.identity.clone().create_api_key(request).await?.into_inner();
    let api_key = TeamApiKey::from(&created.key.unwrap_or_default());
    Ok(Created::new(NewApiKey { api_key, key: created.secret }, "API key created; keep the key, it is shown once"))
}

async fn revoke(call: Call, input: Input<KeyPath>) -> ServiceResult<Updated<TeamApiKey>> {
    let request =
        RevokeApiKeyRequest { key_id: input.path.key_id.into_string(), team_id: Some(call.team_id().to_owned()) };
    let revoked = call.services.identity.clone().revoke_api_key(request).await?.into_inner();
    Ok(Updated::new(TeamApiKey::from(&revoked), "API key revoked"))
}
