//! Gateway settings. The binary fills them from the config file and the environment; the
//! defaults are the spec's values.

use std::time::Duration;

use switchboard_kit::grpc::ServiceAccess;
use switchboard_kit::peers::Peers;

use crate::limits::RateLimits;

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
    pub url_key: crate::playback::UrlKey,
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
            url_key: crate::playback::UrlKey::random(),
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
