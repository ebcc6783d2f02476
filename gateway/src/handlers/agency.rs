use serde_json::json;
use switchboard_proto::v1::{AccessConfig, CreateSubteamRequest, ListSubteamsRequest, NewUser};

use crate::call::{Call, Reply};
use crate::routes::HandlerFuture;
use crate::services::traced;
use crate::views;

const ACCESS_FLAGS: &[&str] =
    &["users", "instructions", "instructionsWrite", "testing", "knowledgeBase", "agentConfiguration", "agentCreation"];
const DEFAULT_MONTHLY_CREDITS: i64 = 1000;

/// `GET /agency/subteams`: `{data: [Subteam], pagination}`.
pub fn list_subteams(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut query = call.query();
        let page = query.pagination(&["createdAt", "name"]);
        query.finish()?;
        let response = call
            .services
            .identity
            .clone()
            .list_subteams(traced(ListSubteamsRequest { agency_team_id: call.team_id().to_owned(), page: Some(page) }))
            .await?
            .into_inner();
        let page = response.page.unwrap_or_default();
        Ok(Reply::json(
            200,
            json!({
                "data": response.subteams.iter().map(views::subteam).collect::<Vec<_>>(),
                "pagination": {
                    "page": page.page,
                    "limit": page.limit,
                    "totalCount": page.total_count,
                    "totalPages": page.total_pages,
                },
            }),
        ))
    })
}

/// `POST /agency/subteams`: the hosted body; unset access flags default to on.
pub fn create_subteam(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let first_name = fields.required_text("firstName", 1, 50);
        let last_name = fields.required_text("lastName", 1, 50);
        let team_name = fields.required_text("teamName", 1, 50);
        let email = fields.required_email("email");
        let credits = fields.optional_int("totalMonthlyCredits", 0, 1_000_000_000).unwrap_or(DEFAULT_MONTHLY_CREDITS);
        let flags = fields.optional_flags("accessConfig", ACCESS_FLAGS);
        fields.finish()?;

        let access = flags.map(|flags| {
            let on = |name: &str| flags.iter().find(|(k, _)| k == name).is_none_or(|(_, v)| *v);
            AccessConfig {
                users: on("users"),
                instructions: on("instructions"),
                instructions_write: on("instructionsWrite"),
                testing: on("testing"),
                knowledge_base: on("knowledgeBase"),
                agent_configuration: on("agentConfiguration"),
                agent_creation: on("agentCreation"),
            }
        });
        let subteam = call
            .services
            .identity
            .clone()
            .create_subteam(traced(CreateSubteamRequest {
                agency_team_id: call.team_id().to_owned(),
                team_name,
                user: Some(NewUser { first_name, last_name, email, role: "owner".to_owned() }),
                total_monthly_credits: credits,
                access,
            }))
            .await?
            .into_inner();
        Ok(Reply::created(views::subteam(&subteam), "Subteam created successfully"))
    })
}
