//! Fetching a webpage the way a polite, careful crawler does: http and https only, a
//! bounded number of redirects (each hop checked again), an overall timeout, a size cap, a
//! user agent that says who we are, robots.txt obeyed, and no private, loopback or
//! link-local address unless the operator allows it. The address check sits in the DNS
//! resolver, so a name that resolves to a private address after the check cannot slip in.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use switchboard_kit::egress::{self, GuardedResolver};
use url::Url;

use super::robots::Robots;

pub const USER_AGENT: &str =
    concat!("SwitchboardBot/", env!("CARGO_PKG_VERSION"), " (+https://github.com/switchboard)");
const ROBOTS_TOKEN: &str = "SwitchboardBot";

#[derive(Debug, Clone)]
pub struct FetchPolicy {
    pub allow_private: bool,
    pub timeout: Duration,
    pub max_bytes: usize,
    pub max_redirects: usize,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        Self { allow_private: false, timeout: Duration::from_secs(15), max_bytes: 5 * 1024 * 1024, max_redirects: 5 }
    }
}

impl FetchPolicy {
    /// Defaults with `SWITCHBOARD_SCRAPE_ALLOW_PRIVATE`, `SWITCHBOARD_SCRAPE_TIMEOUT_MS`,
    /// `SWITCHBOARD_SCRAPE_MAX_BYTES` and `SWITCHBOARD_SCRAPE_MAX_REDIRECTS` applied.
    pub fn from_env() -> Self {
        let number = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok());
        let mut policy = Self {
            allow_private: std::env::var("SWITCHBOARD_SCRAPE_ALLOW_PRIVATE").is_ok_and(|v| v.trim() == "true"),
            ..Self::default()
        };
        if let Some(ms) = number("SWITCHBOARD_SCRAPE_TIMEOUT_MS") {
            policy.timeout = Duration::from_millis(ms.max(100));
        }
        if let Some(bytes) = number("SWITCHBOARD_SCRAPE_MAX_BYTES") {
            policy.max_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        if let Some(redirects) = number("SWITCHBOARD_SCRAPE_MAX_REDIRECTS") {
            policy.max_redirects = usize::try_from(redirects).unwrap_or(5);
        }
        policy
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentKind {
    Html,
    PlainText,
}

#[derive(Debug, Clone)]
pub struct Fetched {
    pub url: Url,
    pub kind: ContentKind,
    pub body: String,
}

/// Why a fetch failed, worded for the webpage's `failureReason`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("the URL is not valid: {0}")]
    InvalidUrl(String),
    #[error("only http and https URLs can be scraped")]
    UnsupportedScheme,
    #[error("the address of {0} is private, loopback or link-local, which scraping may not reach")]
    PrivateAddress(String),
    #[error("robots.txt of {0} does not allow {ROBOTS_TOKEN} to fetch this page")]
    RobotsDisallowed(String),
    #[error("robots.txt of {0} could not be read (status {1}); retrying later")]
    RobotsUnavailable(String, u16),
    #[error("the page did not answer within {0} seconds")]
    Timeout(u64),
    #[error("the page is larger than {0} bytes")]
    TooLarge(usize),
    #[error("more than {0} redirects")]
    TooManyRedirects(usize),
    #[error("the page answered HTTP {0}")]
    HttpStatus(u16),
    #[error("the page is {0}, not HTML or text")]
    UnsupportedContentType(String),
    #[error("the page could not be fetched: {0}")]
    Network(String),
}

pub struct Fetcher {
    client: reqwest::Client,
    policy: FetchPolicy,
}

fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

impl Fetcher {
    pub fn new(policy: FetchPolicy) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .timeout(policy.timeout)
            .connect_timeout(policy.timeout.min(Duration::from_secs(10)))
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(GuardedResolver::new(policy.allow_private)))
            .build()?;
        Ok(Self { client, policy })
    }

    fn check_url(&self, url: &Url) -> Result<(), FetchError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::UnsupportedScheme);
        }
        let host = url.host_str().ok_or_else(|| FetchError::InvalidUrl("it has no host".into()))?;
        // Literal addresses never reach the resolver: check them here.
        if !self.policy.allow_private {
            egress::check_host(host).map_err(FetchError::PrivateAddress)?;
        }
        Ok(())
    }

    fn classify(&self, url: &Url, error: reqwest::Error) -> FetchError {
        if error.is_timeout() {
            return FetchError::Timeout(self.policy.timeout.as_secs().max(1));
        }
        if egress::refused_private(&error) {
            return FetchError::PrivateAddress(url.host_str().unwrap_or_default().to_owned());
        }
        FetchError::Network(error.without_url().to_string())
    }

    async fn robots(&self, url: &Url) -> Result<Robots, FetchError> {
        let Ok(robots_url) = url.join("/robots.txt") else {
            return Ok(Robots::allow_all());
        };
        let response = match self.client.get(robots_url).send().await {
            Ok(response) => response,
            // The host cannot be reached (or is refused): say so, not that robots.txt failed.
            Err(error) => return Err(self.classify(url, error)),
        };
        let status = response.status();
        if status.is_server_error() {
            return Err(FetchError::RobotsUnavailable(origin(url), status.as_u16()));
        }
        if !status.is_success() {
            // 4xx (and redirects we do not follow for robots): nothing is disallowed.
            return Ok(Robots::allow_all());
        }
        let text = read_capped(response, 512 * 1024).await.unwrap_or_default();
        Ok(Robots::parse(&String::from_utf8_lossy(&text), ROBOTS_TOKEN))
    }

    pub async fn fetch(&self, raw: &str) -> Result<Fetched, FetchError> {
        let mut url = Url::parse(raw.trim()).map_err(|e| FetchError::InvalidUrl(e.to_string()))?;
        let mut robots_by_origin: HashMap<String, Robots> = HashMap::new();
        for _ in 0..=self.policy.max_redirects {
            self.check_url(&url)?;
            let key = origin(&url);
            if !robots_by_origin.contains_key(&key) {
                let robots = self.robots(&url).await?;
                robots_by_origin.insert(key.clone(), robots);
            }
            let path = match url.query() {
                Some(query) => format!("{}?{query}", url.path()),
                None => url.path().to_owned(),
            };
            if robots_by_origin.get(&key).is_some_and(|robots| !robots.allows(&path)) {
                return Err(FetchError::RobotsDisallowed(key));
            }
            let response = self.client.get(url.clone()).send().await.map_err(|e| self.classify(&url, e))?;
            let status = response.status();
            if status.is_redirection() {
                let location = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or(FetchError::HttpStatus(status.as_u16()))?;
                url = url.join(location).map_err(|e| FetchError::InvalidUrl(e.to_string()))?;
                continue;
            }
            if !status.is_success() {
                return Err(FetchError::HttpStatus(status.as_u16()));
            }
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("text/html")
                .to_ascii_lowercase();
            let essence = content_type.split(';').next().unwrap_or_default().trim().to_owned();
            let kind = match essence.as_str() {
                "text/html" | "application/xhtml+xml" => ContentKind::Html,
                "text/plain" => ContentKind::PlainText,
                other => return Err(FetchError::UnsupportedContentType(other.to_owned())),
            };
            if response.content_length().is_some_and(|length| length > self.policy.max_bytes as u64) {
                return Err(FetchError::TooLarge(self.policy.max_bytes));
            }
            let bytes = read_capped(response, self.policy.max_bytes).await.map_err(|error| match error {
                ReadError::TooLarge => FetchError::TooLarge(self.policy.max_bytes),
                ReadError::Failed(error) => self.classify(&url, error),
            })?;
            let body = decode(&bytes, &content_type);
            return Ok(Fetched { url, kind, body });
        }
        Err(FetchError::TooManyRedirects(self.policy.max_redirects))
    }
}

enum ReadError {
    TooLarge,
    Failed(reqwest::Error),
}

async fn read_capped(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Failed)? {
        if body.len() + chunk.len() > max {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Decodes with the declared charset, UTF-8 otherwise.
fn decode(bytes: &[u8], content_type: &str) -> String {
    let charset = content_type.split(';').filter_map(|part| part.trim().strip_prefix("charset=")).next();
    match charset.and_then(|label| encoding_rs::Encoding::for_label(label.trim_matches('"').as_bytes())) {
        Some(encoding) => encoding.decode(bytes).0.into_owned(),
        None => String::from_utf8_lossy(bytes).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_before_anything_is_sent() {
        let fetcher = Fetcher::new(FetchPolicy::default()).unwrap();
        let check = |raw: &str| fetcher.check_url(&Url::parse(raw).unwrap());
        assert_eq!(check("ftp://example.com/"), Err(FetchError::UnsupportedScheme));
        assert!(matches!(check("http://127.0.0.1:8080/"), Err(FetchError::PrivateAddress(_))));
        assert!(matches!(check("http://[::1]/"), Err(FetchError::PrivateAddress(_))));
        assert!(matches!(check("http://localhost/"), Err(FetchError::PrivateAddress(_))));
        assert!(check("https://example.com/a").is_ok());
        let allowing = Fetcher::new(FetchPolicy { allow_private: true, ..FetchPolicy::default() }).unwrap();
        assert!(allowing.check_url(&Url::parse("http://127.0.0.1:8080/").unwrap()).is_ok());
    }

    #[test]
    fn charsets_are_honoured() {
        assert_eq!(decode(&[0xE9], "text/html; charset=iso-8859-1"), "é");
        assert_eq!(decode("é".as_bytes(), "text/html"), "é");
    }
}
