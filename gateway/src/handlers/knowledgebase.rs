//! `/knowledgebase/...` and `/agents/{agentId}/knowledgebase/...`: one handler per
//! operation serves both paths; [`target`] works out which knowledge base is meant.

use serde_json::{Value, json};
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{
    Agent, CreateKnowledgebaseRequest, CreateReferenceRequest, GetKnowledgebaseRequest, GetReferenceRequest,
    Knowledgebase, ListKnowledgebasesRequest, SearchRequest, UpdateKnowledgebaseRequest, UpdateReferenceRequest,
};

use super::agents::fetch_agent;
use crate::call::{Call, Reply};
use crate::routes::HandlerFuture;
use crate::validate::Patch;
use crate::views;

const NAME_MAX: usize = 255;
const DESCRIPTION_MAX: usize = 5000;
const QUESTION_MAX: usize = 5000;
const ANSWER_MAX: usize = 50_000;
const QUERY_MAX: usize = 2000;

/// The knowledge base a request is about, and the agent it was reached through.
pub(crate) struct Target {
    pub knowledgebase_id: String,
    pub agent: Option<Agent>,
}

pub(crate) async fn target(call: &Call) -> ServiceResult<Target> {
    if !call.has_param("agentId") {
        return Ok(Target { knowledgebase_id: call.param("knowledgebaseId").to_owned(), agent: None });
    }
    let agent = fetch_agent(call).await?;
    let knowledgebase_id =
        agent.knowledgebase_id.clone().ok_or_else(|| ServiceError::not_found("Agent has no knowledgebase assigned"))?;
    Ok(Target { knowledgebase_id, agent: Some(agent) })
}

async fn fetch_knowledgebase(
    call: &Call,
    knowledgebase_id: &str,
    include_content: bool,
) -> ServiceResult<Knowledgebase> {
    Ok(call
        .services
        .knowledgebase
        .clone()
        .get_knowledgebase(GetKnowledgebaseRequest {
            team_id: call.team_id().to_owned(),
            knowledgebase_id: knowledgebase_id.to_owned(),
            include_content,
        })
        .await?
        .into_inner())
}

/// `GET /knowledgebase`: the team's knowledge bases, newest first.
pub fn list(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let knowledgebases = call
            .services
            .knowledgebase
            .clone()
            .list_knowledgebases(ListKnowledgebasesRequest { team_id: call.team_id().to_owned(), ids: Vec::new() })
            .await?
            .into_inner()
            .knowledgebases;
        Ok(Reply::data(Value::from(knowledgebases.iter().map(views::knowledgebase_summary).collect::<Vec<_>>())))
    })
}

/// `POST /knowledgebase`
pub fn create(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let name = fields.required_text("name", 1, NAME_MAX);
        let description = fields.optional_text("description", 0, DESCRIPTION_MAX);
        fields.finish()?;
        let created = call
            .services
            .knowledgebase
            .clone()
            .create_knowledgebase(CreateKnowledgebaseRequest { team_id: call.team_id().to_owned(), name, description })
            .await?
            .into_inner();
        Ok(Reply::created(views::knowledgebase(&created), "Knowledgebase created successfully"))
    })
}

/// `GET /knowledgebase/{knowledgebaseId}` and `GET /agents/{agentId}/knowledgebase`.
pub fn get(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let target = target(&call).await?;
        let knowledgebase = views::knowledgebase(&fetch_knowledgebase(&call, &target.knowledgebase_id, true).await?);
        Ok(Reply::data(match &target.agent {
            Some(agent) => json!({ "agent": views::agent_ref(agent), "knowledgebase": knowledgebase }),
            None => knowledgebase,
        }))
    })
}

/// `PUT /knowledgebase/{knowledgebaseId}`: `name`, `description` (`null` clears it).
pub fn update(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let name = fields.optional_text("name", 1, NAME_MAX);
        let description = fields.nullable_text("description", 0, DESCRIPTION_MAX);
        fields.finish()?;
        let updated = call
            .services
            .knowledgebase
            .clone()
            .update_knowledgebase(UpdateKnowledgebaseRequest {
                team_id: call.team_id().to_owned(),
                knowledgebase_id: call.param("knowledgebaseId").to_owned(),
                name,
                clear_description: description == Patch::Null,
                description: match description {
                    Patch::Value(description) => Some(description),
                    Patch::Absent | Patch::Null => None,
                },
            })
            .await?
            .into_inner();
        let updated = fetch_knowledgebase(&call, &updated.id, true).await?;
        Ok(Reply::updated(views::knowledgebase(&updated), "Knowledgebase updated successfully"))
    })
}

/// `DELETE /knowledgebase/{knowledgebaseId}`: its content goes with it; the knowledgebase
/// service has the agents linked to it unlinked.
pub fn delete(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let deleted = call
            .services
            .knowledgebase
            .clone()
            .delete_knowledgebase(GetKnowledgebaseRequest {
                team_id: call.team_id().to_owned(),
                knowledgebase_id: call.param("knowledgebaseId").to_owned(),
                include_content: false,
            })
            .await?
            .into_inner();
        Ok(Reply::updated(views::knowledgebase(&deleted), "Knowledgebase deleted successfully"))
    })
}

/// Search on both paths; the knowledgebase service charges the credit.
pub fn search(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut query = call.query();
        let text = query.required_text("query", 1, QUERY_MAX);
        let limit = query.int("limit", 1, 50, 10);
        let threshold = query.number("threshold", 0.0, 1.0, 0.1);
        query.finish()?;
        let target = target(&call).await?;
        let searched = call
            .services
            .knowledgebase
            .clone()
            .search(SearchRequest {
                team_id: call.team_id().to_owned(),
                knowledgebase_id: target.knowledgebase_id.clone(),
                query: text.clone(),
                limit: u32::try_from(limit).unwrap_or(10),
                threshold: threshold as f32,
            })
            .await?
            .into_inner();
        let hits = searched.hits;
        let mut meta = json!({
            "query": text,
            "resultCount": hits.len(),
            "limit": limit,
            "threshold": threshold,
            "creditsUsed": searched.credits_used,
        });
        if let Some(agent) = &target.agent {
            meta["agentId"] = Value::from(agent.id.as_str());
            meta["agentName"] = Value::from(agent.name.as_str());
            meta["knowledgebaseId"] = Value::from(target.knowledgebase_id.as_str());
        }
        Ok(Reply::json(200, json!({ "data": hits.iter().map(views::search_hit).collect::<Vec<_>>(), "meta": meta })))
    })
}

fn reference_request(call: &Call, target: &Target) -> GetReferenceRequest {
    GetReferenceRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: target.knowledgebase_id.clone(),
        reference_id: call.param("referenceId").to_owned(),
    }
}

/// `POST .../references`
pub fn create_reference(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let question = fields.required_text("question", 1, QUESTION_MAX);
        let answer = fields.required_text("answer", 1, ANSWER_MAX);
        fields.finish()?;
        let target = target(&call).await?;
        let reference = call
            .services
            .knowledgebase
            .clone()
            .create_reference(CreateReferenceRequest {
                team_id: call.team_id().to_owned(),
                knowledgebase_id: target.knowledgebase_id,
                question,
                answer,
            })
            .await?
            .into_inner();
        Ok(Reply::created(views::reference(&reference), "Reference created successfully"))
    })
}

/// `GET .../references/{referenceId}`
pub fn get_reference(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let target = target(&call).await?;
        let reference =
            call.services.knowledgebase.clone().get_reference(reference_request(&call, &target)).await?.into_inner();
        Ok(Reply::data(views::reference(&reference)))
    })
}

/// `PUT .../references/{referenceId}`: omitted fields keep their value.
pub fn update_reference(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let question = fields.optional_text("question", 1, QUESTION_MAX);
        let answer = fields.optional_text("answer", 1, ANSWER_MAX);
        fields.finish()?;
        let target = target(&call).await?;
        let reference = call
            .services
            .knowledgebase
            .clone()
            .update_reference(UpdateReferenceRequest {
                team_id: call.team_id().to_owned(),
                knowledgebase_id: target.knowledgebase_id,
                reference_id: call.param("referenceId").to_owned(),
                question,
                answer,
            })
            .await?
            .into_inner();
        Ok(Reply::updated(views::reference(&reference), "Reference updated successfully"))
    })
}

/// `DELETE .../references/{referenceId}`
pub fn delete_reference(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let target = target(&call).await?;
        let reference =
            call.services.knowledgebase.clone().delete_reference(reference_request(&call, &target)).await?.into_inner();
        Ok(Reply::updated(views::reference(&reference), "Reference deleted successfully"))
    })
}
