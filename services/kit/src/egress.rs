//! Requests that Switchboard sends to addresses its users name (webpages to scrape, webhook
//! receivers) must not reach the operator's own network: no private, loopback, link-local or
//! otherwise special address unless the operator allows it. Literal addresses and `localhost`
//! are refused by [`check_host`] before anything is sent; names are checked in the DNS
//! resolver ([`GuardedResolver`]), so a name that resolves to a private address after the
//! check cannot slip in.

use std::net::{IpAddr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether `ip` is an ordinary address of the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (18..20).contains(&b)))
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public(IpAddr::V4(v4)),
            None => {
                let first = v6.segments()[0];
                !(v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast()
                    || (first & 0xfe00) == 0xfc00
                    || (first & 0xffc0) == 0xfe80)
            }
        },
    }
}

/// `Err(host)` when a URL's host is a non-public literal address or `localhost`; names are
/// left to the resolver.
pub fn check_host(host: &str) -> Result<(), String> {
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    if literal.parse::<IpAddr>().is_ok_and(|ip| !is_public(ip))
        || host.eq_ignore_ascii_case("localhost")
        || host.to_ascii_lowercase().ends_with(".localhost")
    {
        return Err(host.to_owned());
    }
    Ok(())
}

/// Resolves names and refuses to connect to non-public addresses (unless `allow_private`).
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> =
                found.iter().copied().filter(|address| allow_private || is_public(address.ip())).collect();
            if allowed.is_empty() && !found.is_empty() {
                return Err(Box::new(PrivateAddress(host)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The resolver's refusal, found in a failed request's error chain by [`refused_host`].
#[derive(Debug)]
pub struct PrivateAddress(pub String);

impl std::fmt::Display for PrivateAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "private address refused for {}", self.0)
    }
}

impl std::error::Error for PrivateAddress {}

/// Whether a request failed because the resolver refused a private address.
pub fn refused_private(error: &reqwest::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(current) = source {
        if current.downcast_ref::<PrivateAddress>().is_some() {
            return true;
        }
        source = current.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.5.4",
            "169.254.1.1",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn literal_hosts_and_localhost_are_refused_names_are_left_to_dns() {
        for refused in ["127.0.0.1", "[::1]", "localhost", "LOCALHOST", "api.localhost", "10.0.0.8"] {
            assert_eq!(check_host(refused), Err(refused.to_owned()));
        }
        for allowed in ["example.com", "93.184.216.34", "[2606:4700::1111]"] {
            assert_eq!(check_host(allowed), Ok(()));
        }
    }
}
