//! What a handler answers, typed: the status and the body's schema come from the type, so the
//! OpenAPI description says what is sent. Every answer schema is closed
//! (`additionalProperties: false`): a member the type does not declare cannot be sent.

use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::Serialize;
pub use switchboard_api::envelope::{Accepted, Created, Data, List, Page, Updated};

use crate::reply::Reply;

const JSON: &str = "application/json";

/// A successful answer.
pub trait Answer: JsonSchema + Send + Sized + 'static {
    const STATUS: u16;
    /// The media type of the answer's body, as the OpenAPI description gives it.
    const MEDIA_TYPE: &'static str = JSON;

    fn into_reply(self) -> Reply;
}

/// Serialized once, straight to the bytes sent: no intermediate `Value`.
pub fn serialized(status: u16, answer: &impl Serialize) -> Reply {
    match serde_json::to_vec(answer) {
        Ok(body) => Reply::raw(status, JSON, bytes::Bytes::from(body)),
        Err(error) => Reply::error(&switchboard_kit::ServiceError::internal(error)),
    }
}

/// The envelopes: each is serialized as it is.
macro_rules! envelope_answers {
    ($($envelope:ident => $status:literal),* $(,)?) => {$(
        impl<T: Serialize + JsonSchema + Send + 'static> Answer for $envelope<T> {
            const STATUS: u16 = $status;

            fn into_reply(self) -> Reply {
                serialized(Self::STATUS, &self)
            }
        }
    )*};
}

envelope_answers!(Data => 200, List => 200, Created => 201, Updated => 200, Accepted => 202, Page => 200);

/// Wrappers of an answer `R` are described as `R`: the OpenAPI description names the bytes sent.
macro_rules! described_as_inner {
    ($wrapper:ident) => {
        impl<R: JsonSchema> JsonSchema for $wrapper<R> {
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
    };
}

/// An answer `R` serialized ahead, for a handler that keeps the bytes of an answer that has
/// not changed and sends them again. Described as `R`.
pub struct Rendered<R> {
    body: bytes::Bytes,
    answer: PhantomData<fn() -> R>,
}

impl<R: Answer + Serialize> Rendered<R> {
    pub fn new(answer: &R) -> Result<Self, switchboard_kit::ServiceError> {
        let body = serde_json::to_vec(answer).map_err(switchboard_kit::ServiceError::internal)?;
        Ok(Self { body: body.into(), answer: PhantomData })
    }

    /// An answer rendered before (`Rendered::bytes`), sent again as it was.
    pub fn again(body: bytes::Bytes) -> Self {
        Self { body, answer: PhantomData }
    }

    pub fn bytes(&self) -> bytes::Bytes {
        self.body.clone()
    }
}

impl<R> Clone for Rendered<R> {
    fn clone(&self) -> Self {
        Self { body: self.body.clone(), answer: PhantomData }
    }
}

described_as_inner!(Rendered);

impl<R: Answer> Answer for Rendered<R> {
    const STATUS: u16 = R::STATUS;

    fn into_reply(self) -> Reply {
        Reply::raw(Self::STATUS, JSON, self.body)
    }
}

/// An answer that also sets (or clears) the session cookie: the body and status are the inner
/// answer's, with a `Set-Cookie` header.
pub struct WithCookie<R> {
    pub answer: R,
    pub cookie: String,
}

described_as_inner!(WithCookie);

impl<R: Answer> Answer for WithCookie<R> {
    const STATUS: u16 = R::STATUS;

    fn into_reply(self) -> Reply {
        self.answer.into_reply().with_header("Set-Cookie", self.cookie)
    }
}
