//! One component per process, as each Kubernetes Deployment runs it.

use std::path::Path;

use clap::ValueEnum;

use crate::components;
use crate::config::{self, FileConfig};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Component {
    Gateway,
    Identity,
    Agents,
    Knowledgebase,
}

pub async fn run(file: &FileConfig, component: Component) -> anyhow::Result<()> {
    let _telemetry = switchboard_kit::telemetry::init(match component {
        Component::Gateway => "switchboard-gateway",
        Component::Identity => "switchboard-identity",
        Component::Agents => "switchboard-agents",
        Component::Knowledgebase => "switchboard-knowledgebase",
    });
    let data_dir = config::data_dir(file, None);
    let (service, listen) = match component {
        Component::Gateway => {
            let gateway = switchboard_gateway::start(config::gateway(file)?).await?;
            println!("gateway listening on http://{}/v1", gateway.address);
            switchboard_kit::shutdown::signal().await;
            gateway.shutdown().await;
            return Ok(());
        }
        Component::Identity => {
            let url = config::database_url(file.identity.database_url.as_ref(), &data_dir, "identity")?;
            (components::identity(&url).await?.0, config::grpc_listen(file.identity.listen.as_ref(), 50051))
        }
        Component::Agents => {
            let url = config::database_url(file.agents.database_url.as_ref(), &data_dir, "agents")?;
            (components::agents(&url).await?, config::grpc_listen(file.agents.listen.as_ref(), 50052))
        }
        Component::Knowledgebase => {
            let settings = knowledgebase_settings(file, &data_dir, false)?;
            (components::knowledgebase(settings).await?, config::grpc_listen(file.knowledgebase.listen.as_ref(), 50053))
        }
    };
    let listener = switchboard_kit::grpc::bind(&listen).await?;
    let name = format!("{component:?}").to_lowercase();
    println!("{name} gRPC listening on {}", listener.local_addr()?);
    service.serve(listener, components::stop_on_signal()).await
}

/// The knowledgebase's settings; in `dev` (`embedded`) its database is always the SQLite
/// file in the data directory.
pub fn knowledgebase_settings(
    file: &FileConfig,
    data_dir: &Path,
    embedded: bool,
) -> anyhow::Result<switchboard_knowledgebase::Settings> {
    let database_url = if embedded {
        config::sqlite_in(data_dir, "knowledgebase")?
    } else {
        config::database_url(file.knowledgebase.database_url.as_ref(), data_dir, "knowledgebase")?
    };
    config::knowledgebase(file, data_dir, database_url)
}

pub async fn migrate(file: &FileConfig, component: Component, data_dir: Option<&Path>) -> anyhow::Result<()> {
    let data_dir = config::data_dir(file, data_dir);
    match component {
        Component::Gateway => println!("the gateway has no database"),
        Component::Identity => {
            let url = config::database_url(file.identity.database_url.as_ref(), &data_dir, "identity")?;
            switchboard_identity::IdentityStore::open(&url).await?.db().close().await;
        }
        Component::Agents => {
            let url = config::database_url(file.agents.database_url.as_ref(), &data_dir, "agents")?;
            switchboard_agents::AgentStore::open(&url).await?.db().close().await;
        }
        Component::Knowledgebase => {
            let url = config::database_url(file.knowledgebase.database_url.as_ref(), &data_dir, "knowledgebase")?;
            switchboard_knowledgebase::store::KnowledgeStore::open(&url).await?.db().close().await;
        }
    }
    println!("{component:?} migrations applied");
    Ok(())
}
