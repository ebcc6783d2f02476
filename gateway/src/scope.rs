//! Agency scoping: `?teamId=` makes a request act on a client subteam of the key's team.
//! Access flags of a subteam limit the subteam's own keys, not its agency acting on it.

use std::sync::Arc;
use std::time::Duration;

use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{ResolveTeamRequest, Team};

use crate::cache::TtlCache;
use crate::endpoint::Endpoint;
use crate::principal::{Principal, Standing};
use crate::services::Services;
use switchboard_api::id::canonical_uuid;

pub struct Scoper {
    /// By (agency team, subteam).
    cache: TtlCache<(String, String), Arc<Team>>,
}

impl Scoper {
    pub fn new(ttl: Duration) -> Self {
        Self { cache: TtlCache::new(ttl, 100_000) }
    }

    /// The team a request acts on.
    pub async fn effective_team(
        &self,
        services: &Services,
        principal: &Principal,
        team_id: Option<&str>,
    ) -> ServiceResult<Arc<Team>> {
        let Some(team_id) = team_id else {
            if principal.team.deleted {
                return Err(ServiceError::team_not_found());
            }
            return Ok(principal.team.clone());
        };
        let Some(team_id) = canonical_uuid(team_id) else {
            return Err(ServiceError::invalid_field("teamId", "must be a UUID"));
        };
        let team_id = team_id.as_str();
        if principal.team.deleted {
            return Err(ServiceError::team_not_found());
        }
        if team_id == principal.team.id {
            return Ok(principal.team.clone());
        }
        if !principal.team.owns_agency {
            return Err(ServiceError::forbidden("This API key's team does not own an agency")
                .with_hint("teamId can only be used with the key of an agency team."));
        }
        let cache_key = (principal.team.id.clone(), team_id.to_owned());
        if let Some(team) = self.cache.get(&cache_key) {
            return Ok(team);
        }
        // Boxed: a rare lookup whose future would otherwise be part of every request's.
        let mut identity = services.identity.clone();
        let request = ResolveTeamRequest { agency_team_id: principal.team.id.clone(), team_id: team_id.to_owned() };
        let team = Box::pin(identity.resolve_team(request))
            .await
            .map_err(|status| ServiceError::from_status(&status))?
            .into_inner();
        let team = Arc::new(team);
        self.cache.insert(cache_key, team.clone());
        Ok(team)
    }
}

/// People who must set up a second factor do nothing else; a person's own account is theirs at
/// every role (its changes to how they prove who they are need a recent sign-in); read-only
/// keys and viewers may not write; members and viewers may not manage the team; a subteam's
/// own keys and people may not use what its access flags switch off.
pub fn check_access(route: &Endpoint, principal: &Principal) -> ServiceResult<()> {
    // A person whose team requires a second factor, and who has none, may only set one up.
    if principal.session().is_some_and(|session| session.second_factor_needed) && !route.session_flow {
        return Err(ServiceError::forbidden("Your team requires a second factor; set one up first")
            .with_hint("Add an authenticator app at /settings/security (POST /v1/auth/second-factors/totp)."));
    }
    let standing = principal.standing();
    if route.own_account {
        // A person's own names and address: whatever their role, and never through a key, which
        // acts for the team and not for a person.
        let Some(session) = principal.session().filter(|_| matches!(standing, Standing::Person(_))) else {
            return Err(ServiceError::new(switchboard_kit::ErrorKind::Unauthorized, "Not signed in")
                .with_hint("This operation needs the session cookie of POST /v1/auth/sign-in, not an API key."));
        };
        // A stolen cookie, or a session opened before a factor existed, does not get to change
        // how the person proves who they are.
        if route.recent_sign_in && session.reauthenticate_after_ms <= switchboard_kit::time::now_ms() {
            return Err(ServiceError::reauthentication_required());
        }
        return Ok(());
    }
    if route.write && standing == Standing::ReadOnlyKey {
        return Err(ServiceError::forbidden("This API key is read-only")
            .with_hint("Use a key with full access for write operations."));
    }
    if route.write && !standing.writes() {
        return Err(ServiceError::forbidden("Your role can only read (viewer)")
            .with_hint("An owner or admin of the team can give you another role."));
    }
    if route.admins_only && !standing.administers() {
        return Err(ServiceError::forbidden("Only the team's owners and admins can do this")
            .with_hint("An owner or admin of the team can give you another role."));
    }
    if let Some(feature) = route.feature
        && !feature.allowed_for(&principal.team)
    {
        return Err(ServiceError::forbidden(format!(
            "This team's access configuration does not allow {}",
            feature.name()
        ))
        .with_hint("The agency that manages this team can change its access configuration."));
    }
    Ok(())
}
