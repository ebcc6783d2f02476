//! One module per endpoint group; each handler turns a checked [`crate::call::Call`] into
//! gRPC calls and a [`crate::call::Reply`].

pub mod agency;
pub mod agents;
pub mod identity;
pub mod knowledgebase;
pub mod sources;
pub mod users;
