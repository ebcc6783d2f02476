//! `X-API-Key` authentication. The gateway hashes the presented key and asks the identity
//! service; answers (valid or not) are trusted for `auth_cache_ttl`, and beyond it while the
//! key's team keeps the version it had (`Authenticator::authenticate`), so a revoked key is
//! refused within that time. Keys are never logged: only their hash leaves this module.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pingora::http::RequestHeader;
use switchboard_kit::apikey::hash_key;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::{AuthenticateRequest, AuthenticateResponse};

use crate::cache::TtlCache;
use crate::endpoint::Endpoint;
use crate::limits::RateLimiter;
use crate::principal::{Credential, Principal};
use crate::services::Services;

/// Longer values are not keys; they are refused without a lookup.
const MAX_KEY_LEN: usize = 256;

pub struct Authenticator {
    /// By key hash: what the identity service answered, and when and under which team
    /// version it was last known to hold.
    cache: TtlCache<String, KeyLookup>,
    /// How long an answer is trusted as it is.
    ttl: Duration,
    /// Where the teams' current versions are known (pushed by Redis), if anywhere.
    limiter: Arc<RateLimiter>,
}

/// An answer of the identity service for a key.
#[derive(Clone)]
struct KeyLookup {
    /// The principal, or `None` for a key the identity service refused.
    principal: Option<Arc<Principal>>,
    /// The team's version read before the lookup, when this gateway knew it: while the team
    /// still has it, the answer still holds.
    version: Option<i64>,
    /// When the identity service gave the answer: it is kept at most
    /// [`VERSIONED_TTL`](crate::cache::VERSIONED_TTL), whatever the version.
    looked_up: Instant,
    /// When the answer was looked up or last found to hold.
    checked: Instant,
}

fn missing() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, "Missing X-API-Key header")
}

fn invalid() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, "Invalid API key")
}

/// The key a request presents: `X-API-Key`, or `X-AGENCY-KEY` on the agency routes. Several
/// headers may come only when they carry the same key: credentials that disagree are refused
/// rather than one of them picked.
pub fn presented_key<'h>(header: &'h RequestHeader, route: &Endpoint) -> ServiceResult<Option<&'h str>> {
    let agency = route.agency_key_header.then(|| header.headers.get_all("x-agency-key").iter()).into_iter().flatten();
    let mut presented = None;
    for value in header.headers.get_all("x-api-key").iter().chain(agency) {
        let key = value.to_str().unwrap_or("\u{0}").trim();
        match presented {
            _ if key.is_empty() => {}
            None => presented = Some(key),
            Some(first) if first != key => {
                return Err(ServiceError::new(ErrorKind::Unauthorized, "The request carries different API keys")
                    .with_hint("Send one key, in X-API-Key."));
            }
            Some(_) => {}
        }
    }
    Ok(presented)
}

impl Authenticator {
    pub fn new(ttl: Duration, limiter: Arc<RateLimiter>) -> Self {
        Self { cache: TtlCache::new(crate::cache::versioned_ttl(ttl), 100_000), ttl, limiter }
    }

    /// The key's principal. An answer is trusted for `ttl`; after that it is looked up again,
    /// unless its team's version, read before that lookup, is still the team's version: a
    /// gateway that follows team versions asks the identity service about a busy key once,
    /// and again only after its team changed. Either way a revoked key (revoking gives its
    /// team a new version) is refused within `ttl`.
    pub async fn authenticate(&self, services: &Services, key: Option<&str>) -> ServiceResult<Arc<Principal>> {
        let key = key.ok_or_else(missing)?;
        if key.len() > MAX_KEY_LEN || !key.is_ascii() {
            return Err(invalid());
        }
        let hash = hash_key(key);
        let mut before = None;
        if let Some(known) = self.cache.get(&hash) {
            if known.checked.elapsed() < self.ttl {
                return known.principal.ok_or_else(invalid);
            }
            if let Some(principal) = known.principal.clone() {
                let team_id = principal.team.id.clone();
                let version = self.limiter.known_version(&team_id);
                if version.is_some()
                    && version == known.version
                    && known.looked_up.elapsed() < crate::cache::VERSIONED_TTL
                {
                    let checked = KeyLookup { checked: Instant::now(), ..known };
                    self.cache.insert(hash, checked);
                    return Ok(principal);
                }
                before = version.map(|version| (team_id, version));
            }
        }
        // Boxed: the lookup is rare, and its future would otherwise be part of every request's.
        let mut identity = services.identity.clone();
        let answer = Box::pin(identity.authenticate(AuthenticateRequest { key_hash: hash.clone() })).await;
        let principal = match answer {
            Ok(answer) => match answer.into_inner() {
                AuthenticateResponse { key: Some(key), team: Some(team) } => {
                    Arc::new(Principal::new(team, Credential::Key(key)))
                }
                _ => return Err(ServiceError::internal(anyhow::anyhow!("identity answered without key or team"))),
            },
            Err(status) => {
                let error = ServiceError::from(status);
                if error.kind == ErrorKind::Unauthorized {
                    self.cache.insert(hash, KeyLookup::checked_now(None, None));
                    return Err(invalid());
                }
                return Err(error);
            }
        };
        let version = before.filter(|(team_id, _)| *team_id == principal.team.id).map(|(_, version)| version);
        self.cache.insert(hash, KeyLookup::checked_now(Some(principal.clone()), version));
        Ok(principal)
    }
}

impl KeyLookup {
    fn checked_now(principal: Option<Arc<Principal>>, version: Option<i64>) -> Self {
        let now = Instant::now();
        Self { principal, version, looked_up: now, checked: now }
    }
}
