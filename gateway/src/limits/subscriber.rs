//! A Redis `SUBSCRIBE` connection whose messages are read by whoever asks, without waiting.
//!
//! A client library's subscriber reads messages in a task of its own, and a request that runs
//! before that task is scheduled misses a message that is already on its way: on a loaded
//! machine, often (measured: 2 stale reads in 20 changes with both cores busy). tokio's own
//! `try_read` has the same lag: it answers from the readiness the runtime's reactor last saw,
//! without asking the socket. Here a request reads the socket itself with a non-blocking
//! `recv` ([`Subscriber::read`]), so a message Redis wrote before the request arrived is
//! always seen. A task also reads every few milliseconds, so that messages do not pile up and
//! a closed connection is noticed when no request comes.
//!
//! Only what a subscription needs of the protocol: `AUTH`, `SUBSCRIBE`, and RESP2 push arrays
//! of bulk strings and integers.

use std::io::Read;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use redis::{ConnectionAddr, IntoConnectionInfo};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// A message on the channel, or the end of the connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    Message(Vec<u8>),
    Closed,
}

pub struct Subscriber {
    /// Non-blocking, read with plain `recv`.
    stream: std::net::TcpStream,
    /// Bytes read but not yet a whole frame.
    pending: Vec<u8>,
    /// What `recv` reads into, kept: every request reads, nearly always nothing, and zeroing
    /// a fresh buffer each time cost more than the read.
    chunk: Box<[u8]>,
}

impl Subscriber {
    /// Connects, authenticates when the URL has a password, and subscribes to `channel`.
    pub async fn connect(url: &str, channel: &str, timeout: Duration) -> anyhow::Result<Self> {
        let info = url.into_connection_info().context("parsing REDIS_URL")?;
        let ConnectionAddr::Tcp(host, port) = info.addr() else {
            bail!("team versions are only followed over plain TCP (redis://)");
        };
        let settings = info.redis_settings();
        let connect = async {
            let mut stream = TcpStream::connect((host.as_str(), *port)).await?;
            stream.set_nodelay(true)?;
            let mut pending = Vec::new();
            if let Some(password) = settings.password() {
                let mut auth = vec!["AUTH".as_bytes()];
                if let Some(username) = settings.username() {
                    auth.push(username.as_bytes());
                }
                auth.push(password.as_bytes());
                stream.write_all(&command(&auth)).await?;
                match next_frame(&stream, &mut pending).await? {
                    Frame::Status(_) => {}
                    other => bail!("AUTH answered {other:?}"),
                }
            }
            stream.write_all(&command(&[b"SUBSCRIBE", channel.as_bytes()])).await?;
            match next_frame(&stream, &mut pending).await? {
                Frame::Array(items) if items.first().is_some_and(|kind| kind.as_bytes() == Some(b"subscribe")) => {}
                other => bail!("SUBSCRIBE answered {other:?}"),
            }
            // Still non-blocking once out of tokio's hands.
            Ok(Self { stream: stream.into_std()?, pending, chunk: vec![0; 8192].into_boxed_slice() })
        };
        tokio::time::timeout(timeout, connect).await.map_err(|_| anyhow!("no subscription within {timeout:?}"))?
    }

    /// Takes every whole message already received, without waiting.
    pub fn read(&mut self) -> Vec<Event> {
        let mut closed = false;
        loop {
            match (&self.stream).read(&mut self.chunk) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(read) => self.pending.extend_from_slice(&self.chunk[..read]),
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        let mut events = Vec::new();
        let mut used = 0;
        loop {
            match parse(&self.pending[used..]) {
                Ok(Some((frame, length))) => {
                    used += length;
                    if let Some(payload) = message(frame) {
                        events.push(Event::Message(payload));
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        self.pending.drain(..used);
        if closed {
            events.push(Event::Closed);
        }
        events
    }
}

/// The next frame, waiting for it (used while connecting).
async fn next_frame(stream: &TcpStream, pending: &mut Vec<u8>) -> anyhow::Result<Frame> {
    loop {
        if let Some((frame, length)) = parse(pending)? {
            pending.drain(..length);
            return Ok(frame);
        }
        stream.readable().await?;
        let mut chunk = [0_u8; 1024];
        match stream.try_read(&mut chunk) {
            Ok(0) => bail!("Redis closed the connection"),
            Ok(read) => pending.extend_from_slice(&chunk[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error.into()),
        }
    }
}

/// A command as a RESP array of bulk strings.
fn command(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        out.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[derive(Debug, PartialEq, Eq)]
enum Frame {
    Status(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Frame>),
}

impl Frame {
    fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Frame::Bulk(Some(bytes)) => Some(bytes),
            _ => None,
        }
    }
}

/// The payload of a `message` push.
fn message(frame: Frame) -> Option<Vec<u8>> {
    let Frame::Array(mut items) = frame else { return None };
    if items.len() != 3 || items[0].as_bytes() != Some(b"message") {
        return None;
    }
    match items.pop() {
        Some(Frame::Bulk(Some(payload))) => Some(payload),
        _ => None,
    }
}

#[derive(Debug)]
struct Malformed;

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a malformed reply from Redis")
    }
}

impl std::error::Error for Malformed {}

/// One frame from the start of `buffer` and its length, `None` while incomplete.
fn parse(buffer: &[u8]) -> Result<Option<(Frame, usize)>, Malformed> {
    let Some(end) = buffer.windows(2).position(|pair| pair == b"\r\n") else { return Ok(None) };
    if end == 0 {
        return Err(Malformed);
    }
    let (kind, line) = (buffer[0], &buffer[1..end]);
    let after_line = end + 2;
    let number = || std::str::from_utf8(line).ok().and_then(|text| text.parse::<i64>().ok()).ok_or(Malformed);
    match kind {
        b'+' => Ok(Some((Frame::Status(line.to_vec()), after_line))),
        b'-' => Ok(Some((Frame::Error(line.to_vec()), after_line))),
        b':' => Ok(Some((Frame::Integer(number()?), after_line))),
        b'$' => {
            let length = number()?;
            if length < 0 {
                return Ok(Some((Frame::Bulk(None), after_line)));
            }
            let length = usize::try_from(length).map_err(|_| Malformed)?;
            let total = after_line + length + 2;
            if buffer.len() < total {
                return Ok(None);
            }
            if &buffer[after_line + length..total] != b"\r\n" {
                return Err(Malformed);
            }
            Ok(Some((Frame::Bulk(Some(buffer[after_line..after_line + length].to_vec())), total)))
        }
        b'*' => {
            let count = usize::try_from(number()?).unwrap_or(0);
            let mut items = Vec::with_capacity(count.min(16));
            let mut at = after_line;
            for _ in 0..count {
                let Some((item, length)) = parse(&buffer[at..])? else { return Ok(None) };
                items.push(item);
                at += length;
            }
            Ok(Some((Frame::Array(items), at)))
        }
        _ => Err(Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(channel: &str, payload: &str) -> Vec<u8> {
        command(&[b"message", channel.as_bytes(), payload.as_bytes()])
    }

    #[test]
    fn a_message_is_parsed_only_when_whole() {
        let bytes = push("switchboard:team-versions", "team_1 42");
        for cut in 0..bytes.len() {
            assert_eq!(parse(&bytes[..cut]).unwrap(), None, "cut at {cut}");
        }
        let (frame, length) = parse(&bytes).unwrap().unwrap();
        assert_eq!(length, bytes.len());
        assert_eq!(message(frame), Some(b"team_1 42".to_vec()));
    }

    #[test]
    fn confirmations_and_other_frames_are_not_messages() {
        let confirmation = b"*3\r\n$9\r\nsubscribe\r\n$3\r\nabc\r\n:1\r\n";
        let (frame, length) = parse(confirmation).unwrap().unwrap();
        assert_eq!(length, confirmation.len());
        assert_eq!(message(frame), None);
        assert_eq!(parse(b"+OK\r\n").unwrap(), Some((Frame::Status(b"OK".to_vec()), 5)));
        assert_eq!(parse(b"$-1\r\n").unwrap(), Some((Frame::Bulk(None), 5)));
        assert!(parse(b"?what\r\n").is_err());
        assert!(parse(b"\r\n").is_err());
        assert!(parse(b"$3\r\nabcXY").is_err());
    }
}
