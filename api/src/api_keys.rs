//! The API keys a team manages itself (`/api-keys`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use switchboard_proto::v1::{self as proto, KeyAccess};

use crate::id::Id;
use crate::time::Timestamp;

/// What a key may do: `read-only` keys are refused every write (403).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum KeyAccessView {
    Full,
    ReadOnly,
}

impl From<KeyAccessView> for KeyAccess {
    fn from(access: KeyAccessView) -> Self {
        match access {
            KeyAccessView::Full => KeyAccess::Full,
            KeyAccessView::ReadOnly => KeyAccess::ReadOnly,
        }
    }
}

/// Who made something: a key, or a signed-in user.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ActorView {
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["key", "user"]))]
    pub kind: String,
    pub id: Id,
    pub name: String,
}

impl From<&proto::Actor> for ActorView {
    fn from(actor: &proto::Actor) -> Self {
        Self { kind: actor.r#type.clone(), id: Id::stored(actor.id.clone()), name: actor.name.clone() }
    }
}

/// An API key of the team, never its secret.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ApiKey", deny_unknown_fields)]
pub struct TeamApiKey {
    pub id: Id,
    /// The key's label.
    pub name: String,
    /// The first 9 characters of the key (`ew_` and 6 more), safe to display.
    pub prefix: String,
    pub access: KeyAccessView,
    pub created_at: Timestamp,
    /// When a request last used it (to the minute); null when none has.
    pub last_used_at: Option<Timestamp>,
    /// Who made it through the API; null for a key made by an operator (`switchboard admin`).
    pub created_by: Option<ActorView>,
}

impl From<&proto::ApiKey> for TeamApiKey {
    fn from(key: &proto::ApiKey) -> Self {
        let access = if key.access() == KeyAccess::ReadOnly { KeyAccessView::ReadOnly } else { KeyAccessView::Full };
        Self {
            id: Id::stored(key.id.clone()),
            name: key.name.clone(),
            prefix: key.prefix.clone(),
            access,
            created_at: Timestamp::from_ms(key.created_at_ms),
            last_used_at: Timestamp::option(key.last_used_at_ms),
            created_by: key.created_by.as_ref().map(ActorView::from),
        }
    }
}

/// A key just made, with its secret: the only answer that shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct NewApiKey {
    #[serde(flatten)]
    pub api_key: TeamApiKey,
    /// The whole key (`ew_...`), for `X-API-Key`. Shown once: it is stored only as a hash.
    pub key: String,
}
