//! `switchboard dev`: every component in one process, SQLite files in the data directory,
//! the in-process rate limiter (unless REDIS_URL is set), loopback gRPC between them with a
//! service token like any deployment.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use switchboard_identity::IdentityStore;
use switchboard_identity::store::NewTeam;
use switchboard_kit::grpc::{ServiceAccess, ServiceToken};
use switchboard_kit::peers::{IDENTITY, Peers};
use switchboard_proto::v1::KeyAccess;
use tokio::sync::watch;

use crate::components::{self, Context};
use crate::config::{self, FileConfig};
use crate::session::DevSession;

const DEMO_TEAM: &str = "Demo Team";
const DEMO_CREDITS: i64 = 1000;

/// `listen`: the `--listen` flag, which wins over the variable and the config file.
pub async fn run(file: FileConfig, data_dir: Option<&Path>, listen: Option<String>) -> anyhow::Result<()> {
    let _telemetry = switchboard_kit::telemetry::init("switchboard");
    let data_dir = config::data_dir(&file, data_dir);
    std::fs::create_dir_all(&data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
    let data_dir = data_dir.canonicalize().context("resolving the data directory")?;
    // The variable when set (so that other processes can join), else a token for this run.
    let access = ServiceAccess::from_env()?.unwrap_or_else(|| ServiceAccess::Token(ServiceToken::generate()));

    let demo = create_demo_team_once(&config::sqlite_in(&data_dir, IDENTITY.name)?).await?;

    // Every port is bound before any service is built, so that each knows where the others are.
    let mut peers = Peers::new(access.clone());
    let mut listeners = Vec::new();
    for registered in components::all() {
        let listener = switchboard_kit::grpc::bind("127.0.0.1:0").await?;
        peers.set_url(registered.info, format!("http://{}", listener.local_addr()?));
        listeners.push((registered, listener));
    }
    let file = Arc::new(file);
    let context = Context { file: file.clone(), data_dir: data_dir.clone(), dev: true, peers: peers.clone() };
    let (stop, stopped) = watch::channel(false);
    let mut services = Vec::new();
    for (registered, listener) in listeners {
        let component = (registered.build)(context.clone()).await?;
        services.push(tokio::spawn(component.serve(
            listener,
            access.clone(),
            stopped.clone(),
            std::time::Duration::ZERO,
        )));
    }
    let mut gateway_config = config::gateway(&file, peers.clone())?;
    if let Some(listen) = listen {
        gateway_config.listen = listen;
    }
    let gateway = switchboard_gateway::start(gateway_config).await?;
    let admin = switchboard_kit::metrics::start_admin(Some("127.0.0.1:0"), stopped.clone()).await?;

    // Before the banner: whoever waits for the banner may run `admin` at once.
    let session = DevSession {
        pid: std::process::id(),
        api_base_url: format!("http://{}/v1", gateway.address),
        services: components::all()
            .map(|registered| (registered.info.name.to_owned(), peers.url(registered.info)))
            .collect(),
        service_token: match &access {
            ServiceAccess::Token(token) => Some(token.secret().to_owned()),
            ServiceAccess::Trusted => None,
        },
        redis_url: config::redis(&file)?.0,
    };
    session.write(&data_dir)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "Switchboard dev is running.")?;
    writeln!(out, "  API base URL:        http://{}/v1", gateway.address)?;
    // The portal where it is meant to be opened: passkeys work at the public URL's host only,
    // and a banner that names 127.0.0.1 when that host is localhost sent people to an address
    // whose passkeys fail (issue 55).
    match config::public_url(&file)? {
        Some(public) => writeln!(
            out,
            "  portal:              {}/ (passkeys work at this address only)",
            public.trim_end_matches('/')
        )?,
        None => writeln!(out, "  portal:              http://{}/", gateway.address)?,
    }
    for registered in components::all() {
        let label = format!("{} gRPC:", registered.info.name);
        writeln!(out, "  {label:<21}{}", peers.url(registered.info))?;
    }
    if let Some(admin) = admin {
        writeln!(out, "  metrics:             http://{admin}/metrics")?;
    }
    writeln!(out, "  data directory:      {}", data_dir.display())?;
    if let ServiceAccess::Token(token) = &access {
        writeln!(out, "  service token:       {}", token.secret())?;
    }
    if let Some((team, secret)) = demo {
        writeln!(out, "Created the demo team {DEMO_TEAM} ({team}), an agency with {DEMO_CREDITS} credits.")?;
        writeln!(out, "  API key (shown once, keep it): {secret}")?;
    }
    // Listening before the ready line: a SIGTERM right after it must stop the platform cleanly.
    let signals = switchboard_kit::shutdown::Signals::listen();
    writeln!(out, "Stop with Ctrl-C.")?;
    out.flush()?;
    drop(out);

    signals.wait().await;
    DevSession::remove(&data_dir);
    gateway.shutdown().await;
    let _ = stop.send(true);
    for service in services {
        service.await.context("service task")??;
    }
    Ok(())
}

/// On the first start (no team yet): a demo agency team and its key.
async fn create_demo_team_once(identity_url: &str) -> anyhow::Result<Option<(String, String)>> {
    let period = switchboard_identity::AccountSettings::from_env()?.billing_period_ms;
    let identity = IdentityStore::open(identity_url).await?.with_billing_period(period);
    let created = if identity.count_teams().await? == 0 { Some(create_demo_team(&identity).await?) } else { None };
    identity.db().close().await;
    Ok(created)
}

async fn create_demo_team(identity: &IdentityStore) -> anyhow::Result<(String, String)> {
    let team = identity
        .create_team(NewTeam {
            name: DEMO_TEAM.to_owned(),
            owns_agency: true,
            initial_credits: DEMO_CREDITS,
            ..NewTeam::default()
        })
        .await?;
    let key = identity.create_key(&team.id, "dev key", KeyAccess::Full).await?;
    Ok((team.id, key.secret))
}
