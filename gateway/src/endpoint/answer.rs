//! What a handler answers, typed: the status and the body's schema come from the type, so the
//! OpenAPI description says what is sent. Every answer schema is closed
//! (`additionalProperties: false`): a member the type does not declare cannot be sent.

use schemars::JsonSchema;
use serde::Serialize;
pub use switchboard_api::envelope::{Accepted, Created, Data, List, Page, Updated};

use crate::call::Reply;

const JSON: &str = "application/json";

/// A successful answer.
pub trait Answer: Serialize + JsonSchema + Send + Sized + 'static {
    const STATUS: u16;

    /// Serialized once, straight to the bytes sent: no intermediate `Value`.
    fn into_reply(self) -> Reply {
        match serde_json::to_vec(&self) {
            Ok(body) => Reply::raw(Self::STATUS, JSON, bytes::Bytes::from(body)),
            Err(error) => Reply::error(&switchboard_kit::ServiceError::internal(error)),
        }
    }
}

impl<T: Serialize + JsonSchema + Send + 'static> Answer for Data<T> {
    const STATUS: u16 = 200;
}
impl<T: Serialize + JsonSchema + Send + 'static> Answer for List<T> {
    const STATUS: u16 = 200;
}
impl<T: Serialize + JsonSchema + Send + 'static> Answer for Created<T> {
    const STATUS: u16 = 201;
}
impl<T: Serialize + JsonSchema + Send + 'static> Answer for Updated<T> {
    const STATUS: u16 = 200;
}
impl<T: Serialize + JsonSchema + Send + 'static> Answer for Accepted<T> {
    const STATUS: u16 = 202;
}
impl<T: Serialize + JsonSchema + Send + 'static> Answer for Page<T> {
    const STATUS: u16 = 200;
}
