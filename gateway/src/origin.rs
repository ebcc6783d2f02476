//! Where a request comes from and where the links the platform hands out point.
//!
//! Links (invitations, password resets, recordings) point at the configured public URL
//! (`SWITCHBOARD_PUBLIC_URL`), never at a host a client names: a client-sent `Host` or
//! `X-Forwarded-Host` would otherwise let anyone make the platform mail a link to their own
//! site. The client's address and scheme come from the TCP peer, unless the peer is one of the
//! configured proxies (`SWITCHBOARD_TRUSTED_PROXIES`): then from its `X-Forwarded-For` (the
//! right-most address that is not itself a trusted proxy) and `X-Forwarded-Proto`.

use std::net::IpAddr;

use http::HeaderName;
use ipnet::IpNet;
use pingora::http::RequestHeader;
use pingora::proxy::Session;

static FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// The public URL and the proxies whose forwarding headers are believed.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    /// Scheme and host (and port) of links, without a trailing slash.
    public_base: String,
    trusted: Vec<IpNet>,
}

impl Origins {
    pub fn new(public_base: &str, trusted: Vec<IpNet>) -> Self {
        Self { public_base: public_base.trim_end_matches('/').to_owned(), trusted }
    }

    /// Scheme and host every link the platform makes starts with.
    pub fn public_base(&self) -> &str {
        &self.public_base
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.trusted.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request on `session`: its address and user agent, and whether it reached
    /// the platform over https.
    pub fn client(&self, session: &Session) -> Client {
        let peer = session.client_addr().and_then(|addr| addr.as_inet()).map(|addr| canonical(addr.ip()));
        self.client_of(peer, session.req_header())
    }

    /// As [`Origins::client`], from the peer's address and the request header.
    pub fn client_of(&self, peer: Option<IpAddr>, header: &RequestHeader) -> Client {
        let via_proxy = peer.is_some_and(|peer| self.trusts(peer));
        let ip = match peer {
            Some(peer) if via_proxy => self.forwarded_for(header).unwrap_or(peer),
            Some(peer) => peer,
            None => return Client { user_agent: user_agent(header), ..Client::default() },
        };
        let forwarded_https = via_proxy
            && header
                .headers
                .get(&FORWARDED_PROTO)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.split(',').next())
                .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"));
        Client {
            ip: ip_text(ip),
            user_agent: user_agent(header),
            https: forwarded_https || self.public_base.starts_with("https://"),
        }
    }

    /// The right-most address of `X-Forwarded-For` that is not a trusted proxy: each proxy
    /// appends the address it saw, so only the part added by trusted ones can be believed.
    fn forwarded_for(&self, header: &RequestHeader) -> Option<IpAddr> {
        let values: Vec<&str> = header.headers.get_all(&FORWARDED_FOR).iter().filter_map(|v| v.to_str().ok()).collect();
        let mut hops = values.iter().flat_map(|value| value.split(',')).map(str::trim).rev();
        let mut last = None;
        for hop in hops.by_ref() {
            // Something that is no address ends what can be believed.
            let ip = canonical(parse_hop(hop)?);
            if !self.trusts(ip) {
                return Some(ip);
            }
            last = Some(ip);
        }
        last
    }
}

/// An address as proxies write it: bare, `[v6]`, `[v6]:port` or `v4:port`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = hop.parse() {
        return Some(ip);
    }
    if let Some(rest) = hop.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    hop.rsplit_once(':').and_then(|(ip, _port)| ip.parse().ok())
}

/// IPv4 addresses mapped into IPv6 (a dual-stack listener's peers) as the IPv4 they are.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn user_agent(header: &RequestHeader) -> String {
    // `to_str` passes visible ASCII only, so a byte is a character.
    header
        .headers
        .get(http::header::USER_AGENT)
        .and_then(|value| value.to_str().ok())
        .map(|value| value[..value.len().min(512)].to_owned())
        .unwrap_or_default()
}

/// Parses `SWITCHBOARD_TRUSTED_PROXIES`: CIDRs or bare addresses, separated by commas or spaces.
pub fn parse_trusted(text: &str) -> anyhow::Result<Vec<IpNet>> {
    text.split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.parse::<IpNet>()
                .or_else(|_| part.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| anyhow::anyhow!("{part:?} is neither a CIDR (10.0.0.0/8) nor an address"))
        })
        .collect()
}

/// An address as `Display` writes it; IPv4 without the formatting machinery, which cost more
/// than the rest of finding the client (this runs for every request).
pub fn ip_text(ip: IpAddr) -> String {
    let IpAddr::V4(v4) = ip else { return ip.to_string() };
    let mut text = String::with_capacity(15);
    for (index, octet) in v4.octets().into_iter().enumerate() {
        if index > 0 {
            text.push('.');
        }
        if octet >= 100 {
            text.push(char::from(b'0' + octet / 100));
        }
        if octet >= 10 {
            text.push(char::from(b'0' + octet / 10 % 10));
        }
        text.push(char::from(b'0' + octet % 10));
    }
    text
}

/// Where a request came from: the client's address and `User-Agent` (found by [`Origins::client`]), and
/// whether it reached the platform over https (cookies are then `Secure`).
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub ip: String,
    pub user_agent: String,
    pub https: bool,
}

impl From<&Client> for switchboard_proto::v1::Client {
    fn from(client: &Client) -> Self {
        Self { ip: client.ip.clone(), user_agent: client.user_agent.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> RequestHeader {
        let mut header = RequestHeader::build("GET", b"/v1/me", None).expect("a request");
        for (name, value) in headers {
            header.append_header(name.to_string(), *value).expect("a header");
        }
        header
    }

    fn origins(trusted: &str) -> Origins {
        Origins::new("https://app.example/", parse_trusted(trusted).expect("valid"))
    }

    #[test]
    fn an_address_is_written_as_display_writes_it() {
        for text in ["0.0.0.0", "127.0.0.1", "10.9.99.100", "255.255.255.255", "::1", "2001:db8::ff00:42:8329"] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(ip_text(ip), ip.to_string());
        }
    }

    #[test]
    fn forwarding_headers_of_an_untrusted_peer_are_ignored() {
        let forged = request(&[("X-Forwarded-For", "1.2.3.4"), ("X-Forwarded-Proto", "https")]);
        let client = origins("10.0.0.0/8").client_of(Some("192.0.2.7".parse().unwrap()), &forged);
        assert_eq!(client.ip, "192.0.2.7");
        let plain = Origins::new("http://localhost:8080", Vec::new());
        assert!(!plain.client_of(Some("192.0.2.7".parse().unwrap()), &forged).https, "a client says https");
    }

    #[test]
    fn a_trusted_proxy_chain_gives_the_first_untrusted_address_from_the_right() {
        let origins = origins("10.0.0.0/8, 192.168.1.1");
        let proxy = Some("10.0.0.5".parse().unwrap());
        // The client forged the left-most entry; the ingress appended what it saw.
        let chain = request(&[("X-Forwarded-For", "6.6.6.6, 203.0.113.9"), ("X-Forwarded-For", "10.1.1.1")]);
        assert_eq!(origins.client_of(proxy, &chain).ip, "203.0.113.9");
        let through_two = request(&[("X-Forwarded-For", "203.0.113.9, 192.168.1.1")]);
        assert_eq!(origins.client_of(proxy, &through_two).ip, "203.0.113.9");
        let with_ports = request(&[("X-Forwarded-For", "[2001:db8::1]:4711")]);
        assert_eq!(origins.client_of(proxy, &with_ports).ip, "2001:db8::1");
        let garbage = request(&[("X-Forwarded-For", "not an address")]);
        assert_eq!(origins.client_of(proxy, &garbage).ip, "10.0.0.5", "nothing believable: the proxy itself");
        let mapped = Some("::ffff:10.0.0.5".parse().unwrap());
        assert_eq!(origins.client_of(mapped, &chain).ip, "203.0.113.9", "a v4-mapped peer is the v4 address");
    }

    #[test]
    fn the_scheme_is_https_by_the_public_url_or_a_trusted_proxy() {
        let plain = Origins::new("http://localhost:8080", parse_trusted("127.0.0.1").unwrap());
        let https = request(&[("X-Forwarded-Proto", "https")]);
        assert!(plain.client_of(Some("127.0.0.1".parse().unwrap()), &https).https);
        assert!(!plain.client_of(Some("127.0.0.1".parse().unwrap()), &request(&[])).https);
        assert!(origins("").client_of(Some("192.0.2.1".parse().unwrap()), &request(&[])).https);
    }

    #[test]
    fn trusted_proxies_are_cidrs_or_addresses() {
        assert_eq!(parse_trusted("10.0.0.0/8 ,::1").unwrap().len(), 2);
        assert!(parse_trusted("").unwrap().is_empty());
        assert!(parse_trusted("10.0.0.0/33").is_err());
        assert!(parse_trusted("ingress").is_err());
    }
}
