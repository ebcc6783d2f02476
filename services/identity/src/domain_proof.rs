//! Proof that a team controls an e-mail domain, before its single sign-on covers it: a TXT
//! record `_switchboard-verification.<domain>` whose value is `switchboard-verification=<the
//! team's token>`, or that line in `https://<domain>/.well-known/switchboard-verification.txt`.
//! Whoever can publish either controls the domain's DNS or its web server; a team that merely
//! names a domain (`gmail.com`, another company's) cannot.
//!
//! Both checks reach addresses a team chose, so both are guarded: the TXT record is asked of
//! the configured DNS server (`SWITCHBOARD_DNS_SERVER`, `switchboard_kit::dns_lookup`), and
//! the file is fetched over https only, with no redirect, short timeouts and a small body cap,
//! from an address that server gave and that the SSO egress allowance lets through
//! (`SWITCHBOARD_SSO_ALLOW_PRIVATE`), checked in the resolver the connection uses.
//!
//! For tests (and CAs of an intranet): `SWITCHBOARD_SSO_PROOF_CA_FILE` adds root certificates
//! the file's server may be signed by, and `SWITCHBOARD_SSO_PROOF_HTTPS_PORT` fetches it from
//! another port than 443. Unset, only the public web's roots and port 443 are used.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use switchboard_kit::dns_lookup::{DnsError, DnsLookup};
use switchboard_kit::egress::{self, GuardedResolver, Lookup, PrivateAllowance};

use crate::store::sso::{ProofMethod, https_url, proof_value, txt_name};

/// The most of the file read: it holds one line.
const MAX_FILE_BYTES: usize = 4096;
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Checks domains' proofs.
#[derive(Clone)]
pub struct DomainProver {
    dns: DnsLookup,
    https: reqwest::Client,
    allowance: PrivateAllowance,
    /// Where the file is fetched from when not port 443 (tests).
    https_port: Option<u16>,
}

/// Why a domain is not proven: what each check found.
#[derive(Debug)]
pub struct NotProven {
    pub reasons: Vec<String>,
    /// The DNS server itself failed (no answer, an error): the TXT record was not checked.
    pub dns_failed: bool,
}

impl DomainProver {
    /// With `allowance`, the private addresses single sign-on may reach.
    pub fn from_env(allowance: PrivateAllowance) -> anyhow::Result<Self> {
        let dns = DnsLookup::from_env()?;
        let mut extra_roots = Vec::new();
        if let Some(path) = std::env::var("SWITCHBOARD_SSO_PROOF_CA_FILE").ok().filter(|path| !path.trim().is_empty()) {
            let pem =
                std::fs::read(path.trim()).with_context(|| format!("SWITCHBOARD_SSO_PROOF_CA_FILE: reading {path}"))?;
            extra_roots = reqwest::Certificate::from_pem_bundle(&pem)
                .with_context(|| format!("SWITCHBOARD_SSO_PROOF_CA_FILE: {path} holds no PEM certificate"))?;
            anyhow::ensure!(!extra_roots.is_empty(), "SWITCHBOARD_SSO_PROOF_CA_FILE: {path} holds no PEM certificate");
        }
        let https_port = match std::env::var("SWITCHBOARD_SSO_PROOF_HTTPS_PORT") {
            Ok(port) if !port.trim().is_empty() => Some(
                port.trim()
                    .parse::<u16>()
                    .ok()
                    .filter(|port| *port > 0)
                    .context("SWITCHBOARD_SSO_PROOF_HTTPS_PORT must be a port number")?,
            ),
            _ => None,
        };
        Self::new(dns, allowance, extra_roots, https_port)
    }

    pub fn new(
        dns: DnsLookup,
        allowance: PrivateAllowance,
        extra_roots: Vec<reqwest::Certificate>,
        https_port: Option<u16>,
    ) -> anyhow::Result<Self> {
        let resolver = GuardedResolver::with(allowance.clone(), Lookup::Server(dns.clone()));
        let mut builder = reqwest::Client::builder()
            .https_only(true)
            // A redirect would let the domain's server send this service anywhere.
            .redirect(reqwest::redirect::Policy::none())
            // Through a proxy (HTTPS_PROXY), the proxy would resolve the name, not the guard.
            .no_proxy()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("Switchboard/", env!("CARGO_PKG_VERSION"), " (domain proof)"))
            .dns_resolver(Arc::new(resolver));
        for root in extra_roots {
            builder = builder.add_root_certificate(root);
        }
        Ok(Self { dns, https: builder.build()?, allowance, https_port })
    }

    /// How `domain` is proven for the team whose token is `token`, or what was found instead.
    pub async fn check(&self, domain: &str, token: &str) -> Result<ProofMethod, NotProven> {
        let value = proof_value(token);
        let mut reasons = Vec::new();
        let mut dns_failed = false;
        let record = txt_name(domain);
        match self.dns.txt(&record).await {
            Ok(texts) if texts.iter().any(|text| text.trim() == value) => return Ok(ProofMethod::Dns),
            Ok(texts) if texts.is_empty() => reasons.push(format!("no TXT record at {record}")),
            Ok(_) => reasons.push(format!("the TXT records at {record} do not hold {value}")),
            Err(error @ DnsError::InvalidName(_)) => reasons.push(error.to_string()),
            Err(error) => {
                dns_failed = true;
                reasons.push(format!("the TXT record at {record} could not be looked up: {error}"));
            }
        }
        let url = https_url(domain);
        match self.fetch_file(domain).await {
            Ok(body) if body.lines().any(|line| line.trim() == value) => return Ok(ProofMethod::Https),
            Ok(_) => reasons.push(format!("{url} does not hold {value}")),
            Err(reason) => reasons.push(format!("{url}: {reason}")),
        }
        Err(NotProven { reasons, dns_failed })
    }

    /// The file's text, read up to its cap.
    async fn fetch_file(&self, domain: &str) -> Result<String, String> {
        egress::check_host_allowing(domain, &self.allowance)
            .map_err(|host| format!("{host} is a private, loopback or link-local address"))?;
        let mut url = url::Url::parse(&https_url(domain)).map_err(|_| "not a URL".to_owned())?;
        if let Some(port) = self.https_port {
            url.set_port(Some(port)).map_err(|()| "the port cannot be set".to_owned())?;
        }
        let mut response = self.https.get(url).send().await.map_err(|error| describe(&error))?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(format!(
                "answered HTTP {} (it must answer 200, without a redirect)",
                response.status().as_u16()
            ));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| describe(&error))? {
            if body.len() + chunk.len() > MAX_FILE_BYTES {
                return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}

/// A failed request in words: the resolver's refusal, a timeout, or the error's causes (a TLS
/// failure says why the certificate was refused).
pub(crate) fn describe(error: &reqwest::Error) -> String {
    if egress::refused_private(error) {
        return "its address is private, loopback or link-local, which this service may not reach".to_owned();
    }
    if error.is_timeout() {
        return "no answer in time".to_owned();
    }
    let mut words = Vec::new();
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(current) = source {
        let text = current.to_string();
        if !words.iter().any(|word: &String| word.contains(&text)) {
            words.push(text);
        }
        source = current.source();
    }
    words.join(": ")
}
