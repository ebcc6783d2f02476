//! The services of Switchboard by name, and how one component reaches another: each service's
//! gRPC names, default port and URL variable are written here once, and [`Peers`] holds the
//! URLs a process was given plus the service token its calls carry.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::grpc::{Channel, ServiceAccess};

/// One service of the platform.
#[derive(Debug, PartialEq, Eq)]
pub struct ServiceInfo {
    /// As `switchboard serve <name>` and the config file's section name it.
    pub name: &'static str,
    /// The gRPC services it serves (full names), as health checks and reflection list them.
    pub grpc: &'static [&'static str],
    pub default_port: u16,
}

pub const IDENTITY: ServiceInfo =
    ServiceInfo { name: "identity", grpc: &["switchboard.v1.IdentityService"], default_port: 50051 };
pub const AGENTS: ServiceInfo =
    ServiceInfo { name: "agents", grpc: &["switchboard.v1.AgentsService"], default_port: 50052 };
pub const KNOWLEDGEBASE: ServiceInfo =
    ServiceInfo { name: "knowledgebase", grpc: &["switchboard.v1.KnowledgebaseService"], default_port: 50053 };

pub const CONVERSATIONS: ServiceInfo = ServiceInfo {
    name: "conversations",
    grpc: &["switchboard.v1.ConversationsService", "switchboard.v1.ConversationIngest"],
    default_port: 50054,
};

pub const CRM: ServiceInfo = ServiceInfo { name: "crm", grpc: &["switchboard.v1.CrmService"], default_port: 50055 };

pub const WEBHOOKS: ServiceInfo =
    ServiceInfo { name: "webhooks", grpc: &["switchboard.v1.WebhooksService"], default_port: 50056 };

/// Every service, in the order `switchboard dev` starts them.
pub const ALL: [&ServiceInfo; 6] = [&IDENTITY, &AGENTS, &KNOWLEDGEBASE, &CONVERSATIONS, &CRM, &WEBHOOKS];

impl ServiceInfo {
    pub fn find(name: &str) -> Option<&'static ServiceInfo> {
        ALL.into_iter().find(|service| service.name == name)
    }

    /// The environment variable with its URL, e.g. `SWITCHBOARD_IDENTITY_URL`.
    pub fn url_variable(&self) -> String {
        format!("SWITCHBOARD_{}_URL", self.name.to_ascii_uppercase())
    }

    /// Where it listens when nothing else is said: its default port on this host.
    pub fn default_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.default_port)
    }
}

/// The other components a process calls, and how its calls are authenticated.
#[derive(Clone, Debug)]
pub struct Peers {
    urls: BTreeMap<&'static str, String>,
    access: ServiceAccess,
}

impl Peers {
    pub fn new(access: ServiceAccess) -> Self {
        Self { urls: BTreeMap::new(), access }
    }

    pub fn set_url(&mut self, service: &ServiceInfo, url: String) {
        self.urls.insert(service.name, url);
    }

    /// The URL given for `service`, else its default.
    pub fn url(&self, service: &ServiceInfo) -> String {
        self.urls.get(service.name).cloned().unwrap_or_else(|| service.default_url())
    }

    pub fn access(&self) -> &ServiceAccess {
        &self.access
    }

    /// A channel to `service` whose calls carry the token; must be called inside the tokio
    /// runtime that will drive it.
    pub fn channel(&self, service: &ServiceInfo, timeout: Duration) -> anyhow::Result<Channel> {
        crate::grpc::channel(&self.url(service), &self.access, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_ports_and_variables_are_unique() {
        for (index, service) in ALL.iter().enumerate() {
            for other in &ALL[index + 1..] {
                assert_ne!(service.name, other.name);
                assert_ne!(service.default_port, other.default_port);
            }
            assert_eq!(ServiceInfo::find(service.name), Some(*service));
        }
        assert_eq!(IDENTITY.url_variable(), "SWITCHBOARD_IDENTITY_URL");
    }
}
