//! Settings of every component: defaults, then the config file (`--config` or
//! `SWITCHBOARD_CONFIG`, TOML), then environment variables, each overriding the one before.
//! `docs/configuration.md` lists them all.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::limits::RateClass;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    #[serde(default)]
    pub gateway: GatewayFile,
    #[serde(default)]
    pub identity: ServiceFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayFile {
    pub listen: Option<String>,
    pub identity_url: Option<String>,
    pub redis_url: Option<String>,
    pub max_body_bytes: Option<usize>,
    pub request_timeout_ms: Option<u64>,
    pub auth_cache_ttl_ms: Option<u64>,
    pub redis_timeout_ms: Option<u64>,
    pub drain_timeout_ms: Option<u64>,
    #[serde(default)]
    pub rate_limits: RateLimitsFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitsFile {
    pub standard: Option<u32>,
    pub write: Option<u32>,
    pub search: Option<u32>,
    pub bulk: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceFile {
    pub listen: Option<String>,
    pub database_url: Option<String>,
}

pub fn load_file(path: Option<&Path>) -> anyhow::Result<FileConfig> {
    let path = path.map(Path::to_path_buf).or_else(|| std::env::var_os("SWITCHBOARD_CONFIG").map(PathBuf::from));
    let Some(path) = path else {
        return Ok(FileConfig::default());
    };
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_parsed<T: std::str::FromStr>(name: &str) -> anyhow::Result<Option<T>>
where
    T::Err: std::fmt::Display,
{
    env(name).map(|v| v.trim().parse::<T>().map_err(|e| anyhow::anyhow!("{name}={v}: {e}"))).transpose()
}

pub fn data_dir(file: &FileConfig, flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .or_else(|| env("SWITCHBOARD_DATA_DIR").map(PathBuf::from))
        .or_else(|| file.data_dir.clone())
        .unwrap_or_else(|| PathBuf::from(".data"))
}

pub fn gateway(file: &FileConfig) -> anyhow::Result<GatewayConfig> {
    let g = &file.gateway;
    let mut config = GatewayConfig::default();
    let ms = Duration::from_millis;
    if let Some(v) = env("SWITCHBOARD_LISTEN").or_else(|| g.listen.clone()) {
        config.listen = v;
    }
    if let Some(v) = env("SWITCHBOARD_IDENTITY_URL").or_else(|| g.identity_url.clone()) {
        config.identity_url = v;
    }
    config.redis_url = env("REDIS_URL").or_else(|| g.redis_url.clone());
    if let Some(v) = env_parsed("SWITCHBOARD_MAX_BODY_BYTES")?.or(g.max_body_bytes) {
        config.max_body_bytes = v;
    }
    if let Some(v) = env_parsed("SWITCHBOARD_REQUEST_TIMEOUT_MS")?.or(g.request_timeout_ms) {
        config.request_timeout = ms(v);
    }
    if let Some(v) = env_parsed("SWITCHBOARD_AUTH_CACHE_TTL_MS")?.or(g.auth_cache_ttl_ms) {
        config.auth_cache_ttl = ms(v);
    }
    if let Some(v) = env_parsed("SWITCHBOARD_REDIS_TIMEOUT_MS")?.or(g.redis_timeout_ms) {
        config.redis_timeout = ms(v);
    }
    if let Some(v) = env_parsed("SWITCHBOARD_DRAIN_TIMEOUT_MS")?.or(g.drain_timeout_ms) {
        config.drain_timeout = ms(v);
    }
    let file_limits = &g.rate_limits;
    for class in RateClass::ALL {
        let from_file = match class {
            RateClass::Standard => file_limits.standard,
            RateClass::Write => file_limits.write,
            RateClass::Search => file_limits.search,
            RateClass::Bulk => file_limits.bulk,
        };
        let variable = format!("SWITCHBOARD_RATE_LIMIT_{}", class.name().to_ascii_uppercase());
        if let Some(per_minute) = env_parsed::<u32>(&variable)?.or(from_file) {
            anyhow::ensure!(per_minute > 0, "{variable} must be at least 1");
            config.rate_limits.set(class, per_minute);
        }
    }
    Ok(config)
}

/// The identity database: `DATABASE_URL`, the file's `identity.database_url`, or a SQLite
/// file in the data directory.
pub fn identity_database_url(file: &FileConfig, data_dir: &Path) -> anyhow::Result<String> {
    if let Some(url) = env("DATABASE_URL").or_else(|| file.identity.database_url.clone()) {
        return Ok(url);
    }
    std::fs::create_dir_all(data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
    Ok(switchboard_kit::db::sqlite_url(&data_dir.join("identity.db")))
}

pub fn identity_listen(file: &FileConfig) -> String {
    env("SWITCHBOARD_GRPC_LISTEN")
        .or_else(|| file.identity.listen.clone())
        .unwrap_or_else(|| "0.0.0.0:50051".to_owned())
}
