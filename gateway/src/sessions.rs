//! Session cookies: reading the token a browser sends, the CSRF token that goes with it, the
//! `Set-Cookie` values, and authentication through the identity service with a cache like the
//! keys' (so a request with a session costs what one with a key costs).
//!
//! CSRF: the cookie is `SameSite=Lax`, and every state-changing request authenticated by it
//! must also carry `X-CSRF-Token`, a value derived from the session token that only a page of
//! this origin can learn (from `GET /v1/auth/session`); so must a GET that spends credits,
//! since `Lax` still sends the cookie with a top-level cross-site navigation. `Strict` would
//! stop that too, but then a link into the portal from an e-mail or a chat opens it signed out.
//! Requests with `X-API-Key` carry no cookie a browser adds by itself, so they need none.
//!
//! Over https the cookie is `__Host-switchboard_session`: `Secure`, `Path=/` and no `Domain`,
//! which browsers enforce for that prefix, so a sibling subdomain cannot set or shadow it.

use std::sync::Arc;
use std::time::Duration;

use pingora::http::RequestHeader;
use sha2::{Digest, Sha256};
use switchboard_kit::apikey::hash_key;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::AuthenticateSessionRequest;

use crate::cache::TtlCache;
use crate::principal::{Credential, Principal, UNSEEN};
use crate::services::Services;
use std::sync::atomic::Ordering;

pub const COOKIE: &str = "switchboard_session";
/// The cookie's name when it is `Secure`.
pub const SECURE_COOKIE: &str = "__Host-switchboard_session";
pub const CSRF_HEADER: &str = "x-csrf-token";
/// Tokens are 43 characters; anything much longer is not one.
const MAX_TOKEN_LEN: usize = 128;

/// The value of the cookie `wanted`, when it has a token's shape.
fn cookie(header: &RequestHeader, wanted: &str) -> Option<String> {
    header
        .headers
        .get_all("cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == wanted)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|value| {
            !value.is_empty() && value.len() <= MAX_TOKEN_LEN && value.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

/// The session token in the request's `Cookie` headers, if any; the `__Host-` cookie wins.
/// Over https only the `__Host-` cookie counts: a plain one may have been planted by a sibling
/// subdomain or over plain http, to sign the browser in to someone else's account.
pub fn token(header: &RequestHeader, https: bool) -> Option<String> {
    cookie(header, SECURE_COOKIE).or_else(|| if https { None } else { cookie(header, COOKIE) })
}

/// The cookie that binds a single sign-on to the browser that started it.
pub const SSO_COOKIE: &str = "switchboard_sso";

/// The single sign-on binding of the request, on the routes that read it.
pub fn sso_binding(header: &RequestHeader) -> Option<String> {
    header.uri.path().starts_with("/v1/auth/sso/").then(|| cookie(header, SSO_COOKIE)).flatten()
}

/// The `Set-Cookie` value of a single sign-on's binding: sent back only to its own routes.
pub fn set_sso_cookie(binding: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{SSO_COOKIE}={binding}; Path=/v1/auth/sso; HttpOnly; SameSite=Lax; Max-Age=600{secure}")
}

/// The CSRF token of a session: a hash of its token under a label of its own, so that knowing
/// it reveals nothing of the cookie.
pub fn csrf_token(session_token: &str) -> String {
    let digest = Sha256::digest(format!("switchboard csrf\n{session_token}").as_bytes());
    hex::encode(&digest[..16])
}

/// Refuses a state-changing request authenticated by a cookie without the right CSRF header.
pub fn check_csrf(header: &RequestHeader, session_token: &str) -> ServiceResult<()> {
    let sent = header.headers.get(CSRF_HEADER).and_then(|value| value.to_str().ok()).unwrap_or("");
    let expected = csrf_token(session_token);
    if constant_time_eq(sent.trim().as_bytes(), expected.as_bytes()) {
        return Ok(());
    }
    Err(ServiceError::forbidden("Missing or wrong X-CSRF-Token header")
        .with_hint("A request signed in by the session cookie must send the csrfToken of GET /v1/auth/session."))
}

/// Whether two secrets are equal, in a time that depends on their length only: how far a
/// guess matched is not told by when the answer comes.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// The `Set-Cookie` value that begins a session in the browser.
pub fn set_cookie(token: &str, max_age_seconds: i64, secure: bool) -> String {
    if secure {
        return format!("{SECURE_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_seconds}; Secure");
    }
    format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_seconds}")
}

/// The `Set-Cookie` value that removes it.
pub fn clear_cookie(secure: bool) -> String {
    set_cookie("", 0, secure)
}

fn not_signed_in() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, "Not signed in, or the session has ended")
        .with_hint("Sign in (POST /v1/auth/sign-in), or send an API key in X-API-Key.")
}

pub struct SessionAuthenticator {
    /// By token hash: the principal, or `None` for a token the identity service refused.
    cache: TtlCache<String, Option<Arc<Principal>>>,
}

impl SessionAuthenticator {
    pub fn new(ttl: Duration) -> Self {
        Self { cache: TtlCache::new(ttl, 100_000) }
    }

    pub async fn authenticate(&self, services: &Services, token: &str) -> ServiceResult<Arc<Principal>> {
        let hash = hash_key(token);
        let request = AuthenticateSessionRequest { token_hash: hash.clone() };
        remembered(&self.cache, hash, not_signed_in, async {
            let session = services.accounts.clone().authenticate_session(request).await?.into_inner();
            let team = session.team.clone().unwrap_or_default();
            Ok(Principal::new(team, Credential::Session(session)))
        })
        .await
    }

    /// Forgets a session this gateway ended, so that it is refused here at once.
    pub fn forget(&self, token: &str) {
        self.cache.remove(&hash_key(token));
    }

    /// The session `principal` again if its team's version (read with this request's rate-limit
    /// token, when Redis decided) is the one it was last found live under; else looked up anew.
    /// A session ended or changed on any replica is so refused by every gateway at its next
    /// request, without a round trip of its own.
    pub async fn current(
        &self,
        services: &Services,
        principal: Arc<Principal>,
        token: &str,
        version: Option<i64>,
    ) -> ServiceResult<Arc<Principal>> {
        let Some(version) = version.filter(|_| principal.session().is_some()) else {
            return Ok(principal);
        };
        let seen = principal.seen_version.load(Ordering::Acquire);
        if seen == version {
            return Ok(principal);
        }
        // Just looked up (this request or a concurrent one): found live before this version was read.
        if seen == UNSEEN
            && principal.seen_version.compare_exchange(UNSEEN, version, Ordering::AcqRel, Ordering::Acquire).is_ok()
        {
            return Ok(principal);
        }
        self.forget(token);
        let fresh = self.authenticate(services, token).await?;
        fresh.seen_version.store(version, Ordering::Release);
        Ok(fresh)
    }
}

/// A session's principal by the hash of its token: from `cache` when looked up within its
/// time, else from `lookup`, whose answer (a principal, or a refusal as `refused()`) is kept.
async fn remembered(
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

/// What the gateway keeps across requests that the sign-in operations need.
#[derive(Clone)]
pub struct Gate {
    pub sessions: Arc<SessionAuthenticator>,
    pub throttle: Arc<crate::throttle::SignInThrottle>,
    /// Requests for password-reset e-mails.
    pub resets: Arc<crate::throttle::SignInThrottle>,
    /// Requests for e-mail-change confirmations.
    pub email_changes: Arc<crate::throttle::SignInThrottle>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cookie: &str) -> RequestHeader {
        let mut header = RequestHeader::build("GET", b"/v1/me", None).expect("a request");
        header.insert_header("Cookie", cookie).expect("a header");
        header
    }

    #[test]
    fn the_token_is_read_from_among_other_cookies() {
        assert_eq!(token(&request("a=1; switchboard_session=abc123; b=2"), false).as_deref(), Some("abc123"));
        assert_eq!(token(&request("switchboard_sessionx=abc"), false), None);
        assert_eq!(token(&request("switchboard_session=<script>"), false), None, "not a token's characters");
        assert_eq!(token(&request("switchboard_session="), false), None);
    }

    #[test]
    fn the_csrf_token_is_stable_and_does_not_reveal_the_session_token() {
        assert_eq!(csrf_token("abc"), csrf_token("abc"));
        assert_ne!(csrf_token("abc"), csrf_token("abd"));
        assert!(!csrf_token("abc").contains("abc"));
        assert_eq!(csrf_token("abc").len(), 32);
    }

    #[test]
    fn the_host_prefixed_cookie_wins() {
        let both = request("switchboard_session=plain; __Host-switchboard_session=prefixed");
        assert_eq!(token(&both, false).as_deref(), Some("prefixed"));
        assert_eq!(token(&request("__Host-switchboard_session=abc"), true).as_deref(), Some("abc"));
    }

    #[test]
    fn over_https_a_plain_cookie_is_not_a_session() {
        assert_eq!(token(&request("switchboard_session=planted"), true), None);
        assert_eq!(token(&request("switchboard_session=plain"), false).as_deref(), Some("plain"));
    }

    #[test]
    fn secrets_are_compared_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }

    #[test]
    fn cookies_are_http_only_lax_and_secure_over_https() {
        let cookie = set_cookie("tok", 60, true);
        assert_eq!(cookie, "__Host-switchboard_session=tok; Path=/; HttpOnly; SameSite=Lax; Max-Age=60; Secure");
        assert!(!set_cookie("tok", 60, false).contains("Secure"));
        assert!(clear_cookie(false).contains("Max-Age=0"));
    }
}
