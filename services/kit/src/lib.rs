//! What two or more Switchboard crates share: the error type, the database layer, the gRPC
//! server and client bootstrap (service token included), the service registry, telemetry,
//! time formatting and API-key hashing.

pub mod apikey;
pub mod backoff;
pub mod db;
pub mod dns_lookup;
pub mod egress;
pub mod error;
pub mod grpc;
pub mod jobs;
pub mod limits;
pub mod links;
pub mod listing;
pub mod llm;
pub mod metrics;
pub mod objects;
pub mod outbox;
pub mod peers;
pub mod phone;
pub mod query_spans;
pub mod recent;
pub mod redis_client;
pub mod shutdown;
pub mod signature;
pub mod team_versions;
pub mod telemetry;
pub mod testdb;
pub mod time;
pub mod vocabulary;
pub mod window_budget;
pub mod write_keys;

pub use error::{ErrorKind, FieldViolation, ServiceError, ServiceResult, validate};
