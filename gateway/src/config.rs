//! Gateway settings. The binary fills them from the config file and the environment; the
//! defaults are the spec's values.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use switchboard_kit::grpc::ServiceAccess;
use switchboard_kit::peers::Peers;

#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// `host:port` to serve HTTP on; port 0 picks a free one.
    pub listen: String,
    /// Where the services are and the token the gateway's calls to them carry.
    pub peers: Peers,
    /// Where the platform is reached (scheme and host): every link it hands out starts with it.
    /// `None`: the address the gateway listens on (`server::start` sets it).
    pub public_url: Option<String>,
    /// Peers whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed (`crate::origin`).
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Signs the playback URLs of recordings; the same on every replica.
    pub url_key: UrlKey,
    /// Rate-limit buckets live in this Redis when set, in process otherwise.
    pub redis_url: Option<String>,
    pub rate_limits: RateLimits,
    /// Requests whose body is larger are answered 413.
    pub max_body_bytes: usize,
    /// Uploaded files larger than this are answered 413 (multipart bodies may exceed it by
    /// the size of their other parts).
    pub max_upload_bytes: usize,
    /// How long the gateway waits on a service before answering 503.
    pub request_timeout: Duration,
    /// How long a successful key lookup is trusted; a revoked key stops working within it.
    pub auth_cache_ttl: Duration,
    /// How long a Redis call may take before the in-process limiter answers instead.
    pub redis_timeout: Duration,
    /// On SIGTERM: how long requests in flight get to finish.
    pub drain_timeout: Duration,
    /// Event loops serving HTTP, each on a thread of its own, where an accepted connection stays
    /// (as nginx's workers do); 0 serves on the caller's tokio runtime, whose workers steal
    /// each other's tasks.
    pub threads: usize,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".to_owned(),
            // The binary always says how calls are authenticated; a default config is for tests.
            peers: Peers::new(ServiceAccess::Trusted),
            public_url: None,
            trusted_proxies: Vec::new(),
            url_key: UrlKey::random(),
            redis_url: None,
            rate_limits: RateLimits::default(),
            // Room for the largest body the spec allows written the longest way JSON can write it:
            // 100,000 instruction characters outside the BMP, each escaped as a surrogate pair
            // (`\ud83d\ude00`, 12 bytes), is 1.2 MB.
            max_body_bytes: 2 * 1024 * 1024,
            max_upload_bytes: 20 * 1024 * 1024,
            request_timeout: Duration::from_secs(10),
            auth_cache_ttl: Duration::from_secs(2),
            redis_timeout: switchboard_kit::redis_client::DEFAULT_TIMEOUT,
            drain_timeout: Duration::from_secs(30),
            // In-process gateways (tests) share their runtime; the binary sets one per CPU.
            threads: 0,
        }
    }
}

/// The window of every limit: the spec's "per minute". Tests shorten it
/// (`SWITCHBOARD_RATE_LIMIT_WINDOW_MS`) to see a window end without waiting a minute.
pub const WINDOW_MS: i64 = 60_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateClass {
    Standard,
    Write,
    Search,
    Bulk,
    /// Signing in, signing up, accepting an invitation, resetting a password: counted per
    /// client address, as there is no team yet.
    Auth,
}

impl RateClass {
    pub const ALL: [RateClass; 5] =
        [RateClass::Standard, RateClass::Write, RateClass::Search, RateClass::Bulk, RateClass::Auth];

    /// Its place in [`RateClass::ALL`], for tables kept per class.
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            RateClass::Standard => "standard",
            RateClass::Write => "write",
            RateClass::Search => "search",
            RateClass::Bulk => "bulk",
            RateClass::Auth => "auth",
        }
    }
}

/// Requests per window (a minute) for each class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    pub standard: u32,
    pub write: u32,
    pub search: u32,
    pub bulk: u32,
    pub auth: u32,
    pub window_ms: i64,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self { standard: 100, write: 60, search: 30, bulk: 10, auth: 30, window_ms: WINDOW_MS }
    }
}

impl RateLimits {
    pub fn of(&self, class: RateClass) -> u32 {
        match class {
            RateClass::Standard => self.standard,
            RateClass::Write => self.write,
            RateClass::Search => self.search,
            RateClass::Bulk => self.bulk,
            RateClass::Auth => self.auth,
        }
    }

    pub fn set(&mut self, class: RateClass, per_minute: u32) {
        match class {
            RateClass::Standard => self.standard = per_minute,
            RateClass::Write => self.write = per_minute,
            RateClass::Search => self.search = per_minute,
            RateClass::Bulk => self.bulk = per_minute,
            RateClass::Auth => self.auth = per_minute,
        }
    }
}

/// The key that signs playback URLs (`crate::playback`); every gateway replica must have the
/// same. Shared: every request's call carries it.
#[derive(Clone)]
pub struct UrlKey(Arc<[u8]>);

impl std::fmt::Debug for UrlKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UrlKey(..)")
    }
}

impl UrlKey {
    pub fn new(secret: &[u8]) -> Self {
        Self(secret.into())
    }

    /// A key of its own derived from another secret (the service token), so that replicas that
    /// share that secret agree without a second one to distribute.
    pub fn derived_from(secret: &str) -> Self {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap_or_else(|_| unreachable!("HMAC takes any key"));
        mac.update(b"switchboard playback URLs");
        Self(mac.finalize().into_bytes().as_slice().into())
    }

    /// A key for this process only: URLs it signs stop working when it restarts.
    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().as_bytes().as_slice().into())
    }

    pub(crate) fn secret(&self) -> &[u8] {
        &self.0
    }
}
