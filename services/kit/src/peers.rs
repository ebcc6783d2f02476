//! The services of Switchboard, and how one component reaches another.
//!
//! [`Service`] is the one registry: every service is a variant, and what each consumer needs
//! of it is an exhaustive match on it (its name, gRPC services and default port here; its
//! database and builder in the binary's `components`; its config file section; the gateway's
//! client). Adding a service is a variant, and the compiler then names every place that must
//! say something of it; `switchboard dev`'s banner, `serve`, `migrate` and the manifests test
//! iterate [`Service::ALL`]. [`Peers`] holds the URLs a process was given plus the service
//! token its calls carry.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::grpc::{Channel, ServiceAccess};

/// A service of the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    Identity,
    Agents,
    Knowledgebase,
    Conversations,
    Crm,
    Webhooks,
}

impl Service {
    /// Every service, in the order `switchboard dev` starts them.
    pub const ALL: [Service; 6] = [
        Service::Identity,
        Service::Agents,
        Service::Knowledgebase,
        Service::Conversations,
        Service::Crm,
        Service::Webhooks,
    ];

    pub const fn info(self) -> &'static ServiceInfo {
        match self {
            Service::Identity => &IDENTITY,
            Service::Agents => &AGENTS,
            Service::Knowledgebase => &KNOWLEDGEBASE,
            Service::Conversations => &CONVERSATIONS,
            Service::Crm => &CRM,
            Service::Webhooks => &WEBHOOKS,
        }
    }
}

/// What every consumer reads of a service.
#[derive(Debug, PartialEq, Eq)]
pub struct ServiceInfo {
    pub service: Service,
    /// As `switchboard serve <name>` and the config file's section name it.
    pub name: &'static str,
    /// The gRPC services it serves (full names), as health checks and reflection list them.
    pub grpc: &'static [&'static str],
    pub default_port: u16,
}

pub const IDENTITY: ServiceInfo = ServiceInfo {
    service: Service::Identity,
    name: "identity",
    grpc: &["switchboard.v1.IdentityService"],
    default_port: 50051,
};
pub const AGENTS: ServiceInfo = ServiceInfo {
    service: Service::Agents,
    name: "agents",
    grpc: &["switchboard.v1.AgentsService"],
    default_port: 50052,
};
pub const KNOWLEDGEBASE: ServiceInfo = ServiceInfo {
    service: Service::Knowledgebase,
    name: "knowledgebase",
    grpc: &["switchboard.v1.KnowledgebaseService"],
    default_port: 50053,
};

pub const CONVERSATIONS: ServiceInfo = ServiceInfo {
    service: Service::Conversations,
    name: "conversations",
    grpc: &["switchboard.v1.ConversationsService", "switchboard.v1.ConversationIngest"],
    default_port: 50054,
};

pub const CRM: ServiceInfo =
    ServiceInfo { service: Service::Crm, name: "crm", grpc: &["switchboard.v1.CrmService"], default_port: 50055 };

pub const WEBHOOKS: ServiceInfo = ServiceInfo {
    service: Service::Webhooks,
    name: "webhooks",
    grpc: &["switchboard.v1.WebhooksService"],
    default_port: 50056,
};

impl ServiceInfo {
    pub fn find(name: &str) -> Option<&'static ServiceInfo> {
        Service::ALL.into_iter().map(Service::info).find(|service| service.name == name)
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
        let all = Service::ALL.map(Service::info);
        for (index, service) in all.iter().enumerate() {
            for other in &all[index + 1..] {
                assert_ne!(service.name, other.name);
                assert_ne!(service.default_port, other.default_port);
            }
            assert_eq!(ServiceInfo::find(service.name), Some(*service));
            assert_eq!(service.service.info(), *service, "{} names itself", service.name);
        }
        assert_eq!(IDENTITY.url_variable(), "SWITCHBOARD_IDENTITY_URL");
    }
}
