//! How the identity service reaches OpenID providers and the domains teams prove.
//!
//! Every request to a provider (discovery, its keys, its token endpoint) goes through
//! [`SsoHttp`]: http(s) only, each URL's literal host checked, names resolved by a resolver
//! that refuses private, loopback and link-local addresses (so the address connected is the
//! address checked), no redirects, timeouts and a body cap. `SWITCHBOARD_SSO_ALLOW_PRIVATE`
//! lets through every private address (`true`) or some (addresses and CIDRs): tests, and
//! providers inside the cluster.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openidconnect::core::CoreProviderMetadata;
use openidconnect::{HttpRequest, HttpResponse, IssuerUrl};
use switchboard_kit::egress::{self, GuardedResolver, Lookup, PrivateAllowance};
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};

use crate::domain_proof::DomainProver;

/// The most of a provider's answer read (its metadata, its keys, a token).
const MAX_PROVIDER_BYTES: usize = 512 * 1024;
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
const PROVIDER_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How the service reaches providers and checks the domains teams prove.
#[derive(Clone)]
pub struct SsoHttp {
    client: reqwest::Client,
    allowance: PrivateAllowance,
    pub(crate) proofs: DomainProver,
}

/// Why a request to a provider was not answered.
#[derive(Debug)]
pub enum SsoFetchError {
    /// Not an http(s) URL.
    NotHttp(String),
    /// Its host is, or resolves only to, an address this service may not reach.
    Private(String),
    Failed {
        url: String,
        reason: String,
    },
}

impl std::fmt::Display for SsoFetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotHttp(url) => write!(f, "{url} is not an http(s) URL"),
            Self::Private(host) => write!(
                f,
                "{host} is a private, loopback or link-local address, which single sign-on may not reach \
                 (SWITCHBOARD_SSO_ALLOW_PRIVATE)"
            ),
            Self::Failed { url, reason } => write!(f, "{url}: {reason}"),
        }
    }
}

impl std::error::Error for SsoFetchError {}

impl SsoHttp {
    pub fn from_env() -> anyhow::Result<Self> {
        let allowance = PrivateAllowance::from_env("SWITCHBOARD_SSO_ALLOW_PRIVATE")?;
        let proofs = DomainProver::from_env(allowance.clone())?;
        Self::new(allowance, proofs)
    }

    pub fn new(allowance: PrivateAllowance, proofs: DomainProver) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            // Following redirects would let a provider send this service anywhere (SSRF).
            .redirect(reqwest::redirect::Policy::none())
            // Through a proxy (HTTPS_PROXY), the proxy would resolve the name, not the guard.
            .no_proxy()
            .timeout(PROVIDER_TIMEOUT)
            .connect_timeout(PROVIDER_CONNECT_TIMEOUT)
            .dns_resolver(Arc::new(GuardedResolver::with(allowance.clone(), Lookup::System)))
            .build()?;
        Ok(Self { client, allowance, proofs })
    }

    /// The provider's metadata and keys, each fetched through [`SsoHttp::fetch`].
    pub(crate) async fn discover(&self, issuer: &str) -> ServiceResult<CoreProviderMetadata> {
        let issuer = IssuerUrl::new(issuer.to_owned()).map_err(|_| provider_failed("its issuer is not a URL"))?;
        CoreProviderMetadata::discover_async(issuer, self)
            .await
            .map_err(|error| provider_failed(&format!("discovery failed: {}", causes(&error))))
    }

    /// One request of the OpenID flow, guarded: see the module's documentation.
    async fn fetch(&self, request: HttpRequest) -> Result<HttpResponse, SsoFetchError> {
        let uri = request.uri().to_string();
        let url = url::Url::parse(&uri).map_err(|_| SsoFetchError::NotHttp(uri.clone()))?;
        let host = url.host_str().filter(|_| matches!(url.scheme(), "http" | "https"));
        let host = host.ok_or_else(|| SsoFetchError::NotHttp(uri.clone()))?.to_owned();
        egress::check_host_allowing(&host, &self.allowance).map_err(SsoFetchError::Private)?;
        let failed = |reason: String| SsoFetchError::Failed { url: uri.clone(), reason };
        let request = reqwest::Request::try_from(request).map_err(|error| failed(error.to_string()))?;
        let mut response = self.client.execute(request).await.map_err(|error| {
            if egress::refused_private(&error) {
                SsoFetchError::Private(host.clone())
            } else {
                failed(crate::domain_proof::describe(&error))
            }
        })?;
        let mut answer = openidconnect::http::Response::builder().status(response.status());
        for (name, value) in response.headers() {
            answer = answer.header(name, value);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| failed(crate::domain_proof::describe(&error)))? {
            if body.len() + chunk.len() > MAX_PROVIDER_BYTES {
                return Err(failed(format!("the answer is larger than {MAX_PROVIDER_BYTES} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        answer.body(body).map_err(|error| failed(error.to_string()))
    }
}

impl<'c> openidconnect::AsyncHttpClient<'c> for SsoHttp {
    type Error = SsoFetchError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, SsoFetchError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(self.fetch(request))
    }
}

/// An error and its causes, in words.
pub(crate) fn causes(error: &dyn std::error::Error) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut source = Some(error);
    while let Some(current) = source {
        let text = current.to_string();
        if !words.iter().any(|word| word.contains(&text)) {
            words.push(text);
        }
        source = current.source();
    }
    words.join(": ")
}

pub(crate) fn provider_failed(reason: &str) -> ServiceError {
    ServiceError::new(ErrorKind::Unavailable, "The team's identity provider could not be used")
        .with_hint(format!("Its owner can check the single sign-on settings: {reason}."))
}
