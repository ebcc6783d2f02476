//! The answer of an export: a CSV body streamed as it is made, named as a download.

use std::marker::PhantomData;

use schemars::JsonSchema;

use crate::endpoint::Answer;
use crate::reply::{BodyStream, Reply};

/// What a sheet holds: its schema's name, what a row is, the file it downloads as.
pub trait CsvKind: Send + 'static {
    const SCHEMA: &'static str;
    const ROW: &'static str;
    const FILE: &'static str;
}

/// A CSV body of `K`s sent as it is made.
pub struct CsvExport<K>(BodyStream, PhantomData<K>);

impl<K: CsvKind> CsvExport<K> {
    pub fn new(body: BodyStream) -> Self {
        Self(body, PhantomData)
    }
}

impl<K: CsvKind> JsonSchema for CsvExport<K> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        K::SCHEMA.into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": format!("RFC 4180 CSV: a header row, then one {} a row.", K::ROW),
        })
    }
}

impl<K: CsvKind> Answer for CsvExport<K> {
    const STATUS: u16 = 200;
    const MEDIA_TYPE: &'static str = "text/csv";

    fn into_reply(self) -> Reply {
        Reply::stream(Self::STATUS, "text/csv; charset=utf-8".to_owned(), None, self.0)
            .with_header("Content-Disposition", format!("attachment; filename=\"{}\"", K::FILE))
    }
}
