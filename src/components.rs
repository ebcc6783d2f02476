//! What the binary knows of each service of the registry (`switchboard_kit::peers::Service`):
//! the migrations of its database and how to build it. `dev`, `serve` and `migrate` read it.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use switchboard_agents::AgentStore;
use switchboard_agents::prompt::{OPTIMIZE_PROMPT, OptimizePrompt};
use switchboard_conversations::ConversationStore;
use switchboard_crm::CrmStore;
use switchboard_identity::IdentityStore;
use switchboard_identity::sealing::{KEYS_VARIABLE, Sealer};
use switchboard_kit::db::{Db, Migrations};
use switchboard_kit::grpc::{Channel, ServiceAccess};
use switchboard_kit::jobs::{Runner, RunnerConfig};
use switchboard_kit::objects::Objects;
use switchboard_kit::outbox::Relay;
use switchboard_kit::peers::{
    AGENTS, CONVERSATIONS, CRM, IDENTITY, KNOWLEDGEBASE, Peers, Service, ServiceInfo, WEBHOOKS,
};
use switchboard_kit::phone::PhoneRules;
use switchboard_kit::redis_client::RedisClient;
use switchboard_kit::team_versions::TeamVersions;
use switchboard_proto::v1::agents_service_client::AgentsServiceClient;
use switchboard_proto::v1::identity_service_client::IdentityServiceClient;
use switchboard_proto::v1::knowledgebase_service_client::KnowledgebaseServiceClient;
use switchboard_proto::v1::webhooks_service_client::WebhooksServiceClient;
use switchboard_webhooks::WebhookStore;
use switchboard_webhooks::deliver::Deliverer;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tonic::service::Routes;

use crate::config::{self, FileConfig};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Background = Box<dyn FnOnce(watch::Receiver<bool>) -> BoxFuture<()> + Send>;

/// What a service is built from.
#[derive(Clone)]
pub struct Context {
    pub file: Arc<FileConfig>,
    pub data_dir: PathBuf,
    /// `switchboard dev`: every database is a SQLite file in the data directory.
    pub dev: bool,
    /// The other services, for the ones that call them.
    pub peers: Peers,
}

/// How long one service waits on another before the call fails.
const PEER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl Context {
    fn channel(&self, service: &ServiceInfo) -> anyhow::Result<Channel> {
        self.peers.channel(service, PEER_TIMEOUT)
    }

    /// Hands the events a service writes to its outbox to the webhooks service.
    fn relay(&self, db: &Db) -> anyhow::Result<Background> {
        let relay = Relay::new(db.clone(), WebhooksServiceClient::new(self.channel(&WEBHOOKS)?));
        Ok(Box::new(move |stop| Box::pin(relay.run(stop))))
    }

    /// The service's database: in `dev` its SQLite file; otherwise `DATABASE_URL`, the
    /// section's `database_url`, or the SQLite file.
    pub fn database_url(&self, service: &ServiceInfo) -> anyhow::Result<String> {
        if self.dev {
            config::sqlite_in(&self.data_dir, service.name)
        } else {
            config::database_url(self.file.section(service).database_url, &self.data_dir, service.name)
        }
    }
}

#[derive(Clone, Copy)]
pub struct Registered {
    pub info: &'static ServiceInfo,
    pub migrations: &'static Migrations,
    pub build: Build,
}

type Build = fn(Context) -> BoxFuture<anyhow::Result<Component>>;

/// How `service` is built: exhaustive, so a new variant of [`Service`] does not compile until
/// it has its database and builder here.
pub fn registered(service: Service) -> Registered {
    let (migrations, build): (&'static Migrations, Build) = match service {
        Service::Identity => (&switchboard_identity::MIGRATIONS, |context| Box::pin(identity(context))),
        Service::Agents => (&switchboard_agents::MIGRATIONS, |context| Box::pin(agents(context))),
        Service::Knowledgebase => (&switchboard_knowledgebase::MIGRATIONS, |context| Box::pin(knowledgebase(context))),
        Service::Conversations => (&switchboard_conversations::MIGRATIONS, |context| Box::pin(conversations(context))),
        Service::Crm => (&switchboard_crm::MIGRATIONS, |context| Box::pin(crm(context))),
        Service::Webhooks => (&switchboard_webhooks::MIGRATIONS, |context| Box::pin(webhooks(context))),
    };
    Registered { info: service.info(), migrations, build }
}

/// Every service, in the order `switchboard dev` starts them.
pub fn all() -> impl Iterator<Item = Registered> {
    Service::ALL.into_iter().map(registered)
}

pub fn find(name: &str) -> Option<Registered> {
    ServiceInfo::find(name).map(|info| registered(info.service))
}

/// A built service: its gRPC routes and the background work that goes with it (job runners,
/// the index drainer).
pub struct Component {
    pub info: &'static ServiceInfo,
    routes: Routes,
    background: Vec<Background>,
    databases: Vec<Db>,
}

/// Where changes to teams are announced to gateways, when the platform has a Redis.
pub fn team_versions(file: &FileConfig) -> anyhow::Result<Option<TeamVersions>> {
    let (url, timeout) = config::redis(file)?;
    url.map(|url| team_versions_at(&url, timeout)).transpose()
}

/// Team versions in the Redis at `url`.
pub fn team_versions_at(url: &str, timeout: std::time::Duration) -> anyhow::Result<TeamVersions> {
    let fallback = "team versions are not published; gateways keep identities for their cache lifetime";
    Ok(TeamVersions::new(RedisClient::connect(url, timeout, fallback)?))
}

/// The keys that seal TOTP secrets: `SWITCHBOARD_ENCRYPTION_KEYS`; in `dev` without it, a key
/// kept in the data directory (readable by its owner only), made on the first start. A
/// deployment must set the variable: a key that a restart loses would leave every
/// authenticator app unreadable.
fn sealer(context: &Context) -> anyhow::Result<Sealer> {
    use anyhow::Context as _;
    if let Some(sealer) = Sealer::from_env()? {
        return Ok(sealer);
    }
    anyhow::ensure!(
        context.dev,
        "{KEYS_VARIABLE} is not set: the identity service seals TOTP secrets with it. Set it to 'k1:' followed by \
         32 random bytes in base64 (e.g. k1:$(head -c 32 /dev/urandom | base64)); see docs/configuration.md"
    );
    let path = context.data_dir.join("encryption-keys");
    if !path.exists() {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&path).with_context(|| format!("creating {}", path.display()))?;
        std::io::Write::write_all(&mut file, Sealer::new_key("dev").as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let keys = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Sealer::parse(&keys).with_context(|| format!("the keys in {}", path.display()))
}

async fn identity(context: Context) -> anyhow::Result<Component> {
    let settings = switchboard_identity::AccountSettings::from_env()?;
    let store = IdentityStore::open(&context.database_url(&IDENTITY)?)
        .await?
        .with_billing_period(settings.billing_period_ms)
        .with_sealer(sealer(&context)?);
    let resealed =
        store.reseal_totp_secrets().await.map_err(|error| anyhow::anyhow!("sealing TOTP secrets: {error}"))?;
    if resealed > 0 {
        tracing::info!(resealed, "TOTP secrets sealed under the current key");
    }
    let allowances = store.clone();
    let every = switchboard_identity::allowances::interval(settings.billing_period_ms);
    let versions = team_versions(&context.file)?;
    let top_up_versions = versions.clone();
    Ok(Component {
        info: &IDENTITY,
        routes: switchboard_identity::routes(
            store.clone(),
            versions,
            settings,
            switchboard_identity::mail::Mailer::from_env()?,
            switchboard_identity::sso::SsoHttp::from_env()?,
        ),
        background: vec![
            context.relay(store.db())?,
            Box::new(move |stop| {
                Box::pin(switchboard_identity::allowances::run(allowances, top_up_versions, every, stop))
            }),
        ],
        databases: vec![store.db().clone()],
    })
}

async fn agents(context: Context) -> anyhow::Result<Component> {
    let store = AgentStore::open(&context.database_url(&AGENTS)?).await?;
    let runner = Runner::new(store.db().clone(), RunnerConfig::from_env())
        .component(AGENTS.name)
        .handle(OPTIMIZE_PROMPT, OptimizePrompt::new(store.clone()));
    let knowledgebases = KnowledgebaseServiceClient::new(context.channel(&KNOWLEDGEBASE)?);
    let feed = switchboard_agents::watch::Feed::new(store.clone()).await?;
    let try_it =
        switchboard_agents::try_it::TryIt::new(switchboard_kit::llm::ChatConfig::from_env(), knowledgebases.clone())?;
    let routes = switchboard_agents::routes(store.clone(), runner.waker(), knowledgebases, feed.clone(), try_it);
    Ok(Component {
        info: &AGENTS,
        routes,
        background: vec![
            Box::new(move |stop| Box::pin(runner.run(stop))),
            Box::new(move |stop| Box::pin(feed.run(stop))),
            context.relay(store.db())?,
        ],
        databases: vec![store.db().clone()],
    })
}

async fn knowledgebase(context: Context) -> anyhow::Result<Component> {
    let database_url = context.database_url(&KNOWLEDGEBASE)?;
    let settings = config::knowledgebase(&context.file, &context.data_dir, database_url)?;
    let knowledge = switchboard_knowledgebase::open(settings.clone()).await?;
    let agents = AgentsServiceClient::new(context.channel(&AGENTS)?);
    let runner = switchboard_knowledgebase::runner(&knowledge, &settings, RunnerConfig::from_env(), agents)?
        .component(KNOWLEDGEBASE.name);
    let sync = knowledge.sync.clone();
    let scheduled = knowledge.clone();
    let db = knowledge.store.db().clone();
    let identity = IdentityServiceClient::new(context.channel(&IDENTITY)?);
    let routes = switchboard_knowledgebase::routes(knowledge, identity);
    Ok(Component {
        info: &KNOWLEDGEBASE,
        routes,
        background: vec![
            Box::new(move |stop| Box::pin(sync.drain(stop))),
            Box::new(move |stop| Box::pin(runner.run(stop))),
            Box::new(move |stop| Box::pin(switchboard_knowledgebase::schedule::run(scheduled, stop))),
            context.relay(&db)?,
        ],
        databases: vec![db],
    })
}

async fn conversations(context: Context) -> anyhow::Result<Component> {
    let store = ConversationStore::open(&context.database_url(&CONVERSATIONS)?).await?;
    let peers = switchboard_conversations::service::Peers {
        identity: IdentityServiceClient::new(context.channel(&IDENTITY)?),
        agents: AgentsServiceClient::new(context.channel(&AGENTS)?),
    };
    let objects = Objects::open(&config::objects(&context.file, &context.data_dir))?;
    let routes = switchboard_conversations::service::routes(store.clone(), PhoneRules::from_env()?, peers, objects);
    let background = vec![context.relay(store.db())?];
    Ok(Component { info: &CONVERSATIONS, routes, background, databases: vec![store.db().clone()] })
}

async fn crm(context: Context) -> anyhow::Result<Component> {
    let store = CrmStore::open(&context.database_url(&CRM)?, PhoneRules::from_env()?).await?;
    let routes =
        switchboard_crm::service::routes(store.clone(), IdentityServiceClient::new(context.channel(&IDENTITY)?));
    let background = vec![context.relay(store.db())?];
    Ok(Component { info: &CRM, routes, background, databases: vec![store.db().clone()] })
}

async fn webhooks(context: Context) -> anyhow::Result<Component> {
    let store = WebhookStore::open(&context.database_url(&WEBHOOKS)?).await?;
    let settings = switchboard_webhooks::Settings::from_env();
    let wake = Arc::new(Notify::new());
    let deliverer = Deliverer::new(store.clone(), settings.clone(), wake.clone())?;
    let peers = switchboard_webhooks::service::Peers {
        agents: AgentsServiceClient::new(context.channel(&AGENTS)?),
        identity: IdentityServiceClient::new(context.channel(&IDENTITY)?),
    };
    let routes = switchboard_webhooks::service::routes(store.clone(), settings, wake, peers);
    Ok(Component {
        info: &WEBHOOKS,
        routes,
        background: vec![Box::new(move |stop| Box::pin(deliverer.run(stop)))],
        databases: vec![store.db().clone()],
    })
}

impl Component {
    /// Serves until `stop` turns true and `drain` has passed (see `grpc::serve`): calls in
    /// flight finish, background work stops, then the databases are closed.
    pub async fn serve(
        self,
        listener: TcpListener,
        access: ServiceAccess,
        stop: watch::Receiver<bool>,
        drain: std::time::Duration,
    ) -> anyhow::Result<()> {
        for db in &self.databases {
            switchboard_kit::metrics::observe_pool(self.info.name, db.pool());
        }
        let mut tasks: Vec<_> = self.background.into_iter().map(|work| tokio::spawn(work(stop.clone()))).collect();
        let (ready, readiness) = watch::channel(true);
        let databases = self.databases.clone();
        tasks.push(tokio::spawn(crate::readiness::follow_databases(self.info.name, databases, ready, stop.clone())));
        let mut stopped = stop.clone();
        let stopping = async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        };
        let (grpc, routes) = (self.info.grpc, self.routes);
        let served = switchboard_kit::grpc::serve(grpc, listener, routes, access, stopping, drain, readiness).await;
        // Background work and the databases get the same grace as the calls in flight: a task
        // or a connection stuck on something that never comes does not keep the process up.
        let grace = switchboard_kit::grpc::STOP_GRACE;
        for task in tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout(grace, task).await.is_err() {
                tracing::warn!(component = self.info.name, "background work did not stop in time; aborted");
                abort.abort();
            }
        }
        for db in self.databases {
            if tokio::time::timeout(grace, db.close()).await.is_err() {
                tracing::warn!(component = self.info.name, "database connections still busy at the stop; left open");
            }
        }
        served
    }
}

/// A stop switch that turns on at SIGTERM or SIGINT.
pub fn stop_on_signal() -> watch::Receiver<bool> {
    let (stop, stopped) = watch::channel(false);
    let stop = Arc::new(stop);
    // Listening now, not when the task first runs: the process may say it is ready before that.
    let signals = switchboard_kit::shutdown::Signals::listen();
    tokio::spawn(async move {
        signals.wait().await;
        let _ = stop.send(true);
    });
    stopped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &str) -> String {
        let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
        std::fs::read_to_string(&full).unwrap_or_else(|error| panic!("reading {}: {error}", full.display()))
    }

    /// The top-level block of `key:` in a YAML file: its line and the indented lines after it.
    fn yaml_block(text: &str, key: &str) -> Option<String> {
        let mut lines = text.lines().skip_while(|line| *line != format!("{key}:"));
        let first = lines.next()?;
        let rest = lines.take_while(|line| line.is_empty() || line.starts_with(' ') || line.starts_with('#'));
        Some(std::iter::once(first).chain(rest).collect::<Vec<_>>().join("\n"))
    }

    /// Every service of the registry is deployed by the plain manifests and by the chart, on
    /// its port, with its migrations, its URL and its database secret.
    #[test]
    fn every_service_of_the_registry_is_in_the_manifests_and_the_chart() {
        let kustomization = read("k8s/kustomization.yaml");
        let config_map = read("k8s/config.yaml");
        let values = read("helm/switchboard/values.yaml");
        let chart_services = read("helm/switchboard/templates/services.yaml");
        let chart_policies = read("helm/switchboard/templates/networkpolicy.yaml");
        let chart_helpers = read("helm/switchboard/templates/_helpers.tpl");
        for registered in all() {
            let (name, port) = (registered.info.name, registered.info.default_port);
            let manifest = read(&format!("k8s/{name}.yaml"));
            assert!(kustomization.contains(&format!("  - {name}.yaml")), "k8s/kustomization.yaml lists {name}.yaml");
            for expected in [
                format!("name: {name}\n"),
                format!("args: [\"serve\", \"{name}\"]"),
                format!("args: [\"migrate\", \"{name}\"]"),
                format!("containerPort: {port} }}"),
                format!("{}_DATABASE_URL", name.to_ascii_uppercase()),
                format!("name: {name}-replicas\n"),
                "clusterIP: None".to_owned(),
            ] {
                assert!(manifest.contains(&expected), "k8s/{name}.yaml has {expected:?}");
            }
            // The headless Service (one DNS record per ready pod), which channels balance over.
            let url = format!("{}: http://{name}-replicas:{port}", registered.info.url_variable());
            assert!(config_map.contains(&url), "k8s/config.yaml has {url:?}");

            let block = yaml_block(&values, name).unwrap_or_else(|| panic!("helm values have a `{name}:` section"));
            assert!(block.contains(&format!("  port: {port}\n")), "helm values give {name} port {port}: {block}");
            let listed = format!("\"{name}\"");
            assert!(chart_services.contains(&listed), "the chart's services.yaml deploys {name}");
            assert!(chart_policies.contains(&listed), "the chart's networkpolicy.yaml covers {name}");
            let chart_url =
                format!("{}, value: \"http://{{{{ .Release.Name }}}}-{name}-replicas:", registered.info.url_variable());
            assert!(chart_helpers.contains(&chart_url), "the chart's _helpers.tpl gives {chart_url:?}");
        }
    }
}
