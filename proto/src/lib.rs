//! Generated protobuf types and tonic clients/servers for every Switchboard service.

#![allow(clippy::all, clippy::pedantic)]

pub mod v1 {
    tonic::include_proto!("switchboard.v1");
}

/// The encoded `FileDescriptorSet` of all Switchboard protos, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor.bin"));
