//! Integration tests: the real platform started on ephemeral ports, used over HTTP.

#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod accounts;
mod admin;
mod agency_lifecycle;
mod agent_settings;
mod agents;
mod api_keys;
mod audit;
mod auth;
mod backends;
mod balancing;
mod call_outcomes;
mod conversations;
mod credits;
mod crm;
mod docs;
mod edges;
mod embedding_budget;
mod errors;
mod grpc;
mod idempotency;
mod isolation;
mod knowledge_sources;
mod knowledgebase;
mod lifecycle;
mod limits;
mod mail;
mod mcp;
mod portal;
mod replicas;
mod runtime_contract;
mod scoping;
mod sources;
mod sso;
mod telemetry;
mod test_chat;
mod trust;
mod trust_accounts;
mod upload_limits;
mod usage;
mod webhooks;
