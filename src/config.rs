//! Settings of every component: defaults, then the config file (`--config` or
//! `SWITCHBOARD_CONFIG`, TOML), then environment variables, each overriding the one before.
//! `docs/configuration.md` lists them all.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;
use switchboard_gateway::GatewayConfig;
use switchboard_gateway::config::RateClass;
use switchboard_gateway::config::UrlKey;
use switchboard_kit::grpc::ServiceAccess;
use switchboard_kit::objects::ObjectsConfig;
use switchboard_kit::peers::{Peers, Service, ServiceInfo};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    #[serde(default)]
    pub gateway: GatewayFile,
    #[serde(default)]
    pub identity: ServiceFile,
    #[serde(default)]
    pub agents: ServiceFile,
    #[serde(default)]
    pub knowledgebase: KnowledgebaseFile,
    #[serde(default)]
    pub conversations: ServiceFile,
    #[serde(default)]
    pub crm: ServiceFile,
    #[serde(default)]
    pub webhooks: ServiceFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayFile {
    pub listen: Option<String>,
    pub redis_url: Option<String>,
    pub max_body_bytes: Option<usize>,
    pub request_timeout_ms: Option<u64>,
    pub auth_cache_ttl_ms: Option<u64>,
    pub redis_timeout_ms: Option<u64>,
    pub drain_timeout_ms: Option<u64>,
    pub threads: Option<usize>,
    /// Where the platform is reached, e.g. `https://switchboard.example.com`.
    pub public_url: Option<String>,
    /// Proxies (CIDRs or addresses) whose X-Forwarded-For and X-Forwarded-Proto are believed.
    pub trusted_proxies: Option<Vec<String>>,
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
    /// Sign-in, sign-up, invitations accepted and passwords reset, per client address.
    pub auth: Option<u32>,
}

/// A service's section: `[identity]`, `[agents]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceFile {
    /// Where `serve` listens for gRPC.
    pub listen: Option<String>,
    pub database_url: Option<String>,
    /// Where the other components reach it.
    pub url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnowledgebaseFile {
    pub listen: Option<String>,
    pub database_url: Option<String>,
    pub url: Option<String>,
    pub index_dir: Option<PathBuf>,
    pub qdrant_url: Option<String>,
    pub qdrant_api_key: Option<String>,
    pub embedding_model_dir: Option<PathBuf>,
    pub embeddings_url: Option<String>,
    pub embeddings_model: Option<String>,
    pub embeddings_api_key: Option<String>,
    pub embeddings_dimensions: Option<usize>,
    pub object_store_dir: Option<PathBuf>,
    pub s3_bucket: Option<String>,
    pub s3_endpoint: Option<String>,
    pub max_upload_bytes: Option<usize>,
}

/// The parts every service's section has.
pub struct Section<'a> {
    pub listen: Option<&'a String>,
    pub database_url: Option<&'a String>,
    pub url: Option<&'a String>,
}

impl FileConfig {
    pub fn section<'a>(&'a self, service: &ServiceInfo) -> Section<'a> {
        let plain = |file: &'a ServiceFile| Section {
            listen: file.listen.as_ref(),
            database_url: file.database_url.as_ref(),
            url: file.url.as_ref(),
        };
        // Exhaustive: a new service does not compile until its section is said.
        match service.service {
            Service::Identity => plain(&self.identity),
            Service::Agents => plain(&self.agents),
            Service::Conversations => plain(&self.conversations),
            Service::Crm => plain(&self.crm),
            Service::Webhooks => plain(&self.webhooks),
            Service::Knowledgebase => Section {
                listen: self.knowledgebase.listen.as_ref(),
                database_url: self.knowledgebase.database_url.as_ref(),
                url: self.knowledgebase.url.as_ref(),
            },
        }
    }
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

/// The platform's Redis (`REDIS_URL`, else the gateway section's `redis_url`) and its call
/// timeout: the gateway's limiter and the identity service's team versions use the same server.
pub fn redis(file: &FileConfig) -> anyhow::Result<(Option<String>, Duration)> {
    let g = &file.gateway;
    let url = env("REDIS_URL").or_else(|| g.redis_url.clone());
    let timeout = env_parsed("SWITCHBOARD_REDIS_TIMEOUT_MS")?
        .or(g.redis_timeout_ms)
        .map_or(switchboard_kit::redis_client::DEFAULT_TIMEOUT, Duration::from_millis);
    Ok((url, timeout))
}

/// `SWITCHBOARD_PUBLIC_URL` (else the gateway section's `public_url`): an absolute http(s) URL
/// with no path, since every link the platform hands out starts with it.
pub fn public_url(file: &FileConfig) -> anyhow::Result<Option<String>> {
    let Some(text) = env("SWITCHBOARD_PUBLIC_URL").or_else(|| file.gateway.public_url.clone()) else {
        return Ok(None);
    };
    let text = text.trim().trim_end_matches('/').to_owned();
    let parsed = url::Url::parse(&text).map_err(|error| anyhow::anyhow!("SWITCHBOARD_PUBLIC_URL={text}: {error}"))?;
    anyhow::ensure!(
        matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some() && parsed.path() == "/",
        "SWITCHBOARD_PUBLIC_URL={text}: expected http(s)://host[:port], without a path"
    );
    Ok(Some(text))
}

pub fn gateway(file: &FileConfig, peers: Peers) -> anyhow::Result<GatewayConfig> {
    let g = &file.gateway;
    // Playback URLs of recordings: the variable's key, else one derived from the service token
    // (shared by every replica), else one for this process.
    let url_key = match (env("SWITCHBOARD_URL_SIGNING_KEY"), peers.access()) {
        (Some(key), _) => UrlKey::new(key.as_bytes()),
        (None, ServiceAccess::Token(token)) => UrlKey::derived_from(token.secret()),
        (None, ServiceAccess::Trusted) => {
            tracing::warn!("no SWITCHBOARD_URL_SIGNING_KEY: recording URLs work on this gateway process only");
            UrlKey::random()
        }
    };
    let mut config = GatewayConfig { peers, url_key, ..GatewayConfig::default() };
    let ms = Duration::from_millis;
    if let Some(v) = env("SWITCHBOARD_LISTEN").or_else(|| g.listen.clone()) {
        config.listen = v;
    }
    (config.redis_url, config.redis_timeout) = redis(file)?;
    config.public_url = public_url(file)?;
    let trusted = env("SWITCHBOARD_TRUSTED_PROXIES").or_else(|| g.trusted_proxies.as_ref().map(|list| list.join(",")));
    if let Some(trusted) = trusted {
        config.trusted_proxies = switchboard_gateway::origin::parse_trusted(&trusted)
            .map_err(|error| anyhow::anyhow!("SWITCHBOARD_TRUSTED_PROXIES: {error}"))?;
    }
    if let Some(v) = env_parsed("SWITCHBOARD_MAX_BODY_BYTES")?.or(g.max_body_bytes) {
        config.max_body_bytes = v;
    }
    config.max_upload_bytes = max_upload_bytes(file)?;
    if let Some(v) = env_parsed("SWITCHBOARD_REQUEST_TIMEOUT_MS")?.or(g.request_timeout_ms) {
        config.request_timeout = ms(v);
    }
    if let Some(v) = env_parsed("SWITCHBOARD_AUTH_CACHE_TTL_MS")?.or(g.auth_cache_ttl_ms) {
        config.auth_cache_ttl = ms(v);
    }
    if let Some(v) = env_parsed("SWITCHBOARD_DRAIN_TIMEOUT_MS")?.or(g.drain_timeout_ms) {
        config.drain_timeout = ms(v);
    }
    config.threads = match env_parsed("SWITCHBOARD_GATEWAY_THREADS")?.or(g.threads) {
        Some(threads) => threads,
        // What the process may use: std counts the cgroup's CPU quota, as a pod's limit sets it.
        None => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
    };
    anyhow::ensure!(config.threads <= 1024, "SWITCHBOARD_GATEWAY_THREADS must be at most 1024");
    let file_limits = &g.rate_limits;
    for class in RateClass::ALL {
        let from_file = match class {
            RateClass::Standard => file_limits.standard,
            RateClass::Write => file_limits.write,
            RateClass::Search => file_limits.search,
            RateClass::Bulk => file_limits.bulk,
            RateClass::Auth => file_limits.auth,
        };
        let variable = format!("SWITCHBOARD_RATE_LIMIT_{}", class.name().to_ascii_uppercase());
        if let Some(per_minute) = env_parsed::<u32>(&variable)?.or(from_file) {
            anyhow::ensure!(per_minute > 0, "{variable} must be at least 1");
            config.rate_limits.set(class, per_minute);
        }
    }
    // For tests: a window that ends in seconds. The spec's limits are per minute.
    if let Some(window_ms) = env_parsed::<i64>("SWITCHBOARD_RATE_LIMIT_WINDOW_MS")? {
        anyhow::ensure!(window_ms >= 1_000, "SWITCHBOARD_RATE_LIMIT_WINDOW_MS must be at least 1000");
        config.rate_limits.window_ms = window_ms;
    }
    Ok(config)
}

/// Where this process reaches the other components: `SWITCHBOARD_<NAME>_URL`, the `url` of
/// the service's section, or its default port on this host.
pub fn peers(file: &FileConfig, access: ServiceAccess) -> Peers {
    let mut peers = Peers::new(access);
    for service in Service::ALL.map(Service::info) {
        if let Some(url) = env(&service.url_variable()).or_else(|| file.section(service).url.cloned()) {
            peers.set_url(service, url);
        }
    }
    peers
}

/// A service's database: `DATABASE_URL`, the file's `database_url` of its section, or a
/// SQLite file named after it in the data directory.
pub fn database_url(section: Option<&String>, data_dir: &Path, name: &str) -> anyhow::Result<String> {
    if let Some(url) = env("DATABASE_URL").or_else(|| section.cloned()) {
        return Ok(url);
    }
    sqlite_in(data_dir, name)
}

pub fn sqlite_in(data_dir: &Path, name: &str) -> anyhow::Result<String> {
    std::fs::create_dir_all(data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
    Ok(switchboard_kit::db::sqlite_url(&data_dir.join(format!("{name}.db"))))
}

/// How long a stopping service keeps serving while its health says NOT_SERVING
/// (`SWITCHBOARD_DRAIN_SECONDS`, 0 to 300; none by default, as for `dev`): at least two rounds
/// of the channels' health checks (`grpc::discovery::REFRESH`) for a restart no caller notices.
pub fn drain_period() -> anyhow::Result<Duration> {
    let seconds: u64 = env_parsed("SWITCHBOARD_DRAIN_SECONDS")?.unwrap_or(0);
    anyhow::ensure!(seconds <= 300, "SWITCHBOARD_DRAIN_SECONDS must be at most 300");
    Ok(Duration::from_secs(seconds))
}

/// The gRPC listen address of `serve <service>`.
pub fn grpc_listen(file: &FileConfig, service: &ServiceInfo) -> String {
    env("SWITCHBOARD_GRPC_LISTEN")
        .or_else(|| file.section(service).listen.cloned())
        .unwrap_or_else(|| format!("0.0.0.0:{}", service.default_port))
}

/// The knowledgebase service's settings around its database.
pub fn knowledgebase(
    file: &FileConfig,
    data_dir: &Path,
    database_url: String,
) -> anyhow::Result<switchboard_knowledgebase::Settings> {
    use switchboard_knowledgebase::embed::{EmbeddingConfig, OpenAiConfig};
    use switchboard_knowledgebase::index::IndexConfig;
    use switchboard_knowledgebase::sources::fetch::FetchPolicy;
    use switchboard_knowledgebase::sources::llm::ChatConfig;
    let k = &file.knowledgebase;
    let index = IndexConfig {
        path: env("SWITCHBOARD_INDEX_DIR")
            .map(PathBuf::from)
            .or_else(|| k.index_dir.clone())
            .unwrap_or_else(|| data_dir.join("index")),
        qdrant_url: env("QDRANT_URL").or_else(|| k.qdrant_url.clone()),
        qdrant_api_key: env("QDRANT_API_KEY").or_else(|| k.qdrant_api_key.clone()),
        collection: env("QDRANT_COLLECTION").unwrap_or_else(|| "switchboard_knowledge".to_owned()),
        dimensions: 0,
    };
    let openai = match env("SWITCHBOARD_EMBEDDINGS_URL").or_else(|| k.embeddings_url.clone()) {
        Some(url) => Some(OpenAiConfig {
            url,
            model: env("SWITCHBOARD_EMBEDDINGS_MODEL")
                .or_else(|| k.embeddings_model.clone())
                .unwrap_or_else(|| "text-embedding-3-small".to_owned()),
            api_key: env("SWITCHBOARD_EMBEDDINGS_API_KEY").or_else(|| k.embeddings_api_key.clone()),
            dimensions: env_parsed("SWITCHBOARD_EMBEDDINGS_DIMENSIONS")?.or(k.embeddings_dimensions).unwrap_or(1536),
        }),
        None => None,
    };
    let model_dir = env("SWITCHBOARD_EMBEDDING_MODEL_DIR")
        .map(PathBuf::from)
        .or_else(|| k.embedding_model_dir.clone())
        .unwrap_or_else(switchboard_knowledgebase::embed::default_model_dir);
    let objects = objects(file, data_dir);
    let (redis_url, redis_timeout) = redis(file)?;
    let defaults = switchboard_knowledgebase::budget::BudgetSettings::default();
    let budget = switchboard_knowledgebase::budget::BudgetSettings {
        per_request: positive("SWITCHBOARD_EMBED_PASSAGES_PER_REQUEST")?.unwrap_or(defaults.per_request),
        per_minute: positive("SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE")?.unwrap_or(defaults.per_minute),
        window_ms: positive("SWITCHBOARD_EMBED_BUDGET_WINDOW_MS")?.unwrap_or(defaults.window_ms),
        redis_url,
        redis_timeout,
    };
    Ok(switchboard_knowledgebase::Settings {
        database_url,
        index,
        embedding: EmbeddingConfig { model_dir, openai },
        objects,
        max_upload_bytes: max_upload_bytes(file)?,
        fetch: FetchPolicy::from_env(),
        chat: ChatConfig::from_env(),
        refresh_day_ms: match env("SWITCHBOARD_WEBPAGE_REFRESH_DAY") {
            Some(text) => switchboard_kit::time::parse_duration_ms(&text)
                .ok_or_else(|| anyhow::anyhow!("SWITCHBOARD_WEBPAGE_REFRESH_DAY={text}: expected e.g. 2s, 15m, 24h"))?,
            None => switchboard_knowledgebase::store::REFRESH_INTERVAL_MS,
        },
        budget,
    })
}

/// A setting that must be a whole number of at least 1.
fn positive(name: &str) -> anyhow::Result<Option<i64>> {
    let value = env_parsed::<i64>(name)?;
    if let Some(value) = value {
        anyhow::ensure!(value >= 1, "{name}={value}: expected a whole number of at least 1");
    }
    Ok(value)
}

/// The object storage of uploaded documents and call recordings: an S3-compatible bucket when
/// one is named, else a directory.
pub fn objects(file: &FileConfig, data_dir: &Path) -> ObjectsConfig {
    let k = &file.knowledgebase;
    match env("SWITCHBOARD_S3_BUCKET").or_else(|| k.s3_bucket.clone()) {
        Some(bucket) => {
            ObjectsConfig::S3 { bucket, endpoint: env("SWITCHBOARD_S3_ENDPOINT").or_else(|| k.s3_endpoint.clone()) }
        }
        None => ObjectsConfig::Local(
            env("SWITCHBOARD_OBJECT_STORE_DIR")
                .map(PathBuf::from)
                .or_else(|| k.object_store_dir.clone())
                .unwrap_or_else(|| data_dir.join("objects")),
        ),
    }
}

/// The largest uploaded file; the gateway and the knowledgebase service both apply it.
pub fn max_upload_bytes(file: &FileConfig) -> anyhow::Result<usize> {
    Ok(env_parsed("SWITCHBOARD_MAX_UPLOAD_BYTES")?
        .or(file.knowledgebase.max_upload_bytes)
        .unwrap_or(switchboard_knowledgebase::DEFAULT_MAX_UPLOAD_BYTES))
}
