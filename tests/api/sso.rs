//! Single sign-on against real servers of the test's own, on loopback: an OpenID provider (npm
//! `oidc-provider`, tests/sso/provider.mjs), a DNS server (dnsmasq) that holds the TXT records
//! proving domains, and an HTTPS server (tests/sso/https-file.mjs, a certificate of a CA made
//! here) that holds the files proving them. The settings and proofs over the API; a provider
//! whose metadata points at private addresses; existing accounts, which link themselves from
//! their own session (the provider's login form driven over HTTP, as a browser would); then in
//! Chromium (tests/portal/sso.mjs) a person created at their first sign-in, an address no team
//! covers, an account outside the covered domains, ID tokens whose nonce or signature is wrong
//! (the provider's tamper modes), and the security page: a domain proven with "Check now", an
//! owner linking single sign-on. Each test that keeps something runs on SQLite (`dev`)
//! and on PostgreSQL (identity as a `serve` process), when the machine has it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::accounts::{PASSWORD as OWNER_PASSWORD, browser, cookie_token, owner};
use crate::common::dnsmasq::Dnsmasq;
use crate::common::web::{Reply, Request, WebServer};
use crate::common::{Api, Response, Stack, free_port};

const CLIENT_ID: &str = "switchboard-test";
const CLIENT_SECRET: &str = "a-client-secret-of-the-test";
const PASSWORD: &str = "provider password 1";
/// Every wait on another process or server.
const WAIT: Duration = Duration::from_secs(20);

/// A provider process; killed when dropped.
struct Provider {
    issuer: String,
    _child: Child,
}

async fn provider(portal: &str, tamper: &str, users: &Value) -> Provider {
    let script = std::env::var("SWITCHBOARD_TEST_SSO_PROVIDER").expect(
        "SWITCHBOARD_TEST_SSO_PROVIDER names tests/sso/provider.mjs (scripts/test installs it: ensure_sso_provider)",
    );
    let mut child = Command::new("node")
        .arg(&script)
        .env("OIDC_PORT", "0")
        .env("OIDC_CLIENT_ID", CLIENT_ID)
        .env("OIDC_CLIENT_SECRET", CLIENT_SECRET)
        .env("OIDC_REDIRECT_URI", format!("{portal}/sso/callback"))
        .env("OIDC_USERS", users.to_string())
        .env("OIDC_TAMPER", tamper)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts the provider");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ready = async {
        while let Some(line) = lines.next_line().await.expect("reading the provider") {
            if let Some(issuer) = line.strip_prefix("oidc-provider ready ") {
                return issuer.trim().to_owned();
            }
        }
        panic!("the provider ({tamper:?}) exited before it was ready");
    };
    let issuer = tokio::time::timeout(WAIT, ready)
        .await
        .unwrap_or_else(|_| panic!("the provider ({tamper:?}) was not ready within {WAIT:?}"));
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Provider { issuer, _child: child }
}

fn user(sub: &str, email: &str, given: &str, family: &str) -> Value {
    json!({ "sub": sub, "email": email, "given_name": given, "family_name": family, "password": PASSWORD })
}

// ---------------------------------------------------------------- the proofs' servers

/// The DNS server, the CA and the HTTPS port a stack is told of, for domain proofs.
struct Proofs {
    dns: Dnsmasq,
    dir: tempfile::TempDir,
    https_port: u16,
}

/// `openssl <args>` in `dir`, which must succeed within [`WAIT`].
async fn openssl(dir: &std::path::Path, args: &[&str]) {
    let run = Command::new("openssl").args(args).current_dir(dir).kill_on_drop(true).output();
    let output = tokio::time::timeout(WAIT, run)
        .await
        .unwrap_or_else(|_| panic!("openssl {args:?} did not finish within {WAIT:?}"))
        .expect("openssl runs (apt-get install openssl)");
    assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// The names the HTTPS server answers for, all on 127.0.0.1.
const WEB_HOSTS: [&str; 2] = ["files.example", "moved.example"];

impl Proofs {
    /// A CA of this test, and a certificate it signed for the web hosts.
    async fn new() -> Proofs {
        let dir = tempfile::tempdir().expect("tempdir");
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        let mut ca = vec!["req", "-x509"];
        ca.extend(ec);
        ca.extend(["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Switchboard test CA"]);
        ca.extend(["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
        openssl(dir.path(), &ca).await;
        let mut leaf = vec!["req"];
        leaf.extend(ec);
        leaf.extend(["-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=files.example"]);
        openssl(dir.path(), &leaf).await;
        let names: Vec<String> = WEB_HOSTS.iter().map(|host| format!("DNS:{host}")).collect();
        let extensions =
            format!("subjectAltName={}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n", names.join(","));
        std::fs::write(dir.path().join("leaf.ext"), extensions).expect("leaf.ext");
        let sign = [
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ];
        openssl(dir.path(), &sign).await;
        Proofs { dns: Dnsmasq::reserve(), dir, https_port: free_port() }
    }

    fn ca_file(&self) -> String {
        self.dir.path().join("ca.pem").display().to_string()
    }

    /// What the stack is told: the DNS server, the CA, the port of the proofs' files.
    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("SWITCHBOARD_DNS_SERVER".to_owned(), self.dns.server()),
            ("SWITCHBOARD_SSO_PROOF_CA_FILE".to_owned(), self.ca_file()),
            ("SWITCHBOARD_SSO_PROOF_HTTPS_PORT".to_owned(), self.https_port.to_string()),
        ]
    }

    /// [`Proofs::env`], and the providers of the tests (on 127.0.0.1) allowed, though private.
    fn env_with_loopback_provider(&self) -> Vec<(String, String)> {
        let mut env = self.env();
        env.push(("SWITCHBOARD_SSO_ALLOW_PRIVATE".to_owned(), "127.0.0.1".to_owned()));
        env
    }

    /// The DNS server again, with these TXT records (and the web hosts at 127.0.0.1).
    async fn publish(&mut self, txt: &[(String, String)]) {
        let hosts: Vec<(&str, &str)> = WEB_HOSTS.iter().map(|host| (*host, "127.0.0.1")).collect();
        self.dns.serve(txt, &hosts).await;
    }

    /// The HTTPS server, answering as `files` says per host.
    async fn web(&self, files: &Value) -> Child {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sso/https-file.mjs");
        let mut child = Command::new("node")
            .arg(script)
            .env("HTTPS_PORT", self.https_port.to_string())
            .env("HTTPS_CERT", self.dir.path().join("leaf.pem"))
            .env("HTTPS_KEY", self.dir.path().join("leaf.key"))
            .env("HTTPS_FILES", files.to_string())
            .env("HTTPS_LIFETIME", "600")
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node starts tests/sso/https-file.mjs");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let ready = async {
            while let Some(line) = lines.next_line().await.expect("reading the HTTPS server") {
                if line.starts_with("https-file ready") {
                    return;
                }
            }
            panic!("the HTTPS server exited before it was ready");
        };
        tokio::time::timeout(WAIT, ready)
            .await
            .unwrap_or_else(|_| panic!("the HTTPS server did not say it was ready within {WAIT:?}"));
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        child
    }
}

/// The stacks a test runs on: `dev` (SQLite), then identity as a `serve` process on
/// PostgreSQL when the machine has it.
async fn each_stack<F, Fut>(env: &[(String, String)], test: F)
where
    F: Fn(Stack) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut env: Vec<(&str, &str)> = env.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
    env.push(("SWITCHBOARD_RATE_LIMIT_AUTH", "1000"));
    eprintln!("engine: sqlite");
    test(Stack::start_with(&env).await).await;
    match Stack::serve_on_postgres(&["identity"], &env).await {
        Some(stack) => {
            eprintln!("engine: postgres");
            test(stack).await;
        }
        None => eprintln!("NOTE: the PostgreSQL run is skipped: no TEST_DATABASE_URL"),
    }
}

// ---------------------------------------------------------------- a browser, by hand

/// A person with a session: their API client and the session's token.
struct Person {
    api: Api,
    token: String,
}

async fn owner_with_token(stack: &Stack, team_id: &str, email: &str) -> Person {
    owner(stack, team_id, email).await;
    signed_in_person(stack, email, OWNER_PASSWORD).await
}

async fn signed_in_person(stack: &Stack, email: &str, password: &str) -> Person {
    let signed_in = crate::accounts::sign_in(stack, email, password).await;
    signed_in.expect(200);
    Person { api: browser(stack, &signed_in), token: cookie_token(&signed_in) }
}

/// The provider's URL and the browser binding (cookie `switchboard_sso`) of a start or link.
fn started(response: &Response) -> (String, String) {
    let url = response.expect(200)["data"]["url"].as_str().expect("a URL").to_owned();
    let cookie = response.header("set-cookie").unwrap_or_else(|| panic!("no binding cookie: {}", response.text));
    let binding = cookie
        .strip_prefix("switchboard_sso=")
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("not the binding cookie: {cookie}"))
        .to_owned();
    (url, binding)
}

fn query_value(url: &str, name: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    url.query_pairs().find(|(key, _)| key == name).map(|(_, value)| value.into_owned())
}

/// What a browser does at the provider: follows its redirects, fills its login form as `login`,
/// and stops at the redirect back to the portal. Answers the `code` and `state` it carries.
async fn at_provider(authorization_url: &str, login: &str, callback: &str) -> (String, String) {
    let http =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).timeout(WAIT).build().expect("a client");
    let mut jar: Vec<(String, String)> = Vec::new();
    let mut url = authorization_url.to_owned();
    let mut form: Option<String> = None;
    for _ in 0..16 {
        let mut request = match form.take() {
            Some(body) => http.post(&url).header("Content-Type", "application/x-www-form-urlencoded").body(body),
            None => http.get(&url),
        };
        if !jar.is_empty() {
            let cookies: Vec<String> = jar.iter().map(|(name, value)| format!("{name}={value}")).collect();
            request = request.header("Cookie", cookies.join("; "));
        }
        let response = request.send().await.unwrap_or_else(|error| panic!("the provider at {url}: {error}"));
        for set in response.headers().get_all("set-cookie").iter().filter_map(|value| value.to_str().ok()) {
            let pair = set.split(';').next().unwrap_or_default();
            let Some((name, value)) = pair.split_once('=') else { continue };
            jar.retain(|(kept, _)| kept != name.trim());
            let expired = set.to_ascii_lowercase().contains("max-age=0") || value.trim().is_empty();
            if !expired {
                jar.push((name.trim().to_owned(), value.trim().to_owned()));
            }
        }
        let status = response.status().as_u16();
        if (300..400).contains(&status) {
            let location = response.headers().get("location").and_then(|v| v.to_str().ok()).expect("a Location");
            let next = url::Url::parse(&url).and_then(|base| base.join(location)).expect("a URL").to_string();
            if next.starts_with(callback) {
                let code = query_value(&next, "code").unwrap_or_else(|| panic!("no code in {next}"));
                let state = query_value(&next, "state").unwrap_or_else(|| panic!("no state in {next}"));
                return (code, state);
            }
            url = next;
            continue;
        }
        let text = response.text().await.unwrap_or_default();
        assert_eq!(status, 200, "the provider answered {status} at {url}: {text}");
        let action = text
            .split("action=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no login form at {url}: {text}"));
        url = url::Url::parse(&url).and_then(|base| base.join(action)).expect("a URL").to_string();
        form = Some(
            url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs([("email", login), ("password", PASSWORD)])
                .finish(),
        );
    }
    panic!("the provider did not send the browser back within 16 steps (last at {url})")
}

/// `POST /auth/sso/finish` from the browser holding `binding`, and `session` when signed in.
async fn finish(stack: &Stack, binding: &str, session: Option<&str>, code: &str, state: &str) -> Response {
    let mut cookie = format!("switchboard_sso={binding}");
    if let Some(session) = session {
        cookie.push_str(&format!("; switchboard_session={session}"));
    }
    let browser = Api::new(&stack.base, Some(&cookie)).with_header("Cookie");
    browser.post("/auth/sso/finish", json!({ "code": code, "state": state })).await
}

/// A whole sign-in through the provider as `login`, started with `email`.
async fn sso_sign_in(stack: &Stack, email: &str, login: &str) -> Response {
    let portal = stack.base.trim_end_matches("/v1");
    let (url, binding) = started(&stack.anonymous().post("/auth/sso/start", json!({ "email": email })).await);
    let (code, state) = at_provider(&url, login, &format!("{portal}/sso/callback")).await;
    finish(stack, &binding, None, &code, &state).await
}

// ---------------------------------------------------------------- providers of the test's own

/// A provider that only publishes its metadata (and an empty key set at `/jwks`): enough to be
/// discovered. `jwks` and `token` are where its metadata says they are (its own by default);
/// `redirect` makes its metadata a redirect there instead.
async fn metadata_only(jwks: Option<String>, token: Option<String>, redirect: Option<String>) -> WebServer {
    WebServer::start(move |request: Request| {
        let (jwks, token, redirect) = (jwks.clone(), token.clone(), redirect.clone());
        async move {
            let origin = format!("http://{}", request.headers.get("host").cloned().unwrap_or_default());
            match request.path() {
                "/.well-known/openid-configuration" => {
                    if let Some(location) = redirect {
                        return Reply::new(302).header("Location", &location);
                    }
                    let metadata = json!({
                        "issuer": origin,
                        "authorization_endpoint": format!("{origin}/auth"),
                        "token_endpoint": token.unwrap_or_else(|| format!("{origin}/token")),
                        "jwks_uri": jwks.unwrap_or_else(|| format!("{origin}/jwks")),
                        "response_types_supported": ["code"],
                        "subject_types_supported": ["public"],
                        "id_token_signing_alg_values_supported": ["RS256"],
                    });
                    Reply::new(200).header("Content-Type", "application/json").body(metadata.to_string())
                }
                "/jwks" => Reply::new(200).header("Content-Type", "application/json").body(r#"{"keys":[]}"#),
                _ => Reply::new(404),
            }
        }
    })
    .await
}

/// A server on 127.0.0.2, an address the platform is not allowed to reach, that counts what
/// reaches it.
async fn private_server() -> (WebServer, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let server = WebServer::start_at("127.0.0.2", move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Reply::new(200).header("Content-Type", "application/json").body(r#"{"keys":[]}"#) }
    })
    .await;
    (server, hits)
}

fn sso_body(issuer: &str, domains: &[&str]) -> Value {
    json!({ "issuer": issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "domains": domains })
}

/// The proof value (and TXT record name) of a domain as `GET /members/sso` shows it.
fn proof_of(config: &Value, domain: &str) -> (String, String) {
    let status = config["domainStatus"].as_array().expect("domainStatus");
    let entry = status.iter().find(|entry| entry["domain"] == domain).unwrap_or_else(|| panic!("{domain}: {config}"));
    (
        entry["txtRecord"]["name"].as_str().expect("a name").to_owned(),
        entry["txtRecord"]["value"].as_str().expect("a value").to_owned(),
    )
}

fn verify_path(domain: &str) -> String {
    format!("/members/sso/domains/{domain}/verify")
}

// ---------------------------------------------------------------- the tests

/// A domain routes sign-ins only once its team proves it (DNS TXT record or HTTPS file);
/// claims do not block other teams; a proven domain is its prover's alone.
#[tokio::test]
async fn sso_domains_count_only_once_proven_by_dns_or_https() {
    let mut proofs = Proofs::new().await;
    let env = proofs.env_with_loopback_provider();
    let proofs = &tokio::sync::Mutex::new(&mut proofs);
    each_stack(&env, move |stack| async move {
        let mut proofs = proofs.lock().await;
        let provider = metadata_only(None, None, None).await;
        let acme = stack.team("Acme", false, 0).await;
        let acme_owner = owner(&stack, &acme.id, "owner@acme.example").await;
        let other = stack.team("Other", false, 0).await;
        let other_owner = owner(&stack, &other.id, "owner@other.example").await;

        let claimed = ["acme.example", "files.example", "moved.example"];
        let saved = acme_owner.put("/members/sso", sso_body(provider.origin(), &claimed)).await.expect(200)["data"].clone();
        assert_eq!(saved["domains"], json!(claimed));
        for status in saved["domainStatus"].as_array().unwrap() {
            let domain = status["domain"].as_str().unwrap();
            assert_eq!((status["verified"].clone(), status["verifiedAt"].clone()), (json!(false), Value::Null));
            assert_eq!(status["txtRecord"]["name"], format!("_switchboard-verification.{domain}"));
            assert_eq!(status["httpsFile"]["url"], format!("https://{domain}/.well-known/switchboard-verification.txt"));
            assert_eq!(status["httpsFile"]["content"], status["txtRecord"]["value"]);
            assert!(status["txtRecord"]["value"].as_str().unwrap().starts_with("switchboard-verification="));
        }
        let (record, acme_value) = proof_of(&saved, "acme.example");
        // Claimed, not proven: it routes no one.
        let start = json!({ "email": "grace@acme.example" });
        assert_eq!(stack.anonymous().post("/auth/sso/start", start.clone()).await.error_code(404), "NOT_FOUND");
        // An unproven claim does not block another team.
        let other_saved =
            other_owner.put("/members/sso", sso_body(provider.origin(), &["acme.example"])).await.expect(200)["data"].clone();
        let (_, other_value) = proof_of(&other_saved, "acme.example");
        assert_ne!(other_value, acme_value, "each team proves with a value of its own");

        // Nothing published, then only the other team's value: not proven (422, saying why).
        proofs.publish(&[]).await;
        let unproven = acme_owner.post(&verify_path("acme.example"), json!({})).await;
        assert_eq!(unproven.error_code(422), "UNPROCESSABLE_ENTITY");
        assert!(unproven.text.contains("no TXT record"), "{}", unproven.text);
        proofs.publish(&[(record.clone(), other_value.clone())]).await;
        let wrong = acme_owner.post(&verify_path("acme.example"), json!({})).await;
        assert!(wrong.error_code(422) == "UNPROCESSABLE_ENTITY" && wrong.text.contains("do not hold"), "{}", wrong.text);

        // Its own value in the TXT record: proven, and it routes to Acme's provider.
        proofs.publish(&[(record.clone(), other_value.clone()), (record.clone(), acme_value.clone())]).await;
        let proven = acme_owner.post(&verify_path("Acme.Example"), json!({})).await.expect(200)["data"].clone();
        assert_eq!((proven["domain"].as_str(), proven["verified"].as_bool(), proven["method"].as_str()), (Some("acme.example"), Some(true), Some("dns")));
        let (url, _) = started(&stack.anonymous().post("/auth/sso/start", start.clone()).await);
        assert!(url.starts_with(&format!("{}/auth?", provider.origin())), "{url}");
        // Proven by Acme: the other team can neither prove it nor claim it anew.
        let taken = other_owner.post(&verify_path("acme.example"), json!({})).await;
        assert_eq!(taken.error_code(409), "CONFLICT");
        let claim = other_owner.put("/members/sso", sso_body(provider.origin(), &["acme.example"])).await;
        assert_eq!(claim.error_code(409), "CONFLICT");

        // The file over https, answered 200: proven; a redirect to that same file is not followed.
        let files = json!({
            "files.example": { "status": 200, "body": format!("{acme_value}\n") },
            "moved.example": { "status": 302, "location": format!("https://files.example:{}/.well-known/switchboard-verification.txt", proofs.https_port) },
        });
        let _web = proofs.web(&files).await;
        let by_file = acme_owner.post(&verify_path("files.example"), json!({})).await.expect(200)["data"].clone();
        assert_eq!(by_file["method"], "https");
        let moved = acme_owner.post(&verify_path("moved.example"), json!({})).await;
        assert!(moved.error_code(422) == "UNPROCESSABLE_ENTITY" && moved.text.contains("302"), "{}", moved.text);

        // Owners only; claimed domains only; no public mail service.
        assert_eq!(stack.client(&acme.key).post(&verify_path("acme.example"), json!({})).await.error_code(403), "FORBIDDEN");
        assert_eq!(acme_owner.post(&verify_path("unclaimed.example"), json!({})).await.error_code(404), "NOT_FOUND");
        let public = acme_owner.post(&verify_path("gmail.com"), json!({})).await;
        assert_eq!(public.error_code(400), "VALIDATION_ERROR");

        let config = acme_owner.get("/members/sso").await.expect(200)["data"].clone();
        let verified: Vec<(&str, bool)> = config["domainStatus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|status| (status["domain"].as_str().unwrap(), status["verified"].as_bool().unwrap()))
            .collect();
        assert_eq!(verified, [("acme.example", true), ("files.example", true), ("moved.example", false)]);
        assert!(config["domainStatus"][0]["verifiedAt"].is_string(), "{config}");

        // Dropped by Acme, the domain is free: the other team's own record proves it now.
        acme_owner.put("/members/sso", json!({ "issuer": provider.origin(), "clientId": CLIENT_ID, "domains": ["files.example"] })).await.expect(200);
        other_owner.post(&verify_path("acme.example"), json!({})).await.expect(200);
        let log = acme_owner.get("/audit-log?action=team.sso_domain_verified").await.expect(200)["data"].clone();
        assert_eq!(log.as_array().map(Vec::len), Some(2), "{log}");
        assert_eq!(log[0]["target"], "files.example", "the domain it proved: {log}");

        // Each of the three SSO writes is in the log (the walk of every audited write in
        // tests/api/audit.rs leaves SSO to this test, which has a provider and DNS).
        acme_owner.delete("/members/sso").await.expect(200);
        let log = acme_owner.get("/audit-log?limit=100").await.expect(200)["data"].clone();
        for action in ["team.sso_changed", "team.sso_domain_verified", "team.sso_removed"] {
            assert!(log.as_array().unwrap().iter().any(|e| e["action"] == action), "{action} missing: {log}");
        }
    })
    .await;
}

/// Public mail services cannot be claimed, and people new through SSO are never admins.
#[tokio::test]
async fn public_mail_domains_and_admin_default_roles_are_refused() {
    let stack = Stack::start().await;
    let acme = stack.team("Acme", false, 0).await;
    let acme_owner = owner(&stack, &acme.id, "owner@acme.example").await;
    let issuer = "http://127.0.0.1:9";
    for public in ["gmail.com", "Outlook.com", "proton.me", "yandex.ru"] {
        let answer = acme_owner.put("/members/sso", sso_body(issuer, &["acme.example", public])).await;
        assert_eq!(answer.error_code(400), "VALIDATION_ERROR", "{public}");
        assert_eq!(answer.fields(), ["domains[1]"], "{public}: {}", answer.text);
        assert!(answer.text.contains("public mail service"), "{}", answer.text);
    }
    for role in ["admin", "owner"] {
        let mut body = sso_body(issuer, &["acme.example"]);
        body["defaultRole"] = json!(role);
        let answer = acme_owner.put("/members/sso", body).await;
        assert_eq!(answer.error_code(400), "VALIDATION_ERROR", "{role}");
        assert_eq!(answer.fields(), ["defaultRole"], "{role}: {}", answer.text);
    }
}

/// Every request to a provider is checked: an address that is private and not allowed (here
/// 127.0.0.2 and 169.254.169.254, while the provider's 127.0.0.1 is) is never reached, not by
/// discovery, its keys, its token endpoint, nor a redirect.
#[tokio::test]
async fn sso_requests_never_reach_private_addresses_that_are_not_allowed() {
    let mut proofs = Proofs::new().await;
    let env = proofs.env_with_loopback_provider();
    let proofs = &tokio::sync::Mutex::new(&mut proofs);
    each_stack(&env, move |stack| async move {
        let mut proofs = proofs.lock().await;
        let (private, hits) = private_server().await;
        let acme = stack.team("Acme", false, 0).await;
        let acme_owner = owner(&stack, &acme.id, "owner@acme.example").await;

        // Keys at a private address: discovery fails (503), nothing is fetched there.
        for jwks in [private.url("/jwks"), "http://169.254.169.254/jwks".to_owned(), "http://[::1]:9/jwks".to_owned()] {
            let provider = metadata_only(Some(jwks.clone()), None, None).await;
            let answer = acme_owner.put("/members/sso", sso_body(provider.origin(), &["acme.example"])).await;
            assert_eq!(answer.error_code(503), "SERVICE_UNAVAILABLE", "{jwks}");
            assert!(answer.text.contains("private"), "{jwks}: {}", answer.text);
        }
        // Metadata that redirects to a private address: not followed.
        let redirecting = metadata_only(None, None, Some(private.url("/.well-known/openid-configuration"))).await;
        let answer = acme_owner.put("/members/sso", sso_body(redirecting.origin(), &["acme.example"])).await;
        assert_eq!(answer.error_code(503), "SERVICE_UNAVAILABLE");

        // Its token endpoint at a private address: discovery works (the keys are at 127.0.0.1,
        // which is allowed), and the sign-in fails at the exchange without reaching it.
        let provider = metadata_only(None, Some(private.url("/token")), None).await;
        let saved =
            acme_owner.put("/members/sso", sso_body(provider.origin(), &["acme.example"])).await.expect(200)["data"]
                .clone();
        proofs.publish(&[proof_of(&saved, "acme.example")]).await;
        acme_owner.post(&verify_path("acme.example"), json!({})).await.expect(200);
        let (url, binding) =
            started(&stack.anonymous().post("/auth/sso/start", json!({ "email": "grace@acme.example" })).await);
        let state = query_value(&url, "state").expect("a state");
        let exchange = finish(&stack, &binding, None, "a-code", &state).await;
        assert_eq!(exchange.error_code(503), "SERVICE_UNAVAILABLE");
        assert!(exchange.text.contains("127.0.0.2"), "{}", exchange.text);
        assert_eq!(hits.load(Ordering::SeqCst), 0, "a request reached the private address");
    })
    .await;
}

/// An account that exists is never signed in by a provider that vouches for its address: its
/// person links single sign-on from their own session, with the provider vouching for their
/// own address, bound to that session and browser; then, and only then, it signs them in.
#[tokio::test]
async fn existing_accounts_link_sso_only_from_their_own_session() {
    let mut proofs = Proofs::new().await;
    let env = proofs.env_with_loopback_provider();
    let proofs = &tokio::sync::Mutex::new(&mut proofs);
    each_stack(&env, move |stack| async move {
        let mut proofs = proofs.lock().await;
        let portal = stack.base.trim_end_matches("/v1").to_owned();
        let callback = format!("{portal}/sso/callback");
        let users = json!([
            user("owner-1", "owner@acme.example", "Ada", "Owner"),
            user("grace-1", "grace@acme.example", "Grace", "Hopper"),
        ]);
        let idp = provider(&portal, "", &users).await;
        let acme = stack.team("Acme", false, 0).await;
        let acme_owner = owner_with_token(&stack, &acme.id, "owner@acme.example").await;
        let saved =
            acme_owner.api.put("/members/sso", sso_body(&idp.issuer, &["acme.example"])).await.expect(200)["data"]
                .clone();
        proofs.publish(&[proof_of(&saved, "acme.example")]).await;
        acme_owner.api.post(&verify_path("acme.example"), json!({})).await.expect(200);

        // The team's provider vouches for the owner's address: no session, 409 with the way out.
        let refused = sso_sign_in(&stack, "owner@acme.example", "owner@acme.example").await;
        assert_eq!(refused.error_code(409), "CONFLICT");
        assert!(
            refused.text.contains("not been linked") && refused.text.contains("Link single sign-on"),
            "{}",
            refused.text
        );
        assert!(
            refused.header("set-cookie").is_none_or(|cookie| !cookie.contains("switchboard_session")),
            "{}",
            refused.text
        );

        // Linking: a person's session only, never a key.
        let status = acme_owner.api.get("/auth/sso/link").await.expect(200)["data"].clone();
        assert_eq!(
            status,
            json!({ "available": true, "linked": false, "domain": "acme.example", "issuer": idp.issuer })
        );
        assert_eq!(stack.client(&acme.key).post("/auth/sso/link", json!({})).await.error_code(401), "UNAUTHORIZED");
        // The provider vouches for someone else: refused.
        let (url, binding) = started(&acme_owner.api.post("/auth/sso/link", json!({})).await);
        assert_eq!(query_value(&url, "prompt").as_deref(), Some("login"));
        let (code, state) = at_provider(&url, "grace@acme.example", &callback).await;
        let other_person = finish(&stack, &binding, Some(&acme_owner.token), &code, &state).await;
        assert_eq!(other_person.error_code(401), "UNAUTHORIZED");
        assert!(other_person.text.contains("grace@acme.example"), "{}", other_person.text);
        // Finished in another session (the same person's, another browser's), or none: refused.
        let elsewhere = signed_in_person(&stack, "owner@acme.example", OWNER_PASSWORD).await;
        for session in [Some(elsewhere.token.as_str()), None] {
            let (url, binding) = started(&acme_owner.api.post("/auth/sso/link", json!({})).await);
            let (code, state) = at_provider(&url, "owner@acme.example", &callback).await;
            let answer = finish(&stack, &binding, session, &code, &state).await;
            assert_eq!(answer.error_code(401), "UNAUTHORIZED", "{session:?}");
            assert!(answer.text.contains("another session"), "{}", answer.text);
        }
        assert_eq!(acme_owner.api.get("/auth/sso/link").await.expect(200)["data"]["linked"], false);
        // Its own session, its own address: linked; the answer is that session.
        let (url, binding) = started(&acme_owner.api.post("/auth/sso/link", json!({})).await);
        let (code, state) = at_provider(&url, "owner@acme.example", &callback).await;
        let linked = finish(&stack, &binding, Some(&acme_owner.token), &code, &state).await;
        assert_eq!(linked.expect(200)["data"]["user"]["email"], "owner@acme.example");
        assert_eq!(cookie_token(&linked), acme_owner.token, "a link begins no new session");
        assert_eq!(acme_owner.api.get("/auth/sso/link").await.expect(200)["data"]["linked"], true);

        // From then on the provider signs the owner in.
        let signed_in = sso_sign_in(&stack, "owner@acme.example", "owner@acme.example").await;
        let session = signed_in.expect(200)["data"].clone();
        assert_eq!(
            (session["user"]["email"].as_str(), session["role"].as_str()),
            (Some("owner@acme.example"), Some("owner"))
        );
        // A new address is created as the default role, a member.
        let grace = sso_sign_in(&stack, "grace@acme.example", "grace@acme.example").await;
        assert_eq!(grace.expect(200)["data"]["role"], "member");
        let log = acme_owner.api.get("/audit-log?action=auth.sso_linked").await.expect(200)["data"].clone();
        assert_eq!(log.as_array().map(Vec::len), Some(1), "{log}");
    })
    .await;
}

#[tokio::test]
async fn people_sign_in_through_their_teams_openid_provider() {
    let runner = std::env::var("SWITCHBOARD_TEST_PORTAL")
        .expect("SWITCHBOARD_TEST_PORTAL names tests/portal/run.mjs (scripts/test installs it: ensure_portal_tests)");
    let mut proofs = Proofs::new().await;
    let mut env: Vec<(String, String)> = proofs.env();
    env.extend([
        ("SWITCHBOARD_SSO_ALLOW_PRIVATE".to_owned(), "true".to_owned()),
        ("SWITCHBOARD_RATE_LIMIT_AUTH".to_owned(), "1000".to_owned()),
    ]);
    let env: Vec<(&str, &str)> = env.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
    let stack = Stack::start_with(&env).await;
    let portal = stack.base.trim_end_matches("/v1").to_owned();
    let users = json!([
        user("grace-1", "grace@acme.example", "Grace", "Hopper"),
        user("eve-1", "eve@elsewhere.example", "Eve", "Outside"),
        user("nora-1", "nora@nonce.example", "Nora", "Nonce"),
        user("sig-1", "sig@sig.example", "Sig", "Nature"),
        user("owner-1", "owner@acme.example", "Ada", "Owner"),
    ]);
    let honest = provider(&portal, "", &users).await;
    let wrong_nonce = provider(&portal, "nonce", &users).await;
    let wrong_signature = provider(&portal, "signature", &users).await;

    // Settings: owners only, the secret never answered, a proven domain belongs to one team.
    let acme = stack.team("Acme", false, 0).await;
    let acme_owner = owner(&stack, &acme.id, "owner@acme.example").await;
    let config = json!({
        "issuer": honest.issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "domains": ["Acme.example"],
    });
    let key = stack.client(&acme.key);
    assert_eq!(key.put("/members/sso", config.clone()).await.error_code(403), "FORBIDDEN");
    assert_eq!(acme_owner.get("/members/sso").await.error_code(404), "NOT_FOUND");
    let saved = acme_owner.put("/members/sso", config).await.expect(200)["data"].clone();
    assert_eq!(saved["domains"], json!(["acme.example"]));
    assert_eq!(saved["defaultRole"], "member");
    assert_eq!(saved["redirectUri"], format!("{portal}/sso/callback"));
    assert!(!saved.to_string().contains(CLIENT_SECRET), "{saved}");
    let mut records = vec![proof_of(&saved, "acme.example")];
    proofs.publish(&records).await;
    acme_owner.post(&verify_path("acme.example"), json!({})).await.expect(200);
    // A second domain, its record published: proven in the browser below ("Check now").
    let both =
        json!({ "issuer": honest.issuer, "clientId": CLIENT_ID, "domains": ["acme.example", "eu.acme.example"] });
    let saved = acme_owner.put("/members/sso", both).await.expect(200)["data"].clone();
    assert_eq!(saved["domainStatus"][0]["verified"], true, "saving again keeps a proof: {saved}");
    records.push(proof_of(&saved, "eu.acme.example"));
    let unreachable =
        json!({ "issuer": "http://127.0.0.1:9", "clientId": "x", "clientSecret": "y", "domains": ["z.example"] });
    assert_eq!(acme_owner.put("/members/sso", unreachable).await.status, 503);
    let mut owners = Vec::new();
    for (name, issuer, domain) in
        [("Nonce", &wrong_nonce.issuer, "nonce.example"), ("Sig", &wrong_signature.issuer, "sig.example")]
    {
        let team = stack.team(name, false, 0).await;
        let team_owner = owner(&stack, &team.id, &format!("owner@{domain}")).await;
        let body =
            json!({ "issuer": issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "domains": [domain] });
        let saved = team_owner.put("/members/sso", body).await.expect(200)["data"].clone();
        records.push(proof_of(&saved, domain));
        let taken = json!({ "issuer": issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "domains": ["acme.example"] });
        assert_eq!(team_owner.put("/members/sso", taken).await.error_code(409), "CONFLICT");
        owners.push((team_owner, domain));
    }
    proofs.publish(&records).await;
    for (team_owner, domain) in &owners {
        team_owner.post(&verify_path(domain), json!({})).await.expect(200);
    }
    let uncovered = stack.anonymous().post("/auth/sso/start", json!({ "email": "x@uncovered.example" })).await;
    assert_eq!(uncovered.error_code(404), "NOT_FOUND");
    // A callback without the browser binding signs no one in.
    let unbound = stack.anonymous().post("/auth/sso/finish", json!({ "code": "c", "state": "s" })).await;
    assert_eq!(unbound.error_code(401), "UNAUTHORIZED");

    // In Chromium.
    let cases = json!([
        { "name": "jit", "email": "grace@acme.example", "login": "grace@acme.example", "password": PASSWORD,
          "expect": "signed-in", "text": "Grace Hopper" },
        { "name": "not-covered", "email": "x@uncovered.example", "expect": "not-covered",
          "text": "No single sign-on covers this e-mail address" },
        { "name": "outside-the-domains", "email": "someone@acme.example", "login": "eve@elsewhere.example",
          "password": PASSWORD, "expect": "refused", "text": "not in a domain the team's single sign-on covers" },
        { "name": "wrong-nonce", "email": "nora@nonce.example", "login": "nora@nonce.example", "password": PASSWORD,
          "expect": "refused", "text": "could not be verified" },
        { "name": "wrong-signature", "email": "sig@sig.example", "login": "sig@sig.example", "password": PASSWORD,
          "expect": "refused", "text": "could not be verified" },
        { "name": "check-now", "email": "owner@acme.example", "portalPassword": OWNER_PASSWORD, "expect": "proven",
          "domain": "eu.acme.example" },
        { "name": "link", "email": "owner@acme.example", "portalPassword": OWNER_PASSWORD, "login": "owner@acme.example",
          "password": PASSWORD, "expect": "linked" },
    ]);
    let script = std::path::Path::new(&runner).with_file_name("sso.mjs");
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    let shots = std::path::Path::new(&target).join("portal-screenshots");
    let mut command = Command::new("node");
    command
        .arg(&script)
        .env("PORTAL_URL", &portal)
        .env("SSO_CASES", cases.to_string())
        .env("SCREENSHOT_DIR", &shots)
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .expect("the browser run did not finish in 300 s")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));

    // Grace was made a member of Acme at her first sign-in, and no one else anywhere.
    let members = acme_owner.get("/members").await.expect(200)["data"].clone();
    let grace = members.as_array().unwrap().iter().find(|m| m["email"] == "grace@acme.example").cloned();
    let grace = grace.unwrap_or_else(|| panic!("Grace was not created: {members}"));
    assert_eq!((grace["role"].as_str(), grace["firstName"].as_str()), (Some("member"), Some("Grace")));
    assert_eq!(grace["canSignIn"], true);
    assert!(members.as_array().unwrap().iter().all(|m| m["email"] != "eve@elsewhere.example"), "{members}");
    let log = acme_owner.get("/audit-log").await.expect(200)["data"].clone();
    for action in
        ["member.joined", "auth.signed_in_sso", "team.sso_changed", "team.sso_domain_verified", "auth.sso_linked"]
    {
        assert!(log.as_array().unwrap().iter().any(|e| e["action"] == action), "{action} missing: {log}");
    }
    // A person without a password cannot sign in with one.
    let by_password =
        stack.anonymous().post("/auth/sign-in", json!({ "email": "grace@acme.example", "password": PASSWORD })).await;
    assert_eq!(by_password.status, 401);
}
