//! The public edge of Switchboard: a pingora server that authenticates `X-API-Key`,
//! applies agency scoping and rate limits, and translates the REST API into gRPC calls
//! to the services. Services never see HTTP, keys or limits.

mod app;
mod auth;
mod body;
mod cache;
mod call;
mod combine;
pub mod config;
mod handlers;
pub mod limits;
mod mcp;
pub mod openapi;
mod router;
pub mod routes;
mod scope;
pub mod server;
mod services;
mod validate;
mod views;

pub use config::GatewayConfig;
pub use server::{RunningGateway, start};
