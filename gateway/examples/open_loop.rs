//! An open-loop load generator: GET requests at a fixed rate, each timed from the moment it was
//! due, not from when it could be sent, so that a server that stalls is charged for every request
//! that waited behind the stall (no coordinated omission, as wrk2 and oha's `-q` measure).
//!
//! `open_loop ADDR PATH RATE SECONDS CONNECTIONS [KEYS_FILE]`
//!
//! - ADDR: `127.0.0.1:8080` (loopback only: the bench runs on this machine).
//! - RATE: requests a second over all connections; each connection sends every
//!   `CONNECTIONS / RATE` seconds, the connections' schedules staggered evenly.
//! - KEYS_FILE: API keys one a line, sent as `X-API-Key`, cycled through request by request.
//!
//! Prints one line of JSON: requests due and answered, non-2xx, errors, the latency
//! percentiles in ms, and the rate achieved. Each connection is a thread with a blocking socket:
//! a sleep to the due time is accurate to tens of µs, where an async timer rounds to 1 ms.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

struct Options {
    addr: SocketAddr,
    path: String,
    rate: f64,
    seconds: f64,
    connections: usize,
    keys: Vec<String>,
}

#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    non_2xx: usize,
    errors: usize,
}

fn options() -> Result<Options, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        return Err("usage: open_loop ADDR PATH RATE SECONDS CONNECTIONS [KEYS_FILE]".to_owned());
    }
    let addr: SocketAddr = args[0].parse().map_err(|e| format!("ADDR {}: {e}", args[0]))?;
    if !addr.ip().is_loopback() {
        return Err(format!("ADDR {addr} is not a loopback address: this bench loads this machine only"));
    }
    let number = |i: usize, name: &str| args[i].parse::<f64>().map_err(|e| format!("{name} {}: {e}", args[i]));
    let keys = match args.get(5) {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {path}: {e}"))?
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .map(str::to_owned)
            .collect(),
        None => Vec::new(),
    };
    let options = Options {
        addr,
        path: args[1].clone(),
        rate: number(2, "RATE")?,
        seconds: number(3, "SECONDS")?,
        connections: args[4].parse().map_err(|e| format!("CONNECTIONS {}: {e}", args[4]))?,
        keys,
    };
    if !(options.rate > 0.0 && options.seconds > 0.0 && options.seconds <= 600.0 && options.connections > 0) {
        return Err("RATE and CONNECTIONS must be positive, SECONDS within (0, 600]".to_owned());
    }
    Ok(options)
}

/// Reads one HTTP/1.1 answer with a Content-Length; returns its status.
fn read_answer(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> std::io::Result<u16> {
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    buffer.clear();
    let mut chunk = [0_u8; 16 * 1024];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(invalid("the connection closed mid-answer"));
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buffer[..head_end]).map_err(|_| invalid("a head that is not UTF-8"))?;
    let status = head.get(9..12).and_then(|code| code.parse().ok()).ok_or_else(|| invalid("no status"))?;
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
        })
        .ok_or_else(|| invalid("no Content-Length"))?;
    while buffer.len() < head_end + length {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(invalid("the connection closed mid-body"));
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    Ok(status)
}

/// One connection's share: request `i` is due at `start + (i · connections + index) / rate`.
fn connection(options: &Options, index: usize, start: Instant) -> Tally {
    let mut tally = Tally::default();
    let interval = options.connections as f64 / options.rate;
    let offset = index as f64 / options.rate;
    let total = ((options.seconds - offset) / interval).ceil().max(0.0) as usize;
    let mut stream: Option<TcpStream> = None;
    let mut buffer = Vec::with_capacity(4096);
    for i in 0..total {
        let due = start + Duration::from_secs_f64(offset + i as f64 * interval);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let key = if options.keys.is_empty() {
            String::new()
        } else {
            format!("X-API-Key: {}\r\n", options.keys[(i * options.connections + index) % options.keys.len()])
        };
        let request = format!("GET {} HTTP/1.1\r\nHost: {}\r\n{key}\r\n", options.path, options.addr);
        let answer = (|| -> std::io::Result<u16> {
            if stream.is_none() {
                let fresh = TcpStream::connect_timeout(&options.addr, Duration::from_secs(5))?;
                fresh.set_nodelay(true)?;
                fresh.set_read_timeout(Some(Duration::from_secs(10)))?;
                stream = Some(fresh);
            }
            let open = stream.as_mut().ok_or_else(|| std::io::Error::other("not connected"))?;
            open.write_all(request.as_bytes())?;
            read_answer(open, &mut buffer)
        })();
        match answer {
            Ok(status) => {
                tally.latencies.push(due.elapsed());
                if !(200..300).contains(&status) {
                    tally.non_2xx += 1;
                }
            }
            Err(_) => {
                tally.errors += 1;
                stream = None;
            }
        }
    }
    tally
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

fn main() {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let start = Instant::now() + Duration::from_millis(200);
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let options = &options;
        let threads: Vec<_> =
            (0..options.connections).map(|index| scope.spawn(move || connection(options, index, start))).collect();
        threads.into_iter().map(|thread| thread.join().unwrap_or_default()).collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mut latencies: Vec<Duration> = tallies.iter().flat_map(|t| t.latencies.iter().copied()).collect();
    latencies.sort_unstable();
    let (non_2xx, errors): (usize, usize) =
        tallies.iter().map(|t| (t.non_2xx, t.errors)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    println!(
        "{{\"rate\": {}, \"answered\": {}, \"non_2xx\": {non_2xx}, \"errors\": {errors}, \"achieved_rate\": {:.0}, \
         \"p50_ms\": {:.3}, \"p90_ms\": {:.3}, \"p99_ms\": {:.3}, \"p999_ms\": {:.3}, \"max_ms\": {:.3}}}",
        options.rate,
        latencies.len(),
        latencies.len() as f64 / elapsed,
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.90),
        percentile(&latencies, 0.99),
        percentile(&latencies, 0.999),
        percentile(&latencies, 1.0),
    );
}
