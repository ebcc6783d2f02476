//! `dns_lookup` against a real DNS server of the test's own (Debian's dnsmasq, on loopback and
//! a free port, alive at most 120 s): TXT records, one too large for UDP (answered truncated,
//! then asked again over TCP), addresses, a name that does not exist and a server that refuses.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use switchboard_kit::dns_lookup::{DnsError, DnsLookup};

/// dnsmasq, stopped (its whole process group) when dropped.
struct Server {
    child: std::process::Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let asked = Instant::now();
        while asked.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    }
}

fn free_port() -> u16 {
    for _ in 0..100 {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("a TCP port");
        let port = tcp.local_addr().expect("its address").port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for both UDP and TCP")
}

fn dnsmasq(port: u16, args: &[String]) -> Server {
    let binary = ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"]
        .into_iter()
        .find(|path| std::path::Path::new(path).exists())
        .expect("dnsmasq is not installed; the test command installs it (apt-get install dnsmasq-base)");
    let child = Command::new("timeout")
        .args(["120", binary])
        .args([
            "--keep-in-foreground",
            "--listen-address=127.0.0.1",
            "--bind-interfaces",
            "--no-resolv",
            "--no-hosts",
            "--conf-file=/dev/null",
            "--pid-file=",
        ])
        .arg(format!("--port={port}"))
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("timeout runs dnsmasq");
    let mut server = Server { child };
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(server.child.try_wait().ok().flatten().is_none(), "dnsmasq exited before it listened");
        assert!(started.elapsed() < Duration::from_secs(10), "dnsmasq did not listen on port {port} within 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

#[tokio::test]
async fn records_are_read_from_a_real_server_over_udp_and_tcp() {
    let port = free_port();
    let big: Vec<String> = (0..8).map(|i| format!("{i}").repeat(250)).collect();
    let _server = dnsmasq(
        port,
        &[
            "--local=/example/".to_owned(),
            "--txt-record=_switchboard-verification.acme.example,switchboard-verification=abc".to_owned(),
            "--txt-record=_switchboard-verification.acme.example,v=spf1 -all".to_owned(),
            format!("--txt-record=big.example,{}", big.join(",")),
            "--host-record=acme.example,10.1.2.3,fd00::7".to_owned(),
            "--cname=www.acme.example,acme.example".to_owned(),
        ],
    );
    let lookup = DnsLookup::new(format!("127.0.0.1:{port}").parse().unwrap()).with_timeout(Duration::from_secs(3));
    let wait = Duration::from_secs(20);

    let mut texts = tokio::time::timeout(wait, lookup.txt("_switchboard-verification.ACME.example."))
        .await
        .expect("the TXT lookup ends within 20 s")
        .unwrap();
    texts.sort();
    assert_eq!(texts, ["switchboard-verification=abc", "v=spf1 -all"]);

    // 2,000 bytes of text: more than the 1,232 offered over UDP.
    let large = tokio::time::timeout(wait, lookup.txt("big.example")).await.expect("the large lookup ends within 20 s");
    assert_eq!(large.unwrap(), [big.concat()]);

    let mut addresses = tokio::time::timeout(wait, lookup.addresses("www.acme.example"))
        .await
        .expect("the address lookup ends within 20 s")
        .unwrap();
    addresses.sort();
    assert_eq!(addresses, ["10.1.2.3".parse::<std::net::IpAddr>().unwrap(), "fd00::7".parse().unwrap()]);

    let none = tokio::time::timeout(wait, lookup.txt("nothing.acme.example")).await.expect("NXDOMAIN ends within 20 s");
    assert!(none.unwrap().is_empty());
    // Outside its own names it has no server to ask: REFUSED, an error rather than "no record".
    let refused = tokio::time::timeout(wait, lookup.txt("acme.test")).await.expect("REFUSED ends within 20 s");
    assert!(matches!(refused, Err(DnsError::Refused(..))), "{refused:?}");
}
