//! The steps every operation passes before and around its handler, whichever transport brought
//! it (REST in `app.rs`, MCP in `mcp/`):
//!
//! ```text
//! credential ─► principal ─► rate limit ─► teamId scoping ─► access checks ─► handler ─► audit
//!  (key or session    (auth.rs,      (limits/)    (scope.rs)     (role, key access,
//!   + CSRF)           sessions.rs)                               accessConfig)
//! ```
//!
//! A write with an `Idempotency-Key` passes every access check before a kept answer is looked
//! at, and a kept answer is the caller's own (`idempotency/`). The transports only turn their
//! wire format into an [`Admit`] and a [`RawInput`], and an answer back.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use pingora::http::RequestHeader;
use switchboard_kit::ServiceError;
use switchboard_kit::peers::Peers;
use switchboard_kit::write_keys::WriteKey;
use switchboard_proto::v1::Team;
use tokio::sync::OnceCell;

use crate::auth::{self, Authenticator};
use crate::call::Call;
use crate::config::{GatewayConfig, UrlKey};
use crate::endpoint::{Endpoint, Method, RawInput};
use crate::idempotency::{self, Begin, Idempotency};
use crate::limits::{self, Decision, RateLimiter};
use crate::origin::{Client, Origins};
use crate::principal::{Credential, Principal};
use crate::reply::{HandlerResult, Reply};
use crate::scope::{self, Scoper};
use crate::services::Services;
use crate::sessions::{self, Gate, SessionAuthenticator};
use crate::throttle::SignInThrottle;

pub struct Pipeline {
    pub(crate) auth: Authenticator,
    sessions: Arc<SessionAuthenticator>,
    throttle: Arc<SignInThrottle>,
    resets: Arc<SignInThrottle>,
    email_changes: Arc<SignInThrottle>,
    scoper: Scoper,
    pub(crate) limiter: Arc<RateLimiter>,
    idempotency: Idempotency,
    /// Where links point and who a client is.
    pub(crate) origins: Origins,
    /// Created on the first request, on the runtime that serves requests.
    services: OnceCell<Arc<Services>>,
    peers: Peers,
    request_timeout: Duration,
    identity_ttl: Duration,
    max_upload_bytes: usize,
    url_key: UrlKey,
}

/// What admission decides: run the handler with this call, or answer at once (a 429).
pub(crate) enum Admission {
    Continue(Box<Call>),
    Respond(Reply),
}

/// A request to admit: its route, the caller's principal and the `teamId` it names.
pub(crate) struct Admit<'a> {
    pub route: &'a Endpoint,
    pub services: Arc<Services>,
    pub principal: Arc<Principal>,
    pub team_id: Option<String>,
    pub client: Client,
    pub session_token: Option<String>,
    pub sso_binding: Option<String>,
}

/// What an idempotent write is known by: the caller's key and its request's fingerprint.
pub(crate) struct Once<'a> {
    pub key: &'a str,
    pub fingerprint: &'a str,
    pub request_id: &'a str,
}

impl Pipeline {
    pub fn new(config: &GatewayConfig) -> anyhow::Result<Self> {
        let redis = config
            .redis_url
            .as_deref()
            .map(|url| {
                let fallback = "rate limits and idempotency keys fall back to this process";
                switchboard_kit::redis_client::RedisClient::connect(url, config.redis_timeout, fallback)
                    .map(|client| (client, url))
            })
            .transpose()?;
        let client = redis.as_ref().map(|(client, _)| client.clone());
        let limiter = RateLimiter::new(config.rate_limits, redis);
        Ok(Self {
            auth: Authenticator::new(config.auth_cache_ttl, limiter.clone()),
            sessions: Arc::new(SessionAuthenticator::new(config.auth_cache_ttl)),
            throttle: Arc::new(SignInThrottle::new(client.clone())),
            resets: Arc::new(SignInThrottle::with_policy(&crate::throttle::RESET_REQUESTS, client.clone())),
            email_changes: Arc::new(SignInThrottle::with_policy(&crate::throttle::EMAIL_CHANGES, client.clone())),
            scoper: Scoper::new(config.auth_cache_ttl),
            limiter,
            idempotency: Idempotency::new(client),
            origins: Origins::new(
                config.public_url.as_deref().unwrap_or("http://localhost"),
                config.trusted_proxies.clone(),
            ),
            services: OnceCell::new(),
            peers: config.peers.clone(),
            request_timeout: config.request_timeout,
            identity_ttl: config.auth_cache_ttl,
            max_upload_bytes: config.max_upload_bytes,
            url_key: config.url_key.clone(),
        })
    }

    /// Shared, not cloned per request: a request only clones the clients it calls.
    pub(crate) async fn services(&self) -> Result<Arc<Services>, ServiceError> {
        self.services
            .get_or_try_init(|| async {
                Services::connect(&self.peers, self.request_timeout, self.identity_ttl).map(Arc::new)
            })
            .await
            .cloned()
            .map_err(ServiceError::internal)
    }

    /// Who a REST request is: a visitor on the routes that come before signing in; else the
    /// key in `X-API-Key` (which wins when there is one), else the session cookie, whose writes
    /// (and reads that spend credits) must carry the CSRF token.
    pub(crate) async fn principal(
        &self,
        header: &RequestHeader,
        route: &Endpoint,
        services: &Services,
        session_token: Option<&str>,
    ) -> Result<Arc<Principal>, ServiceError> {
        if route.visitor {
            return Ok(Arc::new(Principal::new(Team::default(), Credential::Visitor)));
        }
        let key = auth::presented_key(header, route)?;
        let Some(token) = session_token.filter(|_| key.is_none()) else {
            return self.auth.authenticate(services, key).await;
        };
        let principal = Box::pin(self.sessions.authenticate(services, token)).await?;
        // A GET that spends credits too: the cookie rides along with a cross-site navigation.
        if route.method != Method::Get || route.spends_credits {
            sessions::check_csrf(header, token)?;
        }
        Ok(principal)
    }

    /// The key-owning team's rate limit (a 429 answer when spent), `teamId` scoping and the
    /// access checks. The input is checked by the endpoint itself. `decision` is the rate
    /// limit's, for the answer's headers, whatever admission decides.
    pub(crate) async fn admit(
        &self,
        request: Admit<'_>,
        decision_seen: &mut Option<Decision>,
    ) -> Result<Admission, ServiceError> {
        let Admit { route, services, principal, team_id, client, session_token, sso_binding } = request;
        // Visitors have no team: their bucket is their address's.
        let bucket =
            if route.visitor { Cow::Owned(format!("addr:{}", client.ip)) } else { Cow::Borrowed(&*principal.team.id) };
        let decision = self.limiter.check(&bucket, route.class).await;
        drop(bucket);
        crate::metrics::rate_limit(route.class, decision.allowed);
        *decision_seen = Some(decision);
        if !decision.allowed {
            let (body, retry_after) = limits::too_many_requests(&decision);
            return Ok(Admission::Respond(Reply::json(429, body).with_header(retry_after.0, retry_after.1)));
        }
        let principal = match &session_token {
            Some(token) if principal.session().is_some() && !route.visitor => {
                Box::pin(self.sessions.current(&services, principal, token, decision.team_version)).await?
            }
            _ => principal,
        };
        let team = self.authorize(route, &services, &principal, team_id.as_deref()).await?;
        let team_version = decision.team_version.filter(|_| team.id == principal.team.id && !route.visitor);
        Ok(Admission::Continue(Box::new(Call {
            team_version,
            services,
            principal,
            team,
            max_upload_bytes: self.max_upload_bytes,
            public_base: self.origins.public_base().to_owned(),
            url_key: self.url_key.clone(),
            client,
            session_token,
            sso_binding,
            gate: Gate {
                sessions: self.sessions.clone(),
                throttle: self.throttle.clone(),
                resets: self.resets.clone(),
                email_changes: self.email_changes.clone(),
            },
        })))
    }

    /// Admits a request and runs it: [`Pipeline::admit`], then [`Pipeline::run`].
    pub(crate) async fn admit_and_run(
        &self,
        request: Admit<'_>,
        raw: RawInput,
        decision: &mut Option<Decision>,
    ) -> HandlerResult {
        let route = request.route;
        match self.admit(request, decision).await? {
            Admission::Continue(call) => self.run(route, *call, raw).await,
            Admission::Respond(reply) => Ok(reply),
        }
    }

    /// An idempotent write: every access check runs before a kept answer is looked at, so a
    /// stored answer is only sent to a caller who may make this request now (and whose own it
    /// is: the slot is the caller's). Neither the rate limit nor a service sees a replay.
    pub(crate) async fn run_once(
        &self,
        request: Admit<'_>,
        raw: RawInput,
        once: Once<'_>,
        decision: &mut Option<Decision>,
    ) -> HandlerResult {
        let route = request.route;
        Box::pin(self.authorize(route, &request.services, &request.principal, request.team_id.as_deref())).await?;
        let (team, caller) = (request.principal.team.id.clone(), request.principal.caller_id());
        let claim = match Box::pin(self.idempotency.begin(&team, &caller, once.key, once.fingerprint)).await {
            Begin::Replay(kept) => return Ok(kept.replay()),
            Begin::Refused(error) => return Err(error),
            Begin::Claimed(claim) => claim,
        };
        // The services record what this write creates under a digest of the key, so that a
        // retry after a lost answer (a 5xx releases the key below) gets the same resource.
        let write_key = WriteKey::of(&[&team, &caller, once.key, once.fingerprint]);
        let answered = Box::pin(write_key.scope(self.admit_and_run(request, raw, decision))).await;
        let reply = Reply::of(answered, once.request_id);
        Box::pin(self.idempotency.finish(claim, idempotency::Kept::of(&reply, route.shows_secret))).await;
        Ok(reply)
    }

    /// Runs an admitted operation, and writes it to the audit log when it is audited and
    /// succeeds.
    pub(crate) async fn run(&self, route: &Endpoint, call: Call, raw: RawInput) -> HandlerResult {
        let pending = crate::audit::pending(route, &call, &raw);
        let services = call.services.clone();
        let answered = route.run(call, raw).await;
        // The entry is made before the wait: the answer (a stream, maybe) is not held across it.
        let writing = match (pending, &answered) {
            (Some(pending), Ok(reply)) => Some(crate::audit::record(services, pending, reply)),
            _ => None,
        };
        if let Some(writing) = writing {
            writing.await;
        }
        answered
    }

    /// The team a request acts on, once `teamId` scoping and the access checks (role, key
    /// access, `accessConfig`) have passed.
    async fn authorize(
        &self,
        route: &Endpoint,
        services: &Services,
        principal: &Principal,
        team_id: Option<&str>,
    ) -> Result<Arc<Team>, ServiceError> {
        if route.visitor {
            return Ok(principal.team.clone());
        }
        let team = self.scoper.effective_team(services, principal, team_id).await?;
        scope::check_access(route, principal)?;
        Ok(team)
    }
}
