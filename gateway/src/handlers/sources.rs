//! Webpages and documents of a knowledge base, on both the agent-addressed and the
//! knowledgebase-addressed paths (see [`super::knowledgebase::target`]).

use bytes::Bytes;
use serde_json::json;
use switchboard_kit::{ErrorKind, FieldViolation, ServiceError, ServiceResult};
use switchboard_proto::v1::{
    CreateWebpageRequest, GetSourceRequest, UpdateDocumentRequest, UpdateWebpageRequest, UploadDocumentRequest,
};

use super::knowledgebase::{Target, target};
use crate::body::Upload;
use crate::call::{Call, Reply};
use crate::routes::HandlerFuture;
use crate::validate::Patch;
use crate::views;

const NAME_MAX: usize = 255;
const NOTES_MAX: usize = 5000;
const URL_MAX: usize = 2048;

fn source_request(call: &Call, target: &Target, param: &str, include_content: bool) -> GetSourceRequest {
    GetSourceRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: target.knowledgebase_id.clone(),
        source_id: call.param(param).to_owned(),
        include_content,
    }
}

fn patch_parts(notes: Patch<String>) -> (Option<String>, bool) {
    match notes {
        Patch::Value(notes) => (Some(notes), false),
        Patch::Null => (None, true),
        Patch::Absent => (None, false),
    }
}

/// `POST .../webpages` with `{name, url, notes?}`: 201, the first scrape queued.
pub fn create_webpage(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let name = fields.required_text("name", 1, NAME_MAX);
        let url = fields.required_text("url", 1, URL_MAX);
        let notes = fields.optional_text("notes", 0, NOTES_MAX);
        fields.finish()?;
        let target = target(&call).await?;
        let webpage = call
            .services
            .knowledgebase
            .clone()
            .create_webpage(CreateWebpageRequest {
                team_id: call.team_id().to_owned(),
                knowledgebase_id: target.knowledgebase_id,
                name,
                url,
                notes,
            })
            .await?
            .into_inner();
        Ok(Reply::created(views::webpage(&webpage), "Webpage added; it is being scraped"))
    })
}

/// `GET .../webpages/{webpageId}`: the record and its extracted Q&A content.
pub fn get_webpage(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let target = target(&call).await?;
        let request = source_request(&call, &target, "webpageId", true);
        let webpage = call.services.knowledgebase.clone().get_webpage(request).await?.into_inner();
        Ok(Reply::data(views::webpage_detail(&webpage)))
    })
}

/// `PUT .../webpages/{webpageId}` with `{name?, url?, notes?}`; a new url waits for the
/// next refresh.
pub fn update_webpage(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let name = fields.optional_text("name", 1, NAME_MAX);
        let url = fields.optional_text("url", 1, URL_MAX);
        let (notes, clear_notes) = patch_parts(fields.nullable_text("notes", 0, NOTES_MAX));
        fields.finish()?;
        let target = target(&call).await?;
        let webpage = call
            .services
            .knowledgebase
            .clone()
            .update_webpage(UpdateWebpageRequest {
                team_id: call.team_id().to_owned(),
                knowledgebase_id: target.knowledgebase_id,
                webpage_id: call.param("webpageId").to_owned(),
                name,
                url,
                notes,
                clear_notes,
            })
            .await?
            .into_inner();
        Ok(Reply::updated(views::webpage(&webpage), "Webpage updated successfully"))
    })
}

/// `DELETE .../webpages/{webpageId}`: its entries leave the search at once.
pub fn delete_webpage(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let target = target(&call).await?;
        let request = source_request(&call, &target, "webpageId", false);
        let webpage = call.services.knowledgebase.clone().delete_webpage(request).await?.into_inner();
        Ok(Reply::updated(views::webpage(&webpage), "Webpage deleted successfully"))
    })
}

/// `POST .../webpages/{webpageId}/refresh`: 200 and a scrape queued, 409 while one runs,
/// 429 with `nextAvailableAt` within 24 hours of the last refresh.
pub fn refresh_webpage(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let target = target(&call).await?;
        let request = source_request(&call, &target, "webpageId", false);
        let webpage = call.services.knowledgebase.clone().refresh_webpage(request).await?.into_inner();
        Ok(Reply::updated(
            json!({ "id": webpage.id, "url": webpage.url, "name": webpage.name, "status": webpage.status }),
            "Webpage refresh queued",
        ))
    })
}

/// The parts of an upload form.
struct UploadForm {
    file_name: String,
    content: Bytes,
    name: Option<String>,
    notes: Option<String>,
}

fn malformed(error: impl std::fmt::Display) -> ServiceError {
    ServiceError::invalid_field("file", format!("the multipart body cannot be read: {error}"))
}

async fn read_form(upload: Upload, max_file: usize) -> ServiceResult<UploadForm> {
    let Upload { boundary, body } = upload;
    let stream = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let (mut file, mut name, mut notes) = (None, None, None);
    while let Some(field) = multipart.next_field().await.map_err(malformed)? {
        match field.name().unwrap_or_default() {
            "file" => {
                let file_name = field.file_name().unwrap_or_default().to_owned();
                let content = field.bytes().await.map_err(malformed)?;
                file = Some((file_name, content));
            }
            "name" => name = Some(field.text().await.map_err(malformed)?),
            "notes" => notes = Some(field.text().await.map_err(malformed)?),
            _ => {}
        }
    }
    let Some((file_name, content)) = file else {
        return Err(ServiceError::invalid_field("file", "is required (a multipart file field named `file`)"));
    };
    if content.len() > max_file {
        return Err(ServiceError::new(ErrorKind::PayloadTooLarge, format!("The file is larger than {max_file} bytes")));
    }
    let mut violations = Vec::new();
    if let Some(name) = &name
        && (name.trim().is_empty() || name.chars().count() > NAME_MAX)
    {
        violations.push(FieldViolation::new("name", format!("must be 1 to {NAME_MAX} characters")));
    }
    if notes.as_ref().is_some_and(|notes| notes.chars().count() > NOTES_MAX) {
        violations.push(FieldViolation::new("notes", format!("must be 0 to {NOTES_MAX} characters")));
    }
    if !violations.is_empty() {
        return Err(ServiceError::validation(violations));
    }
    Ok(UploadForm { file_name, content, name, notes })
}

/// `POST .../documents`, a multipart form with `file`, `name?` and `notes?`: 201, the
/// text extraction queued; 415 for an unsupported type, 413 over the size limit, 422 for a
/// file that cannot be read.
pub fn upload_document(mut call: Call) -> HandlerFuture {
    Box::pin(async move {
        let upload = call.upload.take().ok_or_else(|| ServiceError::invalid_field("file", "is required"))?;
        let form = read_form(upload, call.max_upload_bytes).await?;
        let target = target(&call).await?;
        let document = call
            .services
            .knowledgebase
            .clone()
            .upload_document(UploadDocumentRequest {
                team_id: call.team_id().to_owned(),
                knowledgebase_id: target.knowledgebase_id,
                file_name: form.file_name,
                name: form.name,
                notes: form.notes,
                content: form.content.to_vec(),
            })
            .await?
            .into_inner();
        Ok(Reply::created(views::document(&document), "Document uploaded; its text is being extracted"))
    })
}

/// `GET .../documents/{documentId}`: the record and its extracted Q&A content.
pub fn get_document(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let target = target(&call).await?;
        let request = source_request(&call, &target, "documentId", true);
        let document = call.services.knowledgebase.clone().get_document(request).await?.into_inner();
        Ok(Reply::data(views::document_detail(&document)))
    })
}

/// `PUT .../documents/{documentId}` with `{name?, notes?}`; the file never changes.
pub fn update_document(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let name = fields.optional_text("name", 1, NAME_MAX);
        let (notes, clear_notes) = patch_parts(fields.nullable_text("notes", 0, NOTES_MAX));
        fields.finish()?;
        let target = target(&call).await?;
        let document = call
            .services
            .knowledgebase
            .clone()
            .update_document(UpdateDocumentRequest {
                team_id: call.team_id().to_owned(),
                knowledgebase_id: target.knowledgebase_id,
                document_id: call.param("documentId").to_owned(),
                name,
                notes,
                clear_notes,
            })
            .await?
            .into_inner();
        Ok(Reply::updated(views::document(&document), "Document updated successfully"))
    })
}

/// `DELETE .../documents/{documentId}`: the file and its entries go too.
pub fn delete_document(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let target = target(&call).await?;
        let request = source_request(&call, &target, "documentId", false);
        let document = call.services.knowledgebase.clone().delete_document(request).await?.into_inner();
        Ok(Reply::updated(views::document(&document), "Document deleted successfully"))
    })
}
