//! The gRPC face of the knowledgebase service.

use std::sync::Arc;

use switchboard_kit::ServiceError;
use switchboard_kit::grpc::{Channel, Reply, reply};
use switchboard_kit::write_keys::WriteKey;
use switchboard_proto::v1::identity_service_client::IdentityServiceClient;
use switchboard_proto::v1::knowledgebase_service_server::{KnowledgebaseService, KnowledgebaseServiceServer};
use switchboard_proto::v1::*;
use tonic::Request;
use tonic::service::Routes;

use crate::charge::PaidSearch;
use crate::knowledge::{Knowledge, Upload};
use crate::store::{EntryText, RefreshInterval, SourcePatch};

pub struct KnowledgebaseApi {
    knowledge: Arc<Knowledge>,
    paid_search: PaidSearch,
}

/// Room for the largest upload plus the request's other fields.
const MESSAGE_OVERHEAD: usize = 64 * 1024;

/// The service's routes; searches are charged through `identity`.
pub fn routes(knowledge: Arc<Knowledge>, identity: IdentityServiceClient<Channel>) -> Routes {
    let max_message = knowledge.max_upload_bytes.saturating_add(MESSAGE_OVERHEAD);
    let paid_search = PaidSearch::new(knowledge.clone(), identity);
    Routes::new(
        KnowledgebaseServiceServer::new(KnowledgebaseApi { knowledge, paid_search })
            .max_decoding_message_size(max_message),
    )
}

fn notes_patch(notes: Option<String>, clear: bool) -> Option<Option<String>> {
    if clear { Some(None) } else { notes.map(Some) }
}

#[tonic::async_trait]
impl KnowledgebaseService for KnowledgebaseApi {
    async fn list_knowledgebases(
        &self,
        request: Request<ListKnowledgebasesRequest>,
    ) -> Reply<ListKnowledgebasesResponse> {
        let request = request.into_inner();
        reply(
            self.knowledge
                .store
                .list_knowledgebases(&request.team_id, &request.ids)
                .await
                .map(|knowledgebases| ListKnowledgebasesResponse { knowledgebases }),
        )
    }

    async fn get_knowledgebase(&self, request: Request<GetKnowledgebaseRequest>) -> Reply<Knowledgebase> {
        let request = request.into_inner();
        if request.include_content {
            reply(self.knowledge.knowledgebase_with_content(&request.team_id, &request.knowledgebase_id).await)
        } else {
            reply(self.knowledge.store.knowledgebase(&request.team_id, &request.knowledgebase_id).await)
        }
    }

    async fn create_knowledgebase(&self, request: Request<CreateKnowledgebaseRequest>) -> Reply<Knowledgebase> {
        let request = request.into_inner();
        reply(
            self.knowledge
                .store
                .create_knowledgebase(&request.team_id, &request.name, request.description.as_deref())
                .await,
        )
    }

    async fn update_knowledgebase(&self, request: Request<UpdateKnowledgebaseRequest>) -> Reply<Knowledgebase> {
        let request = request.into_inner();
        let description = if request.clear_description { Some(None) } else { request.description.as_deref().map(Some) };
        reply(
            self.knowledge
                .store
                .update_knowledgebase(&request.team_id, &request.knowledgebase_id, request.name.as_deref(), description)
                .await,
        )
    }

    async fn delete_knowledgebase(&self, request: Request<GetKnowledgebaseRequest>) -> Reply<Knowledgebase> {
        let request = request.into_inner();
        reply(self.knowledge.delete_knowledgebase(&request.team_id, &request.knowledgebase_id).await)
    }

    async fn create_reference(&self, request: Request<CreateReferenceRequest>) -> Reply<Reference> {
        let key = WriteKey::from_metadata(request.metadata());
        let request = request.into_inner();
        let text = EntryText { question: request.question, answer: request.answer };
        reply(self.knowledge.create_reference(&request.team_id, &request.knowledgebase_id, text, key.as_ref()).await)
    }

    async fn bulk_create_references(
        &self,
        request: Request<BulkCreateReferencesRequest>,
    ) -> Reply<BulkCreateReferencesResponse> {
        let key = WriteKey::from_metadata(request.metadata());
        let request = request.into_inner();
        let texts = request
            .references
            .into_iter()
            .map(|text| EntryText { question: text.question, answer: text.answer })
            .collect();
        let (created, failed) = self
            .knowledge
            .bulk_create_references(&request.team_id, &request.knowledgebase_id, texts, key.as_ref())
            .await?;
        Ok(tonic::Response::new(BulkCreateReferencesResponse { created, failed }))
    }

    async fn get_reference(&self, request: Request<GetReferenceRequest>) -> Reply<Reference> {
        let request = request.into_inner();
        reply(self.knowledge.reference(&request.team_id, &request.knowledgebase_id, &request.reference_id).await)
    }

    async fn update_reference(&self, request: Request<UpdateReferenceRequest>) -> Reply<Reference> {
        let request = request.into_inner();
        reply(
            self.knowledge
                .update_reference(
                    &request.team_id,
                    &request.knowledgebase_id,
                    &request.reference_id,
                    request.question,
                    request.answer,
                )
                .await,
        )
    }

    async fn delete_reference(&self, request: Request<GetReferenceRequest>) -> Reply<Reference> {
        let request = request.into_inner();
        reply(self.knowledge.delete_reference(&request.team_id, &request.knowledgebase_id, &request.reference_id).await)
    }

    async fn search(&self, request: Request<SearchRequest>) -> Reply<SearchResponse> {
        reply(self.paid_search.search(request.into_inner()).await)
    }

    async fn reindex(&self, _request: Request<ReindexRequest>) -> Reply<ReindexResponse> {
        let rebuilt = self.knowledge.sync.rebuild(self.knowledge.embedder.as_ref()).await;
        reply(rebuilt.map(|entries| ReindexResponse { entries }).map_err(ServiceError::internal))
    }

    async fn create_webpage(&self, request: Request<CreateWebpageRequest>) -> Reply<Webpage> {
        let r = request.into_inner();
        let refresh = r.refresh_interval.as_deref().map(RefreshInterval::parse).transpose()?.unwrap_or_default();
        let created = self.knowledge.create_webpage(
            &r.team_id,
            &r.knowledgebase_id,
            &r.name,
            &r.url,
            r.notes.as_deref(),
            refresh,
        );
        reply(created.await)
    }

    async fn get_webpage(&self, request: Request<GetSourceRequest>) -> Reply<Webpage> {
        let r = request.into_inner();
        reply(self.knowledge.webpage(&r.team_id, &r.knowledgebase_id, &r.source_id, r.include_content).await)
    }

    async fn update_webpage(&self, request: Request<UpdateWebpageRequest>) -> Reply<Webpage> {
        let r = request.into_inner();
        let refresh_interval = r.refresh_interval.as_deref().map(RefreshInterval::parse).transpose()?;
        let patch =
            SourcePatch { name: r.name, url: r.url, notes: notes_patch(r.notes, r.clear_notes), refresh_interval };
        reply(self.knowledge.update_webpage(&r.team_id, &r.knowledgebase_id, &r.webpage_id, &patch).await)
    }

    async fn delete_webpage(&self, request: Request<GetSourceRequest>) -> Reply<Webpage> {
        let r = request.into_inner();
        reply(self.knowledge.delete_webpage(&r.team_id, &r.knowledgebase_id, &r.source_id).await)
    }

    async fn refresh_webpage(&self, request: Request<GetSourceRequest>) -> Reply<Webpage> {
        let r = request.into_inner();
        reply(self.knowledge.refresh_webpage(&r.team_id, &r.knowledgebase_id, &r.source_id).await)
    }

    async fn upload_document(&self, request: Request<UploadDocumentRequest>) -> Reply<Document> {
        let r = request.into_inner();
        reply(
            self.knowledge
                .upload_document(
                    &r.team_id,
                    &r.knowledgebase_id,
                    Upload {
                        file_name: &r.file_name,
                        content_type: r.content_type.as_deref(),
                        name: r.name.as_deref(),
                        notes: r.notes.as_deref(),
                        content: r.content,
                    },
                )
                .await,
        )
    }

    async fn get_document(&self, request: Request<GetSourceRequest>) -> Reply<Document> {
        let r = request.into_inner();
        reply(self.knowledge.document(&r.team_id, &r.knowledgebase_id, &r.source_id, r.include_content).await)
    }

    async fn update_document(&self, request: Request<UpdateDocumentRequest>) -> Reply<Document> {
        let r = request.into_inner();
        let patch =
            SourcePatch { name: r.name, url: None, notes: notes_patch(r.notes, r.clear_notes), refresh_interval: None };
        reply(self.knowledge.update_document(&r.team_id, &r.knowledgebase_id, &r.document_id, &patch).await)
    }

    async fn delete_document(&self, request: Request<GetSourceRequest>) -> Reply<Document> {
        let r = request.into_inner();
        reply(self.knowledge.delete_document(&r.team_id, &r.knowledgebase_id, &r.source_id).await)
    }
}
