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

/// An answer that also sets (or clears) the session cookie: the body and status are the inner
/// answer's, with a `Set-Cookie` header.
pub struct WithCookie<R> {
    pub answer: R,
    pub cookie: String,
}

impl<R: Serialize> Serialize for WithCookie<R> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.answer.serialize(serializer)
    }
}

impl<R: JsonSchema> JsonSchema for WithCookie<R> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        R::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        R::schema_id()
    }

    fn inline_schema() -> bool {
        R::inline_schema()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        R::json_schema(generator)
    }
}

impl<R: Answer> Answer for WithCookie<R> {
    const STATUS: u16 = R::STATUS;

    fn into_reply(self) -> Reply {
        self.answer.into_reply().with_header("Set-Cookie", self.cookie)
    }
}
