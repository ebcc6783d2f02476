//! One component per process, as each Kubernetes Deployment runs it.

use std::path::Path;
use std::sync::Arc;

use switchboard_kit::grpc::ServiceAccess;

use crate::components::{self, Context};
use crate::config::{self, FileConfig};

/// What `serve` and `migrate` accept: the gateway and every registered service.
pub fn component_names() -> clap::builder::PossibleValuesParser {
    let services = components::all().map(|registered| registered.info.name);
    clap::builder::PossibleValuesParser::new(std::iter::once("gateway").chain(services))
}

pub async fn run(file: FileConfig, component: &str) -> anyhow::Result<()> {
    let _telemetry = switchboard_kit::telemetry::init(&format!("switchboard-{component}"));
    // Refuse to start with open service ports: a token, or the operator's word.
    let access = ServiceAccess::required_from_env()?;
    let peers = config::peers(&file, access.clone());
    // The admin port (metrics) only when SWITCHBOARD_ADMIN_LISTEN names one: processes of one
    // host would otherwise compete for a fixed default.
    let stop = components::stop_on_signal();
    if let Some(admin) = switchboard_kit::metrics::start_admin(None, stop.clone()).await? {
        println!("{component} admin listening on http://{admin}/metrics");
    }
    let drain = config::drain_period()?;
    if component == "gateway" {
        let gateway = switchboard_gateway::start(config::gateway(&file, peers)?).await?;
        println!("gateway listening on http://{}/v1", gateway.address);
        let _ = stop.clone().wait_for(|stop| *stop).await;
        gateway.drain(drain).await;
        gateway.shutdown().await;
        return Ok(());
    }
    let registered = components::find(component).ok_or_else(|| anyhow::anyhow!("no component {component}"))?;
    let listen = config::grpc_listen(&file, registered.info);
    let data_dir = config::data_dir(&file, None);
    let context = Context { file: Arc::new(file), data_dir, dev: false, peers };
    let service = (registered.build)(context).await?;
    let listener = switchboard_kit::grpc::bind(&listen).await?;
    println!("{component} gRPC listening on {}", listener.local_addr()?);
    service.serve(listener, access, stop, drain).await
}

/// The knowledgebase's settings outside `dev`, for the admin commands that open its store.
pub fn knowledgebase_settings(
    file: &FileConfig,
    data_dir: &Path,
) -> anyhow::Result<switchboard_knowledgebase::Settings> {
    let service = &switchboard_kit::peers::KNOWLEDGEBASE;
    let database_url = config::database_url(file.section(service).database_url, data_dir, service.name)?;
    config::knowledgebase(file, data_dir, database_url)
}

pub async fn migrate(file: &FileConfig, component: &str, data_dir: Option<&Path>) -> anyhow::Result<()> {
    let Some(registered) = components::find(component) else {
        println!("the {component} has no database");
        return Ok(());
    };
    let data_dir = config::data_dir(file, data_dir);
    let url = config::database_url(file.section(registered.info).database_url, &data_dir, component)?;
    switchboard_kit::db::Db::connect(&url, registered.migrations).await?.close().await;
    println!("{component} migrations applied");
    Ok(())
}
