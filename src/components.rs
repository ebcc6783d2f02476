//! Each service as a component: its gRPC routes and the background work that goes with
//! it (job runners, the index drainer). `dev` and `serve` run them the same way.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use switchboard_agents::AgentStore;
use switchboard_agents::prompt::{OPTIMIZE_PROMPT, OptimizePrompt};
use switchboard_identity::IdentityStore;
use switchboard_kit::db::Db;
use switchboard_kit::jobs::{Runner, RunnerConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::service::Routes;

type Background = Box<dyn FnOnce(watch::Receiver<bool>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

pub struct Component {
    /// The gRPC service name, as health checks ask for it.
    pub name: &'static str,
    routes: Routes,
    background: Vec<Background>,
    databases: Vec<Db>,
}

pub async fn identity(database_url: &str) -> anyhow::Result<(Component, IdentityStore)> {
    let store = IdentityStore::open(database_url).await?;
    let component = Component {
        name: "switchboard.v1.IdentityService",
        routes: switchboard_identity::routes(store.clone()),
        background: Vec::new(),
        databases: vec![store.db().clone()],
    };
    Ok((component, store))
}

pub async fn agents(database_url: &str) -> anyhow::Result<Component> {
    let store = AgentStore::open(database_url).await?;
    let runner = Runner::new(store.db().clone(), RunnerConfig::from_env())
        .handle(OPTIMIZE_PROMPT, OptimizePrompt::new(store.clone()));
    let routes = switchboard_agents::routes(store.clone(), runner.waker());
    Ok(Component {
        name: "switchboard.v1.AgentsService",
        routes,
        background: vec![Box::new(move |stop| Box::pin(runner.run(stop)))],
        databases: vec![store.db().clone()],
    })
}

pub async fn knowledgebase(settings: switchboard_knowledgebase::Settings) -> anyhow::Result<Component> {
    let knowledge = switchboard_knowledgebase::open(settings.clone()).await?;
    let runner = switchboard_knowledgebase::runner(&knowledge, &settings, RunnerConfig::from_env())?;
    let sync = knowledge.sync.clone();
    let db = knowledge.store.db().clone();
    let routes = switchboard_knowledgebase::routes(knowledge);
    Ok(Component {
        name: "switchboard.v1.KnowledgebaseService",
        routes,
        background: vec![
            Box::new(move |stop| Box::pin(sync.drain(stop))),
            Box::new(move |stop| Box::pin(runner.run(stop))),
        ],
        databases: vec![db],
    })
}

impl Component {
    /// Serves until `stop` turns true: calls in flight finish, background work stops,
    /// then the databases are closed.
    pub async fn serve(self, listener: TcpListener, stop: watch::Receiver<bool>) -> anyhow::Result<()> {
        let tasks: Vec<_> = self.background.into_iter().map(|work| tokio::spawn(work(stop.clone()))).collect();
        let mut stopped = stop.clone();
        let served = switchboard_kit::grpc::serve(self.name, listener, self.routes, async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        })
        .await;
        for task in tasks {
            let _ = task.await;
        }
        for db in self.databases {
            db.close().await;
        }
        served
    }
}

/// A stop switch that turns on at SIGTERM or SIGINT.
pub fn stop_on_signal() -> watch::Receiver<bool> {
    let (stop, stopped) = watch::channel(false);
    let stop = Arc::new(stop);
    tokio::spawn(async move {
        switchboard_kit::shutdown::signal().await;
        let _ = stop.send(true);
    });
    stopped
}
