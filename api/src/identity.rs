//! Who is calling (`/me`) and the team's users.

use crate::role::Role;
use schemars::JsonSchema;
use serde::Serialize;
use switchboard_proto::v1::{self as proto, KeyAccess};

use crate::id::Id;
use crate::time::Timestamp;

/// A team.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Team {
    pub id: Id,
    pub name: String,
    pub created_at: Timestamp,
}

/// A team by id and name.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TeamRef {
    pub id: Id,
    pub name: String,
}

/// The key that made the request, never its secret.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "ApiKeyInfo", deny_unknown_fields)]
pub struct ApiKey {
    pub id: Id,
    /// The key's label.
    pub name: String,
    /// The first 9 characters of the key (`ew_` and 6 more), safe to display.
    pub prefix: String,
    /// Read-only keys are refused every write (403).
    pub access: Access,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Full,
    ReadOnly,
}

/// The team's subscription.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Subscription {
    /// `self-hosted` unless the team was created with another plan name.
    pub plan: String,
    /// `active` for self-hosted teams.
    pub status: String,
    /// End of the current 30-day billing period.
    pub current_period_end: Option<Timestamp>,
}

/// A credit balance.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Credits {
    /// Credits left; searches cost 1.
    pub balance: i64,
}

/// Who is calling. `team`, `ownsAgency`, `credits`, `subscription` and `agencyTeam` describe the
/// team acted on (the `teamId` subteam when given); `apiKey` is the calling key (or `user` the signed-in person).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Me {
    pub team: Team,
    /// Whether the team owns an agency, i.e. whether its keys can use `teamId` and `/agency/...`.
    pub owns_agency: bool,
    pub credits: Credits,
    pub subscription: Subscription,
    /// The calling key; absent when the request is signed in with a session instead (see `user`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<ApiKey>,
    /// The signed-in person; present only when the request carries a session cookie.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<User>,
    /// The agency that owns the team; present only when the team described is a client subteam.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agency_team: Option<TeamRef>,
}

/// A user of a team.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct User {
    pub id: Id,
    pub first_name: String,
    pub last_name: String,
    /// Stored lower-case.
    #[schemars(extend("pattern" = switchboard_kit::limits::EMAIL_PATTERN))]
    pub email: String,
    pub role: Role,
    pub created_at: Timestamp,
}

impl From<&proto::Team> for Team {
    fn from(team: &proto::Team) -> Self {
        Self {
            id: Id::stored(team.id.clone()),
            name: team.name.clone(),
            created_at: Timestamp::from_ms(team.created_at_ms),
        }
    }
}

impl From<&proto::ApiKey> for ApiKey {
    fn from(key: &proto::ApiKey) -> Self {
        let access = if key.access() == KeyAccess::ReadOnly { Access::ReadOnly } else { Access::Full };
        Self { id: Id::stored(key.id.clone()), name: key.name.clone(), prefix: key.prefix.clone(), access }
    }
}

impl From<&proto::User> for User {
    fn from(user: &proto::User) -> Self {
        Self {
            id: Id::stored(user.id.clone()),
            first_name: user.first_name.clone(),
            last_name: user.last_name.clone(),
            email: user.email.clone(),
            role: Role::of_stored(&user.role),
            created_at: Timestamp::from_ms(user.created_at_ms),
        }
    }
}

impl Me {
    /// What `/me` says of `identity` to a caller with `key` or, signed in, `user`.
    pub fn new(identity: &proto::Identity, key: Option<&proto::ApiKey>, user: Option<&proto::User>) -> Self {
        let team = identity.team.clone().unwrap_or_default();
        let subscription = identity.subscription.clone().unwrap_or_default();
        Self {
            team: Team::from(&team),
            owns_agency: team.owns_agency,
            credits: Credits { balance: identity.credit_balance },
            subscription: Subscription {
                plan: subscription.plan,
                status: subscription.status,
                current_period_end: Timestamp::option(subscription.current_period_end_ms),
            },
            api_key: key.map(ApiKey::from),
            user: user.map(User::from),
            agency_team: identity
                .agency_team
                .as_ref()
                .map(|agency| TeamRef { id: Id::stored(agency.id.clone()), name: agency.name.clone() }),
        }
    }
}
