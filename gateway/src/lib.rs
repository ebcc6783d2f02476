//! The public edge of Switchboard: a pingora server that authenticates `X-API-Key`,
//! applies agency scoping and rate limits, and translates the REST API into gRPC calls
//! to the services. Services never see HTTP, keys or limits.
//!
//! Every operation is declared once, in `api`, on the types of `endpoint`; the router, the
//! OpenAPI description, the MCP tools and the skill file are read off those declarations.

mod api;
mod app;
mod audit;
mod auth;
mod body;
mod cache;
mod call;
mod combine;
mod compression;
pub mod config;
mod endpoint;
mod idempotency;
pub mod limits;
mod mcp;
mod metrics;
pub mod openapi;
pub mod origin;
mod pipeline;
pub mod playback;
pub mod portal;
mod principal;
mod reply;
mod router;
mod scope;
pub mod server;
mod services;
mod sessions;
mod spreadsheet;
mod throttle;

pub use config::GatewayConfig;
pub use server::{RunningGateway, start};
