//! The answer of an export: a CSV body streamed as it is made, named as a download. The
//! conversations service streams the rows in chunks (pages of 1,000); each chunk becomes CSV
//! and is written out before the next is asked for (the gRPC stream and the response body both
//! wait for their reader), so that no process ever holds more than a page.

use std::marker::PhantomData;

use bytes::Bytes;
use futures::StreamExt;
use schemars::JsonSchema;
use switchboard_kit::ServiceError;
use tonic::Streaming;

use super::people::{Contacts, People};
use crate::endpoint::Answer;
use crate::reply::{BodyStream, Reply};

/// What turns an export's chunks into rows: the header, each row's cells, and the number whose
/// CRM contact a row names (looked up once a chunk).
pub trait Sheet: Send + Sync + 'static {
    type Chunk: Send + Sync + 'static;
    type Row: Sync;

    fn header(&self) -> Vec<String>;
    fn rows(chunk: &Self::Chunk) -> &[Self::Row];
    fn number(row: &Self::Row) -> Option<&str>;
    fn people(&self) -> &People;
    /// The row's cells, as they are: [`crate::spreadsheet::cell`] defuses them.
    fn cells(&self, row: &Self::Row, contacts: &Contacts) -> Vec<String>;
}

/// The CSV of a chunk (after the header when `header`): a writer of its own per chunk, whose
/// buffer is the chunk.
async fn chunk_csv<S: Sheet>(sheet: &S, header: bool, chunk: &S::Chunk) -> Result<Bytes, ServiceError> {
    let rows = S::rows(chunk);
    let contacts = sheet.people().names(rows.iter().filter_map(S::number)).await?;
    let mut writer = csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::new());
    if header {
        writer.write_record(sheet.header()).map_err(ServiceError::internal)?;
    }
    for row in rows {
        let cells = sheet.cells(row, &contacts).into_iter().map(crate::spreadsheet::cell);
        writer.write_record(cells).map_err(ServiceError::internal)?;
    }
    writer.into_inner().map(Bytes::from).map_err(|error| ServiceError::internal(error.into_error()))
}

/// The header and the first chunk's rows, then each later chunk's rows as it arrives. The first
/// chunk is awaited by the caller, so that a refusal is answered with its status rather than
/// as a body cut short.
pub fn body<S: Sheet>(sheet: S, first: S::Chunk, chunks: Streaming<S::Chunk>) -> BodyStream {
    futures::stream::unfold((sheet, chunks, Some(first)), |(sheet, mut chunks, first)| async move {
        if let Some(first) = first {
            let head = chunk_csv(&sheet, true, &first).await;
            return Some((head, (sheet, chunks, None)));
        }
        match chunks.message().await {
            Ok(Some(chunk)) => Some((chunk_csv(&sheet, false, &chunk).await, (sheet, chunks, None))),
            Ok(None) => None,
            Err(status) => Some((Err(ServiceError::from_status(&status)), (sheet, chunks, None))),
        }
    })
    .boxed()
}

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
