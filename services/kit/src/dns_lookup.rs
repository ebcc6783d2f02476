//! Looks records up in the DNS (TXT, A and AAAA) by asking one recursive server directly, over
//! UDP, and again over TCP when the answer was truncated (RFC 1035, RFC 7766).
//!
//! The system resolver (`getaddrinfo`) reads no TXT record, and the one answer that matters
//! here (a domain's proof that a team controls it) must come from a server the operator
//! chose: `SWITCHBOARD_DNS_SERVER`, else the first `nameserver` of `/etc/resolv.conf`, as
//! the system itself would ask. Nothing is cached: each proof is asked afresh.
//!
//! Answers are read defensively: every length is checked against the message, compression
//! pointers are followed a bounded number of times, an answer to another query (its id or
//! question differs) is ignored, and a malformed one is an error, never a panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

const TYPE_A: u16 = 1;
const TYPE_CNAME: u16 = 5;
const TYPE_TXT: u16 = 16;
const TYPE_AAAA: u16 = 28;
const TYPE_OPT: u16 = 41;
const CLASS_IN: u16 = 1;
/// The EDNS(0) payload size offered: the size DNS Flag Day 2020 settled on, which avoids IP
/// fragmentation; a larger answer comes back truncated and is asked again over TCP.
const UDP_PAYLOAD: u16 = 1232;
/// CNAMEs followed from the name asked before giving up.
const MAX_CNAMES: usize = 8;
/// Compression pointers followed within one name: a loop ends here.
const MAX_POINTERS: usize = 32;

/// Why a lookup failed. A name that does not exist, or has no record of the type, is not an
/// error: it has no records.
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error("{0:?} is not a domain name that can be looked up")]
    InvalidName(String),
    #[error("the DNS server {0} did not answer within {1} ms")]
    Timeout(SocketAddr, u128),
    #[error("the DNS server {0} answered {1}")]
    Refused(SocketAddr, &'static str),
    #[error("the DNS server {0} sent a malformed answer: {1}")]
    Malformed(SocketAddr, &'static str),
    #[error("the DNS server {0} could not be reached: {1}")]
    Unreachable(SocketAddr, std::io::Error),
}

/// Asks one DNS server.
#[derive(Debug, Clone)]
pub struct DnsLookup {
    server: SocketAddr,
    /// How long each attempt waits for its answer.
    timeout: Duration,
    /// UDP attempts before giving up (a lost datagram is sent again).
    attempts: u32,
}

/// The setting that names the server.
pub const SERVER_VARIABLE: &str = "SWITCHBOARD_DNS_SERVER";

impl DnsLookup {
    pub fn new(server: SocketAddr) -> Self {
        Self { server, timeout: Duration::from_secs(2), attempts: 2 }
    }

    /// Each attempt's wait (at least 10 ms).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.max(Duration::from_millis(10));
        self
    }

    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// The server of `SWITCHBOARD_DNS_SERVER` (`address[:port]`), else the first `nameserver`
    /// of `/etc/resolv.conf`, else `127.0.0.1:53` (where glibc looks without one).
    pub fn from_env() -> anyhow::Result<Self> {
        if let Ok(value) = std::env::var(SERVER_VARIABLE)
            && !value.trim().is_empty()
        {
            let server = parse_server(&value).map_err(|error| anyhow::anyhow!("{SERVER_VARIABLE}: {error}"))?;
            return Ok(Self::new(server));
        }
        let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        let server = first_nameserver(&resolv).unwrap_or_else(|| SocketAddr::from((Ipv4Addr::LOCALHOST, 53)));
        Ok(Self::new(server))
    }

    /// The TXT records of `name`, each one's strings joined (RFC 7208, 3.3), in the order
    /// the server gave them. Text that is not UTF-8 is kept with replacement characters.
    pub async fn txt(&self, name: &str) -> Result<Vec<String>, DnsError> {
        let records = self.query(name, TYPE_TXT).await?;
        Ok(records
            .into_iter()
            .filter_map(|data| match data {
                Data::Txt(text) => Some(text),
                _ => None,
            })
            .collect())
    }

    /// The IPv4 and IPv6 addresses of `name` (following CNAMEs). Fails only when both
    /// lookups fail.
    pub async fn addresses(&self, name: &str) -> Result<Vec<IpAddr>, DnsError> {
        let (v4, v6) = tokio::join!(self.query(name, TYPE_A), self.query(name, TYPE_AAAA));
        let found = match (v4, v6) {
            (Err(error), Err(_)) => return Err(error),
            (v4, v6) => v4.unwrap_or_default().into_iter().chain(v6.unwrap_or_default()),
        };
        Ok(found
            .filter_map(|data| match data {
                Data::Address(ip) => Some(ip),
                _ => None,
            })
            .collect())
    }

    /// The records of type `qtype` that answer `name`.
    async fn query(&self, name: &str, qtype: u16) -> Result<Vec<Data>, DnsError> {
        let name = name.trim().trim_end_matches('.');
        let id: u16 = rand::random();
        let query = encode_query(id, name, qtype)?;
        let asked = Question { id, name, qtype };
        let mut answer = self.over_udp(&query, &asked).await?;
        if answer.truncated {
            answer = self.over_tcp(&query, &asked).await?;
        }
        Ok(answer.records)
    }

    async fn over_udp(&self, query: &[u8], asked: &Question<'_>) -> Result<Answer, DnsError> {
        let unreachable = |error| DnsError::Unreachable(self.server, error);
        let local: SocketAddr =
            if self.server.is_ipv4() { (Ipv4Addr::UNSPECIFIED, 0).into() } else { (Ipv6Addr::UNSPECIFIED, 0).into() };
        let socket = UdpSocket::bind(local).await.map_err(unreachable)?;
        // A connected socket takes datagrams from the server's address only.
        socket.connect(self.server).await.map_err(unreachable)?;
        let mut buffer = vec![0u8; usize::from(u16::MAX)];
        for _ in 0..self.attempts.max(1) {
            socket.send(query).await.map_err(unreachable)?;
            let deadline = tokio::time::Instant::now() + self.timeout;
            loop {
                let received = match tokio::time::timeout_at(deadline, socket.recv(&mut buffer)).await {
                    Err(_) => break,
                    Ok(received) => received.map_err(unreachable)?,
                };
                let message = buffer.get(..received).unwrap_or_default();
                // A late answer to an earlier attempt, or a forged one: keep waiting.
                if !answers(message, asked.id) {
                    continue;
                }
                return parse_answer(message, asked).map_err(|reason| self.failure(reason));
            }
        }
        Err(DnsError::Timeout(self.server, self.timeout.as_millis() * u128::from(self.attempts.max(1))))
    }

    async fn over_tcp(&self, query: &[u8], asked: &Question<'_>) -> Result<Answer, DnsError> {
        let exchange = async {
            let mut stream = TcpStream::connect(self.server).await?;
            let length = u16::try_from(query.len()).map_err(std::io::Error::other)?;
            let mut framed = Vec::with_capacity(query.len() + 2);
            framed.extend_from_slice(&length.to_be_bytes());
            framed.extend_from_slice(query);
            stream.write_all(&framed).await?;
            let mut length = [0u8; 2];
            stream.read_exact(&mut length).await?;
            let mut message = vec![0u8; usize::from(u16::from_be_bytes(length))];
            stream.read_exact(&mut message).await?;
            Ok::<_, std::io::Error>(message)
        };
        let message = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| DnsError::Timeout(self.server, self.timeout.as_millis()))?
            .map_err(|error| DnsError::Unreachable(self.server, error))?;
        if !answers(&message, asked.id) {
            return Err(self.failure(Failure::Malformed("the answer over TCP is not to the query sent")));
        }
        let answer = parse_answer(&message, asked).map_err(|reason| self.failure(reason))?;
        if answer.truncated {
            return Err(self.failure(Failure::Malformed("the answer over TCP is truncated")));
        }
        Ok(answer)
    }

    fn failure(&self, failure: Failure) -> DnsError {
        match failure {
            Failure::Malformed(reason) => DnsError::Malformed(self.server, reason),
            Failure::Rcode(rcode) => DnsError::Refused(self.server, rcode_name(rcode)),
        }
    }
}

/// `address[:port]` (`[v6]:port` for IPv6 with a port); port 53 when left out. A name is
/// refused: the server that resolves names cannot itself be looked up.
pub fn parse_server(value: &str) -> Result<SocketAddr, String> {
    let value = value.trim();
    if let Ok(address) = value.parse::<SocketAddr>() {
        return Ok(address);
    }
    let bare = value.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 53))
        .map_err(|_| format!("{value:?} is not an IP address with an optional port, e.g. 10.0.0.10:53"))
}

/// The first `nameserver` line of a `resolv.conf` that names an address.
fn first_nameserver(resolv: &str) -> Option<SocketAddr> {
    resolv
        .lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("nameserver")).then(|| words.next()).flatten()?.parse::<IpAddr>().ok()
        })
        .map(|ip| SocketAddr::new(ip, 53))
}

/// What a query asked, to recognise its answer.
struct Question<'a> {
    id: u16,
    name: &'a str,
    qtype: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Data {
    Txt(String),
    Address(IpAddr),
}

#[derive(Debug)]
struct Answer {
    truncated: bool,
    records: Vec<Data>,
}

#[derive(Debug, PartialEq, Eq)]
enum Failure {
    Malformed(&'static str),
    Rcode(u8),
}

fn rcode_name(rcode: u8) -> &'static str {
    match rcode {
        1 => "FORMERR (it could not read the query)",
        2 => "SERVFAIL (it could not resolve the name)",
        4 => "NOTIMP",
        5 => "REFUSED",
        _ => "an unknown error code",
    }
}

fn encode_query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, DnsError> {
    let mut message = Vec::with_capacity(32 + name.len());
    message.extend_from_slice(&id.to_be_bytes());
    // A standard query that asks for recursion.
    message.extend_from_slice(&0x0100u16.to_be_bytes());
    // One question, no answers nor authorities, one additional record (EDNS's OPT).
    for count in [1u16, 0, 0, 1] {
        message.extend_from_slice(&count.to_be_bytes());
    }
    encode_name(&mut message, name)?;
    message.extend_from_slice(&qtype.to_be_bytes());
    message.extend_from_slice(&CLASS_IN.to_be_bytes());
    // OPT (RFC 6891): the root name, its class the payload size, no flags, no options.
    message.push(0);
    message.extend_from_slice(&TYPE_OPT.to_be_bytes());
    message.extend_from_slice(&UDP_PAYLOAD.to_be_bytes());
    message.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    Ok(message)
}

/// Labels of letters, digits, `-` and `_` (as in `_switchboard-verification`), 1 to 63 bytes
/// each, 255 at most in all: internationalised names are looked up in their ASCII form.
fn encode_name(message: &mut Vec<u8>, name: &str) -> Result<(), DnsError> {
    let invalid = || DnsError::InvalidName(name.to_owned());
    if name.is_empty() || name.len() > 253 {
        return Err(invalid());
    }
    for label in name.split('.') {
        let valid = (1..=63).contains(&label.len())
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(invalid());
        }
        message.push(u8::try_from(label.len()).map_err(|_| invalid())?);
        message.extend_from_slice(label.as_bytes());
    }
    message.push(0);
    Ok(())
}

/// Whether `message` is an answer (not a query) with this id.
fn answers(message: &[u8], id: u16) -> bool {
    message.len() >= 12 && message[..2] == id.to_be_bytes() && message[2] & 0x80 != 0
}

/// Reads a message front to back, every read checked against its end.
struct Reader<'a> {
    message: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, count: usize) -> Result<&'a [u8], Failure> {
        let end = self.at.checked_add(count).ok_or(Failure::Malformed("a length overflows"))?;
        let bytes = self.message.get(self.at..end).ok_or(Failure::Malformed("a record runs past the end"))?;
        self.at = end;
        Ok(bytes)
    }

    fn u16(&mut self) -> Result<u16, Failure> {
        let bytes = self.bytes(2)?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn u32(&mut self) -> Result<u32, Failure> {
        let bytes = self.bytes(4)?;
        Ok(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn name(&mut self) -> Result<String, Failure> {
        let (name, next) = read_name(self.message, self.at)?;
        self.at = next;
        Ok(name)
    }
}

/// The name at `at`, lower-case with dots, and where the bytes after it begin.
fn read_name(message: &[u8], mut at: usize) -> Result<(String, usize), Failure> {
    let mut name = String::new();
    let mut after = None;
    let mut pointers = 0;
    loop {
        let length = *message.get(at).ok_or(Failure::Malformed("a name runs past the end"))?;
        match length & 0xC0 {
            0x00 if length == 0 => return Ok((name, after.unwrap_or(at + 1))),
            0x00 => {
                let start = at + 1;
                let label = message
                    .get(start..start + usize::from(length))
                    .ok_or(Failure::Malformed("a name runs past the end"))?;
                if !name.is_empty() {
                    name.push('.');
                }
                name.extend(label.iter().map(|&b| char::from(b.to_ascii_lowercase())));
                if name.len() > 255 {
                    return Err(Failure::Malformed("a name is longer than 255 bytes"));
                }
                at = start + usize::from(length);
            }
            0xC0 => {
                let low = *message.get(at + 1).ok_or(Failure::Malformed("a name runs past the end"))?;
                after.get_or_insert(at + 2);
                pointers += 1;
                if pointers > MAX_POINTERS {
                    return Err(Failure::Malformed("a name's compression pointers loop"));
                }
                at = (usize::from(length & 0x3F) << 8) | usize::from(low);
            }
            _ => return Err(Failure::Malformed("a name has a label type of no known meaning")),
        }
    }
}

/// The records of an answer (whose id was checked) that answer the question: those of the
/// name asked, or of the name its CNAMEs lead to.
fn parse_answer(message: &[u8], asked: &Question<'_>) -> Result<Answer, Failure> {
    let mut reader = Reader { message, at: 0 };
    let _id = reader.u16()?;
    let flags = reader.u16()?;
    let (questions, answers) = (reader.u16()?, reader.u16()?);
    let _authorities_and_additional = reader.bytes(4)?;
    let truncated = flags & 0x0200 != 0;
    let rcode = u8::try_from(flags & 0x000F).unwrap_or(0);
    if questions != 1 {
        return Err(Failure::Malformed("the answer does not repeat the one question"));
    }
    let name = reader.name()?;
    let (qtype, qclass) = (reader.u16()?, reader.u16()?);
    if !name.eq_ignore_ascii_case(asked.name) || qtype != asked.qtype || qclass != CLASS_IN {
        return Err(Failure::Malformed("the answer is to another question"));
    }
    match rcode {
        0 => {}
        // NXDOMAIN: no such name, so no records.
        3 => return Ok(Answer { truncated, records: Vec::new() }),
        other => return Err(Failure::Rcode(other)),
    }
    if truncated {
        return Ok(Answer { truncated, records: Vec::new() });
    }
    let mut found: Vec<(String, Data)> = Vec::new();
    let mut aliases: Vec<(String, String)> = Vec::new();
    for _ in 0..answers {
        let owner = reader.name()?;
        let (rtype, class, _ttl, length) = (reader.u16()?, reader.u16()?, reader.u32()?, reader.u16()?);
        let start = reader.at;
        let data = reader.bytes(usize::from(length))?;
        if class != CLASS_IN {
            continue;
        }
        match rtype {
            TYPE_TXT => found.push((owner, Data::Txt(txt_text(data)?))),
            TYPE_A => {
                let octets: [u8; 4] = data.try_into().map_err(|_| Failure::Malformed("an A record is not 4 bytes"))?;
                found.push((owner, Data::Address(IpAddr::from(octets))));
            }
            TYPE_AAAA => {
                let octets: [u8; 16] =
                    data.try_into().map_err(|_| Failure::Malformed("an AAAA record is not 16 bytes"))?;
                found.push((owner, Data::Address(IpAddr::from(octets))));
            }
            TYPE_CNAME => {
                let (target, end) = read_name(message, start)?;
                if end != start + usize::from(length) {
                    return Err(Failure::Malformed("a CNAME's name does not fill its record"));
                }
                aliases.push((owner, target));
            }
            _ => {}
        }
    }
    let wanted: fn(&Data) -> bool = match asked.qtype {
        TYPE_TXT => |data: &Data| matches!(data, Data::Txt(_)),
        _ => |data: &Data| matches!(data, Data::Address(_)),
    };
    let mut current = asked.name.to_ascii_lowercase();
    for _ in 0..=MAX_CNAMES {
        let records: Vec<Data> = found
            .iter()
            .filter(|(owner, data)| *owner == current && wanted(data))
            .map(|(_, data)| data.clone())
            .collect();
        if !records.is_empty() {
            return Ok(Answer { truncated, records });
        }
        match aliases.iter().find(|(owner, _)| *owner == current) {
            Some((_, target)) => current = target.clone(),
            None => break,
        }
    }
    Ok(Answer { truncated, records: Vec::new() })
}

/// A TXT record's character strings, joined.
fn txt_text(data: &[u8]) -> Result<String, Failure> {
    let mut reader = Reader { message: data, at: 0 };
    let mut text = Vec::with_capacity(data.len());
    while reader.at < data.len() {
        let length = reader.bytes(1)?[0];
        text.extend_from_slice(reader.bytes(usize::from(length))?);
    }
    Ok(String::from_utf8_lossy(&text).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer message as a server would send it, built by hand.
    struct Built(Vec<u8>);

    impl Built {
        fn new(id: u16, flags: u16, name: &str, qtype: u16, answers: u16) -> Self {
            let mut message = Vec::new();
            message.extend_from_slice(&id.to_be_bytes());
            message.extend_from_slice(&flags.to_be_bytes());
            for count in [1, answers, 0, 0] {
                message.extend_from_slice(&count.to_be_bytes());
            }
            encode_name(&mut message, name).unwrap();
            message.extend_from_slice(&qtype.to_be_bytes());
            message.extend_from_slice(&CLASS_IN.to_be_bytes());
            Built(message)
        }

        /// A record whose owner is a pointer to the question's name (offset 12).
        fn record(mut self, rtype: u16, data: &[u8]) -> Self {
            self.0.extend_from_slice(&[0xC0, 12]);
            self.raw_record(rtype, data)
        }

        /// A record whose owner is written out.
        fn named_record(mut self, owner: &str, rtype: u16, data: &[u8]) -> Self {
            encode_name(&mut self.0, owner).unwrap();
            self.raw_record(rtype, data)
        }

        fn raw_record(mut self, rtype: u16, data: &[u8]) -> Self {
            self.0.extend_from_slice(&rtype.to_be_bytes());
            self.0.extend_from_slice(&CLASS_IN.to_be_bytes());
            self.0.extend_from_slice(&300u32.to_be_bytes());
            self.0.extend_from_slice(&u16::try_from(data.len()).unwrap().to_be_bytes());
            self.0.extend_from_slice(data);
            self
        }
    }

    const ANSWER: u16 = 0x8180;

    fn question(name: &str, qtype: u16) -> Question<'_> {
        Question { id: 7, name, qtype }
    }

    fn strings(parts: &[&[u8]]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|part| std::iter::once(u8::try_from(part.len()).unwrap()).chain(part.iter().copied()))
            .collect()
    }

    #[test]
    fn a_query_is_encoded_as_rfc_1035_says_with_an_edns_opt_record() {
        let query = encode_query(0xBEEF, "_v.Acme.example", TYPE_TXT).unwrap();
        let expected: Vec<u8> = [
            &[0xBE, 0xEF, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1][..],
            b"\x02_v\x04Acme\x07example\x00",
            &[0, 16, 0, 1],
            &[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0],
        ]
        .concat();
        assert_eq!(query, expected);
        for bad in ["", "a..b", "has space.example", "é.example", &format!("{}.example", "a".repeat(64))] {
            assert!(matches!(encode_query(1, bad, TYPE_A), Err(DnsError::InvalidName(_))), "{bad:?}");
        }
    }

    #[test]
    fn txt_records_join_their_strings_and_keep_their_order() {
        let message = Built::new(7, ANSWER, "_v.acme.example", TYPE_TXT, 2)
            .record(TYPE_TXT, &strings(&[b"switchboard-", b"verification=abc"]))
            .record(TYPE_TXT, &strings(&[b"v=spf1 -all"]))
            .0;
        let answer = parse_answer(&message, &question("_v.ACME.example", TYPE_TXT)).unwrap();
        assert_eq!(answer.records, [Data::Txt("switchboard-verification=abc".into()), Data::Txt("v=spf1 -all".into())]);
    }

    #[test]
    fn addresses_follow_cnames_and_ignore_records_of_other_names() {
        let mut target = Vec::new();
        encode_name(&mut target, "www.acme.example").unwrap();
        let message = Built::new(7, ANSWER, "acme.example", TYPE_A, 3)
            .record(TYPE_CNAME, &target)
            .named_record("evil.example", TYPE_A, &[10, 0, 0, 1])
            .named_record("www.acme.example", TYPE_A, &[93, 184, 216, 34])
            .0;
        let answer = parse_answer(&message, &question("acme.example", TYPE_A)).unwrap();
        assert_eq!(answer.records, [Data::Address("93.184.216.34".parse().unwrap())]);
        // The TXT records of an alias's target are not an address.
        let txt = Built::new(7, ANSWER, "acme.example", TYPE_A, 1).record(TYPE_TXT, &strings(&[b"x"])).0;
        assert!(parse_answer(&txt, &question("acme.example", TYPE_A)).unwrap().records.is_empty());
    }

    #[test]
    fn no_such_name_is_no_records_and_other_codes_are_errors() {
        let nxdomain = Built::new(7, ANSWER | 3, "gone.example", TYPE_TXT, 0).0;
        assert!(parse_answer(&nxdomain, &question("gone.example", TYPE_TXT)).unwrap().records.is_empty());
        let refused = Built::new(7, ANSWER | 5, "gone.example", TYPE_TXT, 0).0;
        assert_eq!(parse_answer(&refused, &question("gone.example", TYPE_TXT)).unwrap_err(), Failure::Rcode(5));
        let other_question = Built::new(7, ANSWER, "other.example", TYPE_TXT, 0).0;
        assert!(matches!(
            parse_answer(&other_question, &question("gone.example", TYPE_TXT)),
            Err(Failure::Malformed(_))
        ));
        let truncated = Built::new(7, ANSWER | 0x0200, "big.example", TYPE_TXT, 0).0;
        assert!(parse_answer(&truncated, &question("big.example", TYPE_TXT)).unwrap().truncated);
    }

    #[test]
    fn malformed_answers_are_errors_never_panics() {
        let good = Built::new(7, ANSWER, "acme.example", TYPE_A, 1).record(TYPE_A, &[1, 2, 3, 4]).0;
        // Every prefix of a good answer is refused or read without a panic.
        for end in 0..good.len() {
            let _ = parse_answer(&good[..end], &question("acme.example", TYPE_A));
        }
        assert!(parse_answer(&good, &question("acme.example", TYPE_A)).is_ok());
        // A record's length past the end, an A record of 3 bytes, a pointer loop.
        let mut long = good.clone();
        let at = long.len() - 6;
        long[at..at + 2].copy_from_slice(&200u16.to_be_bytes());
        assert!(parse_answer(&long, &question("acme.example", TYPE_A)).is_err());
        let short = Built::new(7, ANSWER, "acme.example", TYPE_A, 1).record(TYPE_A, &[1, 2, 3]).0;
        assert!(parse_answer(&short, &question("acme.example", TYPE_A)).is_err());
        let mut looping = Built::new(7, ANSWER, "acme.example", TYPE_A, 1).0;
        let at = looping.len();
        looping.extend_from_slice(&[0xC0, u8::try_from(at).unwrap()]);
        let looping = Built(looping).raw_record(TYPE_A, &[1, 2, 3, 4]).0;
        assert!(matches!(parse_answer(&looping, &question("acme.example", TYPE_A)), Err(Failure::Malformed(_))));
        // Random bytes.
        let mut seed = 0x9E37_79B9u32;
        for _ in 0..2000 {
            let mut noise = good.clone();
            for byte in noise.iter_mut().skip(12) {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                if seed.is_multiple_of(7) {
                    *byte = u8::try_from(seed % 256).unwrap();
                }
            }
            let _ = parse_answer(&noise, &question("acme.example", TYPE_A));
        }
    }

    #[test]
    fn servers_are_addresses_with_port_53_by_default() {
        assert_eq!(parse_server("10.0.0.10").unwrap(), "10.0.0.10:53".parse().unwrap());
        assert_eq!(parse_server(" 127.0.0.1:5353 ").unwrap(), "127.0.0.1:5353".parse().unwrap());
        assert_eq!(parse_server("[::1]:53").unwrap(), "[::1]:53".parse().unwrap());
        assert_eq!(parse_server("::1").unwrap(), "[::1]:53".parse().unwrap());
        assert!(parse_server("dns.example:53").is_err());
        let resolv =
            "# generated\nsearch example\nnameserver fe80::1%eth0\nnameserver 10.255.255.53\nnameserver 8.8.8.8\n";
        assert_eq!(first_nameserver(resolv), Some("10.255.255.53:53".parse().unwrap()));
        assert_eq!(first_nameserver("options ndots:5\n"), None);
    }

    /// A server of the test's own on one port, UDP and TCP: over UDP it first sends an answer
    /// to another id (which must be ignored), then a truncated answer; over TCP the whole one.
    #[tokio::test]
    async fn a_truncated_answer_is_asked_again_over_tcp() {
        // The port the system gives the UDP socket may be held for TCP by another process: take
        // another one then, a bounded number of times.
        let mut bound = None;
        for _ in 0..20 {
            let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let address = udp.local_addr().unwrap();
            if let Ok(tcp) = tokio::net::TcpListener::bind(address).await {
                bound = Some((udp, address, tcp));
                break;
            }
        }
        let (udp, address, tcp) = bound.expect("no port free for both UDP and TCP in 20 tries");
        let long = "x".repeat(250);
        let record = strings(&[long.as_bytes(); 8]);
        let full = move |id: u16| Built::new(id, ANSWER, "big.example", TYPE_TXT, 1).record(TYPE_TXT, &record).0;
        let full_tcp = full.clone();
        let udp_task = tokio::spawn(async move {
            let mut buffer = [0u8; 512];
            let (_, peer) = udp.recv_from(&mut buffer).await.unwrap();
            let id = u16::from_be_bytes([buffer[0], buffer[1]]);
            let stale = Built::new(id.wrapping_add(1), ANSWER, "big.example", TYPE_TXT, 0).0;
            udp.send_to(&stale, peer).await.unwrap();
            let truncated = Built::new(id, ANSWER | 0x0200, "big.example", TYPE_TXT, 0).0;
            udp.send_to(&truncated, peer).await.unwrap();
        });
        let tcp_task = tokio::spawn(async move {
            let (mut stream, _) = tcp.accept().await.unwrap();
            let mut length = [0u8; 2];
            stream.read_exact(&mut length).await.unwrap();
            let mut query = vec![0u8; usize::from(u16::from_be_bytes(length))];
            stream.read_exact(&mut query).await.unwrap();
            let answer = full_tcp(u16::from_be_bytes([query[0], query[1]]));
            let mut framed = u16::try_from(answer.len()).unwrap().to_be_bytes().to_vec();
            framed.extend_from_slice(&answer);
            stream.write_all(&framed).await.unwrap();
        });
        let lookup = DnsLookup::new(address).with_timeout(Duration::from_secs(5));
        let texts = tokio::time::timeout(Duration::from_secs(10), lookup.txt("big.example"))
            .await
            .expect("the lookup ends within 10 s")
            .unwrap();
        assert_eq!(texts, [long.repeat(8)]);
        udp_task.await.unwrap();
        tcp_task.await.unwrap();
    }

    #[tokio::test]
    async fn a_silent_server_is_a_timeout() {
        let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let lookup = DnsLookup::new(silent.local_addr().unwrap()).with_timeout(Duration::from_millis(100));
        let started = std::time::Instant::now();
        let error = tokio::time::timeout(Duration::from_secs(5), lookup.txt("acme.example"))
            .await
            .expect("the lookup ends within 5 s")
            .unwrap_err();
        assert!(matches!(error, DnsError::Timeout(..)), "{error}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
