//! One component per process, as each Kubernetes Deployment runs it.

use std::path::Path;

use clap::ValueEnum;
use switchboard_identity::IdentityStore;

use crate::config::{self, FileConfig};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Component {
    Gateway,
    Identity,
}

pub async fn run(file: &FileConfig, component: Component) -> anyhow::Result<()> {
    let _telemetry = switchboard_kit::telemetry::init(match component {
        Component::Gateway => "switchboard-gateway",
        Component::Identity => "switchboard-identity",
    });
    match component {
        Component::Gateway => {
            let gateway = switchboard_gateway::start(config::gateway(file)?).await?;
            println!("gateway listening on http://{}/v1", gateway.address);
            switchboard_kit::shutdown::signal().await;
            gateway.shutdown().await;
        }
        Component::Identity => {
            let data_dir = config::data_dir(file, None);
            let store = IdentityStore::open(&config::identity_database_url(file, &data_dir)?).await?;
            let listener = switchboard_kit::grpc::bind(&config::identity_listen(file)).await?;
            println!("identity gRPC listening on {}", listener.local_addr()?);
            switchboard_kit::grpc::serve(
                "switchboard.v1.IdentityService",
                listener,
                switchboard_identity::routes(store.clone()),
                switchboard_kit::shutdown::signal(),
            )
            .await?;
            store.db().close().await;
        }
    }
    Ok(())
}

pub async fn migrate(file: &FileConfig, component: Component, data_dir: Option<&Path>) -> anyhow::Result<()> {
    let data_dir = config::data_dir(file, data_dir);
    match component {
        Component::Gateway => println!("the gateway has no database"),
        Component::Identity => {
            IdentityStore::open(&config::identity_database_url(file, &data_dir)?).await?;
            println!("identity migrations applied");
        }
    }
    Ok(())
}
