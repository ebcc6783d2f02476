use serde_json::json;
use switchboard_proto::v1::{AccessFlags, CreateSubteamRequest, ListSubteamsRequest, NewUser};

use crate::call::{Call, Reply};
use crate::routes::HandlerFuture;
use crate::views;

const ACCESS_FLAGS: &[&str] =
    &["users", "instructions", "instructionsWrite", "testing", "knowledgeBase", "agentConfiguration", "agentCreation"];

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
            .list_subteams(ListSubteamsRequest { agency_team_id: call.team_id().to_owned(), page: Some(page) })
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

/// `POST /agency/subteams`: the hosted body; the identity service fills in the defaults.
pub fn create_subteam(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let first_name = fields.required_text("firstName", 1, 50);
        let last_name = fields.required_text("lastName", 1, 50);
        let team_name = fields.required_text("teamName", 1, 50);
        let email = fields.required_email("email");
        let credits = fields.optional_int("totalMonthlyCredits", 0, 1_000_000_000);
        let flags = fields.optional_flags("accessConfig", ACCESS_FLAGS);
        fields.finish()?;

        let access = flags.map(|flags| {
            let flag = |name: &str| flags.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
            AccessFlags {
                users: flag("users"),
                instructions: flag("instructions"),
                instructions_write: flag("instructionsWrite"),
                testing: flag("testing"),
                knowledge_base: flag("knowledgeBase"),
                agent_configuration: flag("agentConfiguration"),
                agent_creation: flag("agentCreation"),
            }
        });
        let subteam = call
            .services
            .identity
            .clone()
            .create_subteam(CreateSubteamRequest {
                agency_team_id: call.team_id().to_owned(),
                team_name,
                user: Some(NewUser { first_name, last_name, email, role: "owner".to_owned() }),
                total_monthly_credits: credits,
                access,
            })
            .await?
            .into_inner();
        Ok(Reply::created(views::subteam(&subteam), "Subteam created successfully"))
    })
}
