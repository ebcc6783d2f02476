//! A DNS server of the test's own: Debian's dnsmasq on 127.0.0.1 and a port of its own,
//! answering only the records a test gives it (TXT records, names' addresses) and NXDOMAIN for
//! any other name under `example`; it asks no other server. Its records are fixed when it
//! starts, so [`Dnsmasq::serve`] starts it again, on the same port, with new ones. It lives
//! at most [`LIFETIME`] (run under `timeout`), so a test killed half-way leaves none behind.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The longest a server runs, whatever happens to the test.
const LIFETIME: &str = "900";
const READY_WITHIN: Duration = Duration::from_secs(10);
const STOPPED_WITHIN: Duration = Duration::from_secs(5);

pub struct Dnsmasq {
    port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

fn binary() -> PathBuf {
    for candidate in ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq", "/sbin/dnsmasq"] {
        if Path::new(candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    panic!("dnsmasq is not installed; the test command installs it (apt-get install dnsmasq-base)")
}

/// A port free for both UDP and TCP on 127.0.0.1 a moment ago.
fn free_udp_and_tcp_port() -> u16 {
    for _ in 0..100 {
        let port = super::free_port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for both UDP and TCP on 127.0.0.1")
}

impl Dnsmasq {
    /// A port for the server; nothing answers there until [`Dnsmasq::serve`].
    pub fn reserve() -> Dnsmasq {
        Dnsmasq { port: free_udp_and_tcp_port(), child: None, dir: tempfile::tempdir().expect("tempdir") }
    }

    /// `127.0.0.1:<port>`, for `SWITCHBOARD_DNS_SERVER`.
    pub fn server(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// (Re)starts the server with these TXT records (name, value) and addresses (name, IP),
    /// and waits until it listens.
    pub async fn serve(&mut self, txt: &[(String, String)], hosts: &[(&str, &str)]) {
        self.stop();
        let log = self.dir.path().join("dnsmasq.log");
        let mut command = Command::new("timeout");
        command
            .arg(LIFETIME)
            .arg(binary())
            .args([
                "--keep-in-foreground",
                "--listen-address=127.0.0.1",
                "--bind-interfaces",
                "--no-resolv",
                "--no-hosts",
                "--conf-file=/dev/null",
                "--pid-file=",
                "--local=/example/",
                "--log-facility=-",
            ])
            .arg(format!("--port={}", self.port));
        for (name, value) in txt {
            command.arg(format!("--txt-record={name},{value}"));
        }
        for (name, ip) in hosts {
            command.arg(format!("--host-record={name},{ip}"));
        }
        let log_file = std::fs::File::create(&log).expect("dnsmasq's log file");
        // A group of its own (`timeout` and dnsmasq), which a stuck stop kills whole.
        let mut child = command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("timeout runs dnsmasq");
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("dnsmasq exited ({status}) before it listened on port {}: {said}", self.port);
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                break;
            }
            assert!(
                started.elapsed() < READY_WITHIN,
                "dnsmasq did not listen on 127.0.0.1:{} within {READY_WITHIN:?}: {}",
                self.port,
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.child = Some(child);
    }

    /// Ends the server (SIGTERM to `timeout`, which passes it on), its whole process group
    /// killed if it lingers.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let group = format!("-{}", child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let asked = Instant::now();
        while asked.elapsed() < STOPPED_WITHIN {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("dnsmasq on port {} did not stop within {STOPPED_WITHIN:?} of SIGTERM: killed", self.port);
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = child.wait();
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        self.stop();
    }
}
