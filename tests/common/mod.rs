//! Starts the real platform for integration tests: the `switchboard` binary on ephemeral
//! ports with its own data directory, driven over HTTP like any client would.

#![allow(dead_code)]

mod contract;
pub mod dnsmasq;
pub mod multipart;
pub mod web;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub use contract::Contract;

pub const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

/// What `serve identity` seals TOTP secrets with in the tests (`SWITCHBOARD_ENCRYPTION_KEYS`).
pub const ENCRYPTION_KEYS: &str = "test:c3dpdGNoYm9hcmQtdGVzdHMtb25seS1rZXktMzJieSE=";

/// A running `switchboard dev` (or `serve`) process.
pub struct Process {
    pub child: Child,
    /// Lines the process printed on stdout before it was ready.
    pub banner: Vec<String>,
}

impl Process {
    /// Starts `switchboard <args>` and waits until it prints a line starting with `ready`.
    pub async fn start(args: &[&str], env: &[(&str, &str)], ready: &str) -> Process {
        let mut command = Command::new(BIN);
        command.args(args).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
        command.env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn,qdrant_edge::common=error".into()));
        // Only what a test asks for: CI exports these for other purposes.
        for inherited in [
            "REDIS_URL",
            "DATABASE_URL",
            "SWITCHBOARD_CONFIG",
            "SWITCHBOARD_DATA_DIR",
            "SWITCHBOARD_SERVICE_TOKEN",
            "SWITCHBOARD_TRUSTED_NETWORK",
            "SWITCHBOARD_ENCRYPTION_KEYS",
        ] {
            command.env_remove(inherited);
        }
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("spawn switchboard");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut banner = Vec::new();
        let wait = async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                let done = line.trim_start().starts_with(ready);
                banner.push(line);
                if done {
                    return;
                }
            }
            panic!("switchboard exited before printing {ready:?}: {banner:?}");
        };
        tokio::time::timeout(Duration::from_secs(60), wait).await.expect("switchboard did not start in time");
        // Keep draining stdout so that the process never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Process { child, banner }
    }

    pub fn line_after(&self, label: &str) -> Option<String> {
        self.banner.iter().find_map(|line| line.trim().strip_prefix(label).map(|rest| rest.trim().to_owned()))
    }

    /// Sends SIGTERM and returns the exit code.
    pub async fn terminate(mut self) -> Option<i32> {
        let pid = self.child.id().expect("pid");
        let status = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().expect("kill");
        assert!(status.success());
        let exit = tokio::time::timeout(Duration::from_secs(40), self.child.wait()).await.expect("exit in time");
        exit.expect("wait").code()
    }
}

/// `switchboard dev` with a fresh data directory, or (see [`Stack::crm_on_postgres`]) some
/// components as separate `serve` processes on PostgreSQL.
pub struct Stack {
    /// `dev`, or the gateway of separate processes.
    pub process: Process,
    pub base: String,
    pub identity_url: String,
    /// The service token `dev` generated (or was given) for its gRPC ports.
    pub service_token: String,
    pub demo_key: String,
    pub data_dir: tempfile::TempDir,
    /// Where `admin` finds the identity database.
    admin_location: Vec<String>,
    /// The stack's Redis, where `admin` announces the changes it makes to teams.
    admin_env: Vec<(String, String)>,
    /// The other processes and the databases they use, kept until the stack goes.
    others: Vec<Process>,
    databases: Vec<switchboard_kit::testdb::TestDatabase>,
    /// Where the `serve` processes are, when this is not `dev`.
    served: Option<Served>,
}

/// Component name to gRPC URL and to database URL, and what every process was given.
struct Served {
    grpc_urls: Vec<(String, String)>,
    database_urls: Vec<(String, String)>,
    shared_env: Vec<(String, String)>,
}

impl Stack {
    pub async fn start() -> Stack {
        Self::start_with(&[]).await
    }

    pub async fn start_with(env: &[(&str, &str)]) -> Stack {
        if let Some(stack) = Self::knowledge_on_qdrant(env).await {
            return stack;
        }
        let data_dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(data_dir, env).await
    }

    pub async fn start_in(data_dir: tempfile::TempDir, env: &[(&str, &str)]) -> Stack {
        let dir = data_dir.path().to_str().expect("utf-8 path").to_owned();
        let process = Process::start(&["dev", "--data-dir", &dir, "--listen", "127.0.0.1:0"], env, "Stop with").await;
        let base = process.line_after("API base URL:").expect("base URL line");
        let identity_url = process.line_after("identity gRPC:").expect("identity line");
        let demo_key = process.line_after("API key (shown once, keep it):").unwrap_or_default();
        let service_token = process.line_after("service token:").expect("service token line");
        let admin_location = vec!["--data-dir".to_owned(), dir];
        Stack {
            process,
            base,
            identity_url,
            service_token,
            demo_key,
            data_dir,
            admin_location,
            admin_env: redis_of(env),
            others: Vec::new(),
            databases: Vec::new(),
            served: None,
        }
    }

    /// Identity and the CRM as `serve` processes, each on a PostgreSQL database of its own,
    /// behind a gateway: the CRM's HTTP tests run here too. `None` without PostgreSQL.
    pub async fn crm_on_postgres() -> Option<Stack> {
        Self::serve_on_postgres(&["identity", "crm"], &[]).await
    }

    /// `components` as `serve` processes, each on a PostgreSQL database of its own, behind a
    /// `serve gateway`; `env` goes to every process. `None` without PostgreSQL.
    pub async fn serve_on_postgres(components: &[&str], env: &[(&str, &str)]) -> Option<Stack> {
        const TOKEN: &str = "serve-on-postgres-test-token";
        let mut databases = Vec::new();
        for _ in components {
            databases.push(switchboard_kit::testdb::postgres().await.expect("PostgreSQL")?);
        }
        let data_dir = tempfile::tempdir().expect("tempdir");
        let data = data_dir.path().to_str().expect("utf-8 path").to_owned();
        let ports: Vec<u16> = components.iter().map(|_| free_port()).collect();
        let urls: Vec<(String, String)> = components
            .iter()
            .zip(&ports)
            .map(|(component, port)| ((*component).to_owned(), format!("http://127.0.0.1:{port}")))
            .collect();
        let variables: Vec<(String, String)> = urls
            .iter()
            .map(|(component, url)| (format!("SWITCHBOARD_{}_URL", component.to_ascii_uppercase()), url.clone()))
            .collect();
        let mut shared: Vec<(&str, &str)> = variables.iter().map(|(name, url)| (name.as_str(), url.as_str())).collect();
        shared.push(("SWITCHBOARD_SERVICE_TOKEN", TOKEN));
        shared.push(("SWITCHBOARD_ENCRYPTION_KEYS", ENCRYPTION_KEYS));
        shared.extend_from_slice(env);
        let mut others = Vec::new();
        for ((component, database), port) in components.iter().zip(&databases).zip(&ports) {
            let listen = format!("127.0.0.1:{port}");
            let mut env = vec![
                ("DATABASE_URL", database.url.as_str()),
                ("SWITCHBOARD_GRPC_LISTEN", &listen),
                ("SWITCHBOARD_DATA_DIR", &data),
            ];
            env.extend_from_slice(&shared);
            others.push(Process::start(&["serve", component], &env, &format!("{component} gRPC listening on")).await);
        }
        let mut env = vec![("SWITCHBOARD_LISTEN", "127.0.0.1:0")];
        env.extend_from_slice(&shared);
        let process = Process::start(&["serve", "gateway"], &env, "gateway listening on").await;
        let base = process.line_after("gateway listening on").expect("gateway address");
        let database_urls = components
            .iter()
            .zip(&databases)
            .map(|(component, db)| ((*component).to_owned(), db.url.clone()))
            .collect();
        Some(Stack {
            process,
            base,
            identity_url: urls.iter().find(|(c, _)| c == "identity").map(|(_, url)| url.clone()).unwrap_or_default(),
            service_token: TOKEN.to_owned(),
            demo_key: String::new(),
            data_dir,
            admin_location: vec![
                "--database-url".to_owned(),
                databases[components.iter().position(|c| *c == "identity").expect("identity")].url.clone(),
            ],
            admin_env: redis_of(&shared),
            others,
            databases,
            served: Some(Served {
                grpc_urls: urls,
                database_urls,
                shared_env: shared.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect(),
            }),
        })
    }

    /// When the test run asks for it (`SWITCHBOARD_TEST_KNOWLEDGE_ON_QDRANT` = a Qdrant server's
    /// gRPC URL; scripts/test sets it for a second run of the knowledge tests): identity, agents
    /// and knowledgebase on PostgreSQL, the index in a collection of its own on that server.
    async fn knowledge_on_qdrant(env: &[(&str, &str)]) -> Option<Stack> {
        let qdrant = std::env::var("SWITCHBOARD_TEST_KNOWLEDGE_ON_QDRANT").ok().filter(|url| !url.is_empty())?;
        let collection = format!("switchboard_test_{}", uuid::Uuid::new_v4().simple());
        let mut env = env.to_vec();
        env.extend([("QDRANT_URL", qdrant.as_str()), ("QDRANT_COLLECTION", collection.as_str())]);
        let stack = Self::serve_on_postgres(&["identity", "agents", "knowledgebase"], &env).await;
        Some(stack.expect("SWITCHBOARD_TEST_KNOWLEDGE_ON_QDRANT needs PostgreSQL (TEST_DATABASE_URL)"))
    }

    /// Whether this is `switchboard dev` (one process, SQLite, the data directory its own).
    pub fn is_dev(&self) -> bool {
        self.served.is_none()
    }

    /// A service's gRPC URL.
    pub fn grpc_url(&self, component: &str) -> String {
        match &self.served {
            Some(served) => served.grpc_urls.iter().find(|(c, _)| c == component).map(|(_, url)| url.clone()),
            None => self.process.line_after(&format!("{component} gRPC:")),
        }
        .unwrap_or_else(|| panic!("no {component} in this stack"))
    }

    /// Stops a `serve` component, as an outage would; only for stacks of `serve` processes.
    pub async fn stop(&mut self, component: &str) {
        let served = self.served.as_ref().expect("stopping a component needs a stack of serve processes");
        let index = served.grpc_urls.iter().position(|(c, _)| c == component).expect("a component of the stack");
        // `others` holds the components in the order of `grpc_urls`, replicas after them.
        self.others.remove(index).terminate().await;
        if let Some(served) = self.served.as_mut() {
            served.grpc_urls.remove(index);
        }
    }

    /// Another `serve <component>` process on the same database and settings (a replica), and
    /// its gRPC URL. Only for stacks of `serve` processes.
    pub async fn start_replica(&self, component: &str) -> (Process, String) {
        self.start_replica_with(component, &[]).await
    }

    /// [`Stack::start_replica`] with `extra` settings added to the stack's.
    pub async fn start_replica_with(&self, component: &str, extra: &[(&str, &str)]) -> (Process, String) {
        let served = self.served.as_ref().expect("replicas need a stack of serve processes");
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let (database, data) = (self.database_url(component), self.data_path().to_str().expect("utf-8").to_owned());
        let mut env: Vec<(&str, &str)> =
            vec![("DATABASE_URL", &database), ("SWITCHBOARD_GRPC_LISTEN", &listen), ("SWITCHBOARD_DATA_DIR", &data)];
        env.extend(served.shared_env.iter().map(|(name, value)| (name.as_str(), value.as_str())));
        env.extend_from_slice(extra);
        let replica = Process::start(&["serve", component], &env, &format!("{component} gRPC listening on")).await;
        (replica, format!("http://127.0.0.1:{port}"))
    }

    /// Another gateway with this stack's settings, `overrides` replacing some (e.g. a service
    /// URL pointing at a replica), and its base URL. Only for stacks of `serve` processes.
    pub async fn start_gateway(&self, overrides: &[(&str, &str)]) -> (Process, String) {
        let served = self.served.as_ref().expect("a second gateway needs a stack of serve processes");
        let mut env: Vec<(&str, &str)> = vec![("SWITCHBOARD_LISTEN", "127.0.0.1:0")];
        env.extend(
            served
                .shared_env
                .iter()
                .filter(|(name, _)| overrides.iter().all(|(replaced, _)| replaced != name))
                .map(|(name, value)| (name.as_str(), value.as_str())),
        );
        env.extend_from_slice(overrides);
        let gateway = Process::start(&["serve", "gateway"], &env, "gateway listening on").await;
        let base = gateway.line_after("gateway listening on").expect("gateway address");
        (gateway, base)
    }

    /// A service's database URL (SQLite in the data directory under `dev`).
    pub fn database_url(&self, component: &str) -> String {
        match &self.served {
            Some(served) => served.database_urls.iter().find(|(c, _)| c == component).map(|(_, url)| url.clone()),
            None => Some(format!("sqlite://{}", self.data_path().join(format!("{component}.db")).display())),
        }
        .unwrap_or_else(|| panic!("no {component} in this stack"))
    }

    pub fn data_path(&self) -> &Path {
        self.data_dir.path()
    }

    /// `switchboard admin <this stack's identity database> <args>`, parsed JSON output.
    pub async fn admin(&self, args: &[&str]) -> Value {
        let location: Vec<&str> = self.admin_location.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> =
            self.admin_env.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
        admin_with(&location, args, &env).await
    }

    /// A new team with a full-access key.
    pub async fn team(&self, name: &str, agency: bool, credits: i64) -> Team {
        let credits = credits.to_string();
        let mut args = vec!["create-team", "--name", name, "--credits", &credits];
        if agency {
            args.push("--agency");
        }
        let team = self.admin(&args).await;
        let id = team["id"].as_str().expect("team id").to_owned();
        let key = self.key(&id, false).await;
        Team { id, key }
    }

    pub async fn key(&self, team_id: &str, read_only: bool) -> String {
        let mut args = vec!["create-key", "--team", team_id, "--name", "test"];
        if read_only {
            args.push("--read-only");
        }
        self.admin(&args).await["key"].as_str().expect("key").to_owned()
    }

    pub fn client(&self, key: &str) -> Api {
        Api::new(&self.base, Some(key))
    }

    pub fn anonymous(&self) -> Api {
        Api::new(&self.base, None)
    }
}

pub async fn admin(location: &[&str], args: &[&str]) -> Value {
    admin_with(location, args, &[]).await
}

/// `switchboard admin` with extra environment, e.g. the service token for `reindex --url`.
pub async fn admin_with(location: &[&str], args: &[&str], env: &[(&str, &str)]) -> Value {
    let mut command = Command::new(BIN);
    command.arg("admin").args(location).args(args).env("RUST_LOG", "error");
    command.env_remove("DATABASE_URL").env_remove("REDIS_URL");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .unwrap_or_else(|_| panic!("admin {args:?} did not finish in 120 s"))
        .expect("run admin");
    assert!(output.status.success(), "admin {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("admin prints JSON")
}

/// `REDIS_URL` among a stack's variables, for its `admin` calls.
fn redis_of(env: &[(&str, &str)]) -> Vec<(String, String)> {
    env.iter()
        .filter(|(name, _)| *name == "REDIS_URL")
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

pub struct Team {
    pub id: String,
    pub key: String,
}

/// A thin HTTP client with the key already set.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    pub base: String,
    key: Option<String>,
    header: &'static str,
    /// Sent with every request, e.g. a browser's `X-CSRF-Token`.
    extra: Vec<(&'static str, String)>,
}

pub struct Response {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    #[track_caller]
    pub fn expect(&self, status: u16) -> &Value {
        assert_eq!(self.status, status, "unexpected status; body: {}", self.text);
        &self.body
    }

    /// The error envelope's `code`, after checking the status.
    #[track_caller]
    pub fn error_code(&self, status: u16) -> &str {
        let body = self.expect(status);
        assert!(body["error"].is_string(), "error envelope without error: {}", self.text);
        body["code"].as_str().expect("code")
    }

    pub fn fields(&self) -> Vec<String> {
        self.body["details"]
            .as_array()
            .map(|d| d.iter().filter_map(|v| v["field"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    }
}

impl Api {
    pub fn new(base: &str, key: Option<&str>) -> Api {
        Api {
            http: reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client"),
            base: base.to_owned(),
            key: key.map(str::to_owned),
            header: "X-API-Key",
            extra: Vec::new(),
        }
    }

    /// A client that is signed in as a browser is: the session cookie on every request, and the
    /// CSRF token when given.
    pub fn signed_in(base: &str, token: &str, csrf: Option<&str>) -> Api {
        let mut api = Api::new(base, Some(&format!("switchboard_session={token}"))).with_header("Cookie");
        if let Some(csrf) = csrf {
            api.extra.push(("X-CSRF-Token", csrf.to_owned()));
        }
        api
    }

    pub fn with_header(mut self, header: &'static str) -> Api {
        self.header = header;
        self
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(key) = &self.key {
            request = request.header(self.header, key);
        }
        for (name, value) in &self.extra {
            request = request.header(*name, value);
        }
        request
    }

    /// Sends the request; the answer is checked against the gateway's OpenAPI document (see
    /// `contract.rs`) before the test sees it.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Response {
        let request = request.build().expect("request");
        let (method, url) = (request.method().as_str().to_owned(), request.url().clone());
        let response = self.http.execute(request).await.expect("request");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("body");
        let content_type = headers.get("content-type").and_then(|v| v.to_str().ok());
        Contract::of(&url.origin().ascii_serialization()).await.check(&method, url.path(), status, content_type, &text);
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Response { status, headers, body, text }
    }

    pub async fn get(&self, path: &str) -> Response {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    pub async fn delete(&self, path: &str) -> Response {
        self.send(self.request(reqwest::Method::DELETE, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Response {
        self.send(self.request(reqwest::Method::POST, path).json(&body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Response {
        self.send(self.request(reqwest::Method::PUT, path).json(&body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> Response {
        self.send(self.request(reqwest::Method::PATCH, path).json(&body)).await
    }

    pub async fn raw(&self, method: &str, path: &str, content_type: Option<&str>, body: Vec<u8>) -> Response {
        let mut request =
            self.request(reqwest::Method::from_bytes(method.as_bytes()).expect("method"), path).body(body);
        if let Some(content_type) = content_type {
            request = request.header("Content-Type", content_type);
        }
        self.send(request).await
    }
}

/// A throwaway Redis server on a free port, killed when dropped.
pub struct Redis {
    pub port: u16,
    child: Option<std::process::Child>,
    dir: tempfile::TempDir,
}

/// A port on 127.0.0.1 that was free a moment ago, for a child process to listen on.
///
/// Taken below the kernel's ephemeral range, which `bind(0)` and every outgoing connection
/// draw from: a port of that range, released here and bound by the child a second later, was
/// at times taken in between by one of the many connections the tests open ("Address already
/// in use"). Below it only another test's `free_port` can take it, and the random start makes
/// that unlikely.
pub fn free_port() -> u16 {
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let low = ephemeral_start.saturating_sub(12_000).max(1024);
    let span = u32::from(ephemeral_start.saturating_sub(low).max(1));
    let start = uuid::Uuid::new_v4().as_u128() as u32 % span;
    (0..span)
        .map(|offset| low + ((start + offset) % span) as u16)
        .find(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        .unwrap_or_else(|| std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port())
}

fn redis_server() -> PathBuf {
    for candidate in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"] {
        if Path::new(candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    panic!("redis-server is not installed; the test command installs it (apt-get install redis-server)")
}

impl Redis {
    pub async fn start() -> Redis {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut redis = Redis { port: free_port(), child: None, dir };
        redis.restart().await;
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub async fn restart(&mut self) {
        let child = std::process::Command::new(redis_server())
            .args(["--port", &self.port.to_string(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server did not start");
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `redis-cli <args>` against this server.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = std::process::Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}
