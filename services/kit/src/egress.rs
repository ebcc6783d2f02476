//! Requests that Switchboard sends to addresses its users name (webpages to scrape, webhook
//! receivers, teams' identity providers, the domains a team proves it controls) must not
//! reach the operator's own network: no private, loopback, link-local or otherwise special
//! address unless the operator allows it (all of them, or some: [`PrivateAllowance`]).
//! Literal addresses and `localhost` are refused by [`check_host`] before anything is sent;
//! names are checked in the DNS resolver ([`GuardedResolver`]), so a name that resolves to a
//! private address after the check cannot slip in: the address connected to is the address
//! checked.

use std::net::{IpAddr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::dns_lookup::DnsLookup;

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
    check_host_allowing(host, &PrivateAllowance::None)
}

/// [`check_host`], letting through the private addresses `allowance` allows (`localhost` only
/// when it allows every address: a list names addresses, not names).
pub fn check_host_allowing(host: &str, allowance: &PrivateAllowance) -> Result<(), String> {
    if *allowance == PrivateAllowance::All {
        return Ok(());
    }
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    if literal.parse::<IpAddr>().is_ok_and(|ip| !allowance.allows(ip))
        || host.eq_ignore_ascii_case("localhost")
        || host.to_ascii_lowercase().ends_with(".localhost")
    {
        return Err(host.to_owned());
    }
    Ok(())
}

/// Which non-public addresses a kind of request may reach: none (the default), all (`true`:
/// tests, or everything inside the operator's network), or only these addresses and ranges
/// (e.g. `10.20.0.0/16,127.0.0.1`: one provider inside the cluster, nothing else private).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PrivateAllowance {
    #[default]
    None,
    All,
    Only(Vec<ipnet::IpNet>),
}

impl PrivateAllowance {
    /// `true` is all; empty or `false` is none; else addresses and CIDRs separated by commas or
    /// spaces.
    pub fn parse(value: &str) -> Result<Self, String> {
        let value = value.trim();
        if value.is_empty() || value.eq_ignore_ascii_case("false") {
            return Ok(Self::None);
        }
        if value.eq_ignore_ascii_case("true") {
            return Ok(Self::All);
        }
        let nets = value
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|part| !part.is_empty())
            .map(|part| {
                part.parse::<ipnet::IpNet>()
                    .or_else(|_| part.parse::<IpAddr>().map(ipnet::IpNet::from))
                    .map(|net| net.trunc())
                    .map_err(|_| format!("{part:?} is neither an IP address nor a CIDR range"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::Only(nets))
    }

    /// The allowance a variable sets (none when it is unset).
    pub fn from_env(variable: &str) -> anyhow::Result<Self> {
        match std::env::var(variable) {
            Ok(value) => Self::parse(&value).map_err(|error| anyhow::anyhow!("{variable}: {error}")),
            Err(_) => Ok(Self::None),
        }
    }

    /// Whether a request may connect to `ip`: a public address, or one this allows.
    pub fn allows(&self, ip: IpAddr) -> bool {
        if is_public(ip) {
            return true;
        }
        // `::ffff:10.0.0.1` is 10.0.0.1, whichever way it is written.
        let ip = ip.to_canonical();
        match self {
            Self::None => false,
            Self::All => true,
            Self::Only(nets) => nets.iter().any(|net| net.contains(&ip)),
        }
    }
}

/// Where a [`GuardedResolver`] looks names up.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// The system's resolver (`getaddrinfo`: `/etc/hosts`, then DNS).
    System,
    /// One DNS server, asked directly.
    Server(DnsLookup),
}

/// Resolves names and refuses to connect to non-public addresses its allowance does not let
/// through; when every address of a name is refused, the request fails with
/// [`PrivateAddress`].
pub struct GuardedResolver {
    allowance: PrivateAllowance,
    lookup: Lookup,
}

impl GuardedResolver {
    /// Through the system's resolver; every private address or none.
    pub fn new(allow_private: bool) -> Self {
        let allowance = if allow_private { PrivateAllowance::All } else { PrivateAllowance::None };
        Self { allowance, lookup: Lookup::System }
    }

    pub fn with(allowance: PrivateAllowance, lookup: Lookup) -> Self {
        Self { allowance, lookup }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allowance = self.allowance.clone();
        let lookup = self.lookup.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> = match lookup {
                Lookup::System => tokio::net::lookup_host((host.as_str(), 0)).await?.collect(),
                Lookup::Server(dns) => {
                    let found = dns.addresses(&host).await.map_err(|error| Box::new(error) as BoxError)?;
                    if found.is_empty() {
                        let error = std::io::Error::new(std::io::ErrorKind::NotFound, format!("{host} has no address"));
                        return Err(Box::new(error) as BoxError);
                    }
                    found.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect()
                }
            };
            let allowed: Vec<SocketAddr> =
                found.iter().copied().filter(|address| allowance.allows(address.ip())).collect();
            if allowed.is_empty() && !found.is_empty() {
                return Err(Box::new(PrivateAddress(host)) as BoxError);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

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
    use std::str::FromStr;

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

    #[test]
    fn an_allowance_lets_through_the_private_addresses_it_names_and_no_other() {
        assert_eq!(PrivateAllowance::parse("").unwrap(), PrivateAllowance::None);
        assert_eq!(PrivateAllowance::parse(" false ").unwrap(), PrivateAllowance::None);
        assert_eq!(PrivateAllowance::parse("TRUE").unwrap(), PrivateAllowance::All);
        assert!(PrivateAllowance::parse("127.0.0.1, 10.0.0.300").is_err());
        assert!(PrivateAllowance::parse("intranet.example").is_err());
        let some = PrivateAllowance::parse("127.0.0.1, 10.20.0.0/16 fd00::/8").unwrap();
        for allowed in ["127.0.0.1", "10.20.3.4", "::ffff:10.20.0.1", "fd00::5", "93.184.216.34"] {
            assert!(some.allows(allowed.parse().unwrap()), "{allowed}");
        }
        for refused in ["127.0.0.2", "10.21.0.1", "169.254.169.254", "192.168.1.1", "::1", "fc00::1"] {
            assert!(!some.allows(refused.parse().unwrap()), "{refused}");
        }
        assert_eq!(check_host_allowing("127.0.0.1", &some), Ok(()));
        assert_eq!(check_host_allowing("127.0.0.2", &some), Err("127.0.0.2".to_owned()));
        assert_eq!(check_host_allowing("[::1]", &some), Err("[::1]".to_owned()));
        assert_eq!(check_host_allowing("localhost", &some), Err("localhost".to_owned()));
        assert_eq!(check_host_allowing("localhost", &PrivateAllowance::All), Ok(()));
        assert_eq!(check_host_allowing("169.254.169.254", &PrivateAllowance::None), Err("169.254.169.254".to_owned()));
    }

    /// The resolver connects only to the addresses it let through: a name whose addresses are
    /// all refused fails, one with a refused and an allowed address gives only the allowed.
    #[tokio::test]
    async fn the_resolver_hands_out_only_allowed_addresses() {
        use tokio::net::UdpSocket;
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let address = server.local_addr().unwrap();
        // A two-address answer for every A query (AAAA: none), whatever the name.
        tokio::spawn(async move {
            let mut buffer = [0u8; 512];
            while let Ok((length, peer)) = server.recv_from(&mut buffer).await {
                let query = &buffer[..length];
                let question_end = 12 + query[12..].iter().position(|&b| b == 0).unwrap() + 5;
                let qtype = u16::from_be_bytes([query[question_end - 4], query[question_end - 3]]);
                let mut answer = query[..question_end].to_vec();
                answer[2] = 0x81;
                answer[3] = 0x80;
                answer[10] = 0;
                answer[11] = 0;
                if qtype == 1 {
                    answer[7] = 2;
                    for ip in [[127, 0, 0, 2], [127, 0, 0, 1]] {
                        answer.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
                        answer.extend_from_slice(&ip);
                    }
                }
                let _ = server.send_to(&answer, peer).await;
            }
        });
        let dns = DnsLookup::new(address);
        let resolve = |allowance: &str| {
            let resolver =
                GuardedResolver::with(PrivateAllowance::parse(allowance).unwrap(), Lookup::Server(dns.clone()));
            resolver.resolve(Name::from_str("proof.example").unwrap())
        };
        let allowed: Vec<SocketAddr> = resolve("127.0.0.1").await.unwrap().collect();
        assert_eq!(allowed, ["127.0.0.1:0".parse::<SocketAddr>().unwrap()]);
        let refused = resolve("10.0.0.0/8").await.err().unwrap();
        assert!(refused.downcast_ref::<PrivateAddress>().is_some(), "{refused}");
        let all: Vec<SocketAddr> = resolve("true").await.unwrap().collect();
        assert_eq!(all.len(), 2);
    }
}
