//! `switchboard dev`: every component in one process, SQLite files in the data directory,
//! the in-process rate limiter (unless REDIS_URL is set), loopback gRPC between them.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use switchboard_identity::IdentityStore;
use switchboard_identity::store::NewTeam;
use switchboard_proto::v1::KeyAccess;
use tokio::sync::watch;

use crate::config::{self, FileConfig};

const DEMO_TEAM: &str = "Demo Team";
const DEMO_CREDITS: i64 = 1000;

pub async fn run(file: &FileConfig, data_dir: Option<&Path>, listen: &str) -> anyhow::Result<()> {
    let _telemetry = switchboard_kit::telemetry::init("switchboard");
    let data_dir = config::data_dir(file, data_dir);
    std::fs::create_dir_all(&data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
    let data_dir = data_dir.canonicalize().context("resolving the data directory")?;

    let identity = IdentityStore::open(&switchboard_kit::db::sqlite_url(&data_dir.join("identity.db"))).await?;
    let demo = if identity.count_teams().await? == 0 { Some(create_demo_team(&identity).await?) } else { None };

    let (stop, stopped) = watch::channel(false);
    let identity_listener = switchboard_kit::grpc::bind("127.0.0.1:0").await?;
    let identity_url = format!("http://{}", identity_listener.local_addr()?);
    let identity_task = tokio::spawn(switchboard_kit::grpc::serve(
        "switchboard.v1.IdentityService",
        identity_listener,
        switchboard_identity::routes(identity.clone()),
        wait_for(stopped.clone()),
    ));

    let mut gateway_config = config::gateway(file)?;
    gateway_config.listen = listen.to_owned();
    gateway_config.identity_url = identity_url.clone();
    let gateway = switchboard_gateway::start(gateway_config).await?;

    let mut out = std::io::stdout().lock();
    writeln!(out, "Switchboard dev is running.")?;
    writeln!(out, "  API base URL:   http://{}/v1", gateway.address)?;
    writeln!(out, "  identity gRPC:  {identity_url}")?;
    writeln!(out, "  data directory: {}", data_dir.display())?;
    if let Some((team, secret)) = demo {
        writeln!(out, "Created the demo team {DEMO_TEAM} ({team}), an agency with {DEMO_CREDITS} credits.")?;
        writeln!(out, "  API key (shown once, keep it): {secret}")?;
    }
    writeln!(out, "Stop with Ctrl-C.")?;
    out.flush()?;
    drop(out);

    switchboard_kit::shutdown::signal().await;
    gateway.shutdown().await;
    let _ = stop.send(true);
    identity_task.await.context("identity task")??;
    identity.db().close().await;
    Ok(())
}

async fn wait_for(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
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
