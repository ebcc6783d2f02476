//! The public v1 contract of Switchboard, as types: what each resource looks like to a client
//! (with its conversion from the services' protobuf messages), ids, times, paging, the answer
//! envelopes and the `data` of webhook events.
//!
//! The gateway serves these shapes and derives the OpenAPI description from them; the webhooks
//! service renders event payloads with them, so a receiver reads exactly what the endpoints
//! answer. Nothing here serves HTTP or gRPC: a service can depend on it without the edge.

pub mod access;
pub mod accounts;
pub mod agency;
pub mod agent_settings;
pub mod agents;
pub mod analytics;
pub mod api_keys;
pub mod boards;
pub mod calls;
pub mod chats;
pub mod contacts;
pub mod custom_fields;
pub mod envelope;
pub mod errors;
pub mod events;
pub mod id;
pub mod identity;
pub mod knowledge;
pub mod paging;
pub mod references;
pub mod role;
pub mod sources;
pub mod tags;
pub mod time;
pub mod usage;
pub mod webhooks;

/// The platform's vocabularies (event types, audit actions, statuses), part of this contract.
pub use switchboard_kit::vocabulary;

pub use envelope::{Accepted, Created, Data, List, Page, Pagination, Updated};
pub use id::Id;
pub use time::Timestamp;
