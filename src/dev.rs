//! `switchboard dev`: every component in one process, SQLite files in the data directory,
//! the in-process rate limiter (unless REDIS_URL is set), loopback gRPC between them.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use switchboard_identity::IdentityStore;
use switchboard_identity::store::NewTeam;
use switchboard_proto::v1::KeyAccess;
use tokio::sync::watch;

use crate::components::{self, Component};
use crate::config::{self, FileConfig};
use crate::serve::knowledgebase_settings;

const DEMO_TEAM: &str = "Demo Team";
const DEMO_CREDITS: i64 = 1000;

pub async fn run(file: &FileConfig, data_dir: Option<&Path>, listen: &str) -> anyhow::Result<()> {
    let _telemetry = switchboard_kit::telemetry::init("switchboard");
    let data_dir = config::data_dir(file, data_dir);
    std::fs::create_dir_all(&data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
    let data_dir = data_dir.canonicalize().context("resolving the data directory")?;

    let (identity, identity_store) = components::identity(&config::sqlite_in(&data_dir, "identity")?).await?;
    let demo =
        if identity_store.count_teams().await? == 0 { Some(create_demo_team(&identity_store).await?) } else { None };
    let agents = components::agents(&config::sqlite_in(&data_dir, "agents")?).await?;
    let knowledgebase = components::knowledgebase(knowledgebase_settings(file, &data_dir, true)?).await?;

    let (stop, stopped) = watch::channel(false);
    let mut services = Vec::new();
    let mut urls = Vec::new();
    for component in [identity, agents, knowledgebase] {
        let (url, task) = serve_on_loopback(component, stopped.clone()).await?;
        urls.push(url);
        services.push(task);
    }
    let mut gateway_config = config::gateway(file)?;
    gateway_config.listen = listen.to_owned();
    gateway_config.identity_url = urls[0].clone();
    gateway_config.agents_url = urls[1].clone();
    gateway_config.knowledgebase_url = urls[2].clone();
    let gateway = switchboard_gateway::start(gateway_config).await?;

    let mut out = std::io::stdout().lock();
    writeln!(out, "Switchboard dev is running.")?;
    writeln!(out, "  API base URL:        http://{}/v1", gateway.address)?;
    writeln!(out, "  identity gRPC:       {}", urls[0])?;
    writeln!(out, "  agents gRPC:         {}", urls[1])?;
    writeln!(out, "  knowledgebase gRPC:  {}", urls[2])?;
    writeln!(out, "  data directory:      {}", data_dir.display())?;
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
    for service in services {
        service.await.context("service task")??;
    }
    Ok(())
}

async fn serve_on_loopback(
    component: Component,
    stopped: watch::Receiver<bool>,
) -> anyhow::Result<(String, tokio::task::JoinHandle<anyhow::Result<()>>)> {
    let listener = switchboard_kit::grpc::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    Ok((url, tokio::spawn(component.serve(listener, stopped))))
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
