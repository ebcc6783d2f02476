//! `X-API-Key` authentication. The gateway hashes the presented key and asks the identity
//! service; answers (valid or not) are cached for `auth_cache_ttl`, so a revoked key is
//! refused within that time. Keys are never logged: only their hash leaves this module.

use std::sync::Arc;
use std::time::Duration;

use pingora::http::RequestHeader;
use switchboard_kit::apikey::hash_key;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::AuthenticateRequest;

use crate::cache::TtlCache;
use crate::call::{Credential, Principal};
use crate::endpoint::Endpoint;
use crate::services::Services;

/// Longer values are not keys; they are refused without a lookup.
const MAX_KEY_LEN: usize = 256;

pub struct Authenticator {
    /// By key hash: the principal, or `None` for a key the identity service refused.
    cache: TtlCache<String, Option<Arc<Principal>>>,
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
    pub fn new(ttl: Duration) -> Self {
        Self { cache: TtlCache::new(ttl, 100_000) }
    }

    pub async fn authenticate(&self, services: &Services, key: Option<&str>) -> ServiceResult<Arc<Principal>> {
        let key = key.ok_or_else(missing)?;
        if key.len() > MAX_KEY_LEN || !key.is_ascii() {
            return Err(invalid());
        }
        let hash = hash_key(key);
        remembered(&self.cache, hash.clone(), invalid, async {
            let response = services.identity.clone().authenticate(AuthenticateRequest { key_hash: hash }).await?;
            let response = response.into_inner();
            let (Some(key), Some(team)) = (response.key, response.team) else {
                return Err(ServiceError::internal(anyhow::anyhow!("identity answered without key or team")));
            };
            Ok(Principal::new(team, Credential::Key(key)))
        })
        .await
    }
}

/// A credential's principal by the hash of its secret: from `cache` when looked up within its
/// time, else from `lookup`, whose answer (a principal, or a refusal as `refused()`) is kept.
pub(crate) async fn remembered(
    cache: &TtlCache<String, Option<Arc<Principal>>>,
    hash: String,
    refused: fn() -> ServiceError,
    lookup: impl std::future::Future<Output = ServiceResult<Principal>>,
) -> ServiceResult<Arc<Principal>> {
    if let Some(cached) = cache.get(&hash) {
        return cached.ok_or_else(refused);
    }
    match lookup.await {
        Ok(principal) => {
            let principal = Arc::new(principal);
            cache.insert(hash, Some(principal.clone()));
            Ok(principal)
        }
        Err(error) if error.kind == ErrorKind::Unauthorized => {
            cache.insert(hash, None);
            Err(refused())
        }
        Err(error) => Err(error),
    }
}
