//! The paid search: every search costs the team [`limits::SEARCH_CREDITS`], taken through the
//! identity service, whoever calls (the gateway or an internal consumer).
//!
//! The search (mostly embedding the query) starts at once, beside the charge: checking that the
//! knowledge base exists, then taking the credit. Its results are only given once the credit is
//! taken; when the charge fails (404, 402) the search is cancelled and its results are never
//! seen, so an unknown knowledge base or an empty balance costs nothing. A search that fails
//! after the charge is refunded.

use std::sync::Arc;

use switchboard_kit::grpc::Channel;
use switchboard_kit::{ServiceError, ServiceResult, limits};
use switchboard_proto::v1::identity_service_client::IdentityServiceClient;
use switchboard_proto::v1::{DebitCreditsRequest, RefundCreditsRequest, SearchHit, SearchRequest, SearchResponse};
use tracing::Instrument;

use crate::knowledge::{Knowledge, check_search};

const REASON: &str = "knowledgebase search";

#[derive(Clone)]
pub struct PaidSearch {
    knowledge: Arc<Knowledge>,
    identity: IdentityServiceClient<Channel>,
}

impl PaidSearch {
    pub fn new(knowledge: Arc<Knowledge>, identity: IdentityServiceClient<Channel>) -> Self {
        Self { knowledge, identity }
    }

    pub async fn search(&self, request: SearchRequest) -> ServiceResult<SearchResponse> {
        check_search(&request.query, request.limit, request.threshold)?;
        let mut searching = tokio::task::JoinSet::new();
        let knowledge = self.knowledge.clone();
        let (team_id, knowledgebase_id) = (request.team_id.clone(), request.knowledgebase_id.clone());
        // Dropping the set (an early return) aborts the search.
        searching.spawn(
            async move {
                knowledge
                    .search(
                        &request.team_id,
                        &request.knowledgebase_id,
                        &request.query,
                        request.limit,
                        request.threshold,
                    )
                    .await
            }
            .in_current_span(),
        );
        self.knowledge.store.knowledgebase(&team_id, &knowledgebase_id).await?;
        let debit = self
            .identity
            .clone()
            .debit_credits(DebitCreditsRequest {
                team_id: team_id.clone(),
                amount: limits::SEARCH_CREDITS,
                reason: REASON.to_owned(),
                reference_id: None,
                up_to_balance: false,
            })
            .await?
            .into_inner();
        let searched: ServiceResult<Vec<SearchHit>> = match searching.join_next().await {
            Some(Ok(searched)) => searched,
            Some(Err(join_error)) => {
                Err(ServiceError::internal(anyhow::anyhow!("the search task failed: {join_error}")))
            }
            None => Err(ServiceError::internal(anyhow::anyhow!("the search task is missing"))),
        };
        match searched {
            Ok(hits) => Ok(SearchResponse { hits, credits_used: limits::SEARCH_CREDITS }),
            Err(error) => {
                let refund =
                    RefundCreditsRequest { debit_entry_id: debit.id, team_id, reason: format!("{REASON} failed") };
                if let Err(status) = self.identity.clone().refund_credits(refund).await {
                    tracing::error!(%status, "refunding a failed search failed");
                }
                Err(error)
            }
        }
    }
}
