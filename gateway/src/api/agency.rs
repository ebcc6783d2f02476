//! `/agency/subteams`: an agency's client subteams.

use super::failures::TEAM_GONE;
use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::accounts::invite_url;
use switchboard_api::agency::Subteam;
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceResult, limits};
use switchboard_proto::v1::{
    AccessFlags, CreateSubteamRequest, ListSubteamsRequest, NewUser, SubteamRequest, TransferCreditsRequest,
    UpdateSubteamRequest,
};

use super::groups::AGENCY;
use crate::call::Call;
use crate::endpoint::{Created, Data, Endpoint, Id, Input, Json, Nothing, Page, Updated};
use switchboard_api::paging::{SortOrder, default_limit, descending, first_page, page_request};

const NOT_AGENCY: &str = "This API key's team does not own an agency (also with `teamId` naming a subteam, which owns \
    none), or another refusal (read-only key on writes).";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/agency/subteams", list)
            .doc("listSubteams", AGENCY, "List the agency's client subteams")
            .lists("subteamId")
            .about(
                "The agency's client subteams with their credit balance, access configuration and users, one page at \
                 a time. The key's team (or the `teamId` team) must own an agency. Also accepts the key in \
                 `X-AGENCY-KEY`.",
            )
            .fails(403, NOT_AGENCY)
            .fails(404, TEAM_GONE),
        Endpoint::post("/v1/agency/subteams", create)
            .shows_secret_once()
            .for_admins()
            .audited(AuditAction::SubteamCreated)
            .creates("subteamId")
            .doc("createSubteam", AGENCY, "Create a client subteam with its first user and monthly credits")
            .about(
                "Creates a client subteam, its first user (role `owner`) and moves `totalMonthlyCredits` (default \
                 1000) from the agency's balance to the subteam's, all in one transaction; access flags left out are \
                 on (the identity service's defaults). The key's team must own an agency. Also accepts the key in \
                 `X-AGENCY-KEY`. The answer's `inviteUrl` lets the first user into the portal: a single-use \
                 link, valid 7 days, shown only here.",
            )
            .fails(
                402,
                "Insufficient credits: the agency's balance is smaller than `totalMonthlyCredits`; nothing is created.",
            )
            .fails(403, NOT_AGENCY)
            .fails(404, TEAM_GONE),
        Endpoint::get("/v1/agency/subteams/{subteamId}", get)
            .doc("getSubteam", AGENCY, "One client subteam: balance, allowance, access configuration and users")
            .fails(404, SUBTEAM_GONE),
        Endpoint::put("/v1/agency/subteams/{subteamId}", update)
            .doc("updateSubteam", AGENCY, "Rename a subteam, change its monthly allowance or its access configuration")
            .about(
                "Members left out keep their value; in `accessConfig`, only the flags given change. A new \
                 `totalMonthlyCredits` applies from the subteam's next billing period, when it is topped up to it; \
                 use POST .../credits to move credits now.",
            )
            .for_admins()
            .audited(AuditAction::SubteamUpdated)
            .fails(404, SUBTEAM_GONE),
        Endpoint::delete("/v1/agency/subteams/{subteamId}", delete)
            .doc("deleteSubteam", AGENCY, "Delete a client subteam (soft: its keys then meet 404 Team not found)")
            .about("Its ledger and balance stay for the record; it is no longer topped up or listed.")
            .for_admins()
            .audited(AuditAction::SubteamDeleted)
            .fails(404, SUBTEAM_GONE),
        Endpoint::post("/v1/agency/subteams/{subteamId}/credits", add_credits)
            .doc("addSubteamCredits", AGENCY, "Move credits from the agency's balance to a subteam's, now")
            .about("A one-off transfer, on top of the monthly top-ups; all of it or nothing.")
            .for_admins()
            .audited(AuditAction::SubteamCreditsAdded)
            .fails(402, "Insufficient credits: the agency's balance is smaller than `amount`; nothing moved.")
            .fails(404, SUBTEAM_GONE),
    ]
}

const SUBTEAM_GONE: &str = "Subteam not found: not a live client subteam of this agency.";

/// A subteam's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubteamPath {
    pub subteam_id: Id,
}

/// Members left out keep their value. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSubteam {
    #[schemars(length(min = limits::SUBTEAM_NAME.min, max = limits::SUBTEAM_NAME.max))]
    pub name: Option<String>,
    /// The monthly allowance the subteam is topped up to at the start of each period.
    #[schemars(range(min = limits::MONTHLY_CREDITS.min, max = limits::MONTHLY_CREDITS.max))]
    pub total_monthly_credits: Option<i64>,
    pub access_config: Option<AccessFlagsInput>,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct AddCredits {
    /// Credits to move from the agency's balance.
    #[schemars(range(min = 1, max = limits::MONTHLY_CREDITS.max))]
    pub amount: i64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SubteamSort {
    CreatedAt,
    Name,
}

fn by_creation() -> SubteamSort {
    SubteamSort::CreatedAt
}

/// The hosted list parameters.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubteamQuery {
    /// The page, from 1.
    #[serde(default = "first_page")]
    #[schemars(range(min = limits::PAGE.min, max = limits::PAGE.max))]
    pub page: u32,
    /// Subteams per page.
    #[serde(default = "default_limit")]
    #[schemars(range(min = limits::PAGE_LIMIT.min, max = limits::PAGE_LIMIT.max))]
    pub limit: u32,
    /// Sort field.
    #[serde(default = "by_creation")]
    pub sort_by: SubteamSort,
    /// Sort direction.
    #[serde(default = "descending")]
    pub sort_order: SortOrder,
}

/// Features the subteam's own keys may use. Flags left out are on; absent or null switches every
/// feature on. Members other than these nine are refused.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessFlagsInput {
    pub users: Option<bool>,
    pub instructions: Option<bool>,
    pub instructions_write: Option<bool>,
    pub testing: Option<bool>,
    pub knowledge_base: Option<bool>,
    pub agent_configuration: Option<bool>,
    pub agent_creation: Option<bool>,
    pub conversations: Option<bool>,
    pub crm: Option<bool>,
}

impl From<AccessFlagsInput> for AccessFlags {
    fn from(flags: AccessFlagsInput) -> Self {
        Self {
            users: flags.users,
            instructions: flags.instructions,
            instructions_write: flags.instructions_write,
            testing: flags.testing,
            knowledge_base: flags.knowledge_base,
            agent_configuration: flags.agent_configuration,
            agent_creation: flags.agent_creation,
            conversations: flags.conversations,
            crm: flags.crm,
        }
    }
}

/// The hosted body of `POST /agency/subteams`. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateSubteam {
    /// The first user's first name (not blank).
    #[schemars(length(min = limits::PERSON_NAME.min, max = limits::PERSON_NAME.max))]
    pub first_name: String,
    /// The first user's last name (not blank).
    #[schemars(length(min = limits::PERSON_NAME.min, max = limits::PERSON_NAME.max))]
    pub last_name: String,
    /// The subteam's name (not blank).
    #[schemars(length(min = limits::SUBTEAM_NAME.min, max = limits::SUBTEAM_NAME.max))]
    pub team_name: String,
    /// The first user's e-mail (one `@`, a dotted domain, no spaces); that user becomes the
    /// subteam's `owner`.
    #[schemars(length(min = limits::EMAIL.min, max = limits::EMAIL.max), extend("pattern" = limits::EMAIL_PATTERN))]
    pub email: String,
    /// Credits moved from the agency's balance to the subteam's; absent or null means 1000.
    #[schemars(range(min = limits::MONTHLY_CREDITS.min, max = limits::MONTHLY_CREDITS.max))]
    pub total_monthly_credits: Option<i64>,
    pub access_config: Option<AccessFlagsInput>,
}

async fn list(call: Call, input: Input<Nothing, SubteamQuery>) -> ServiceResult<Page<Subteam>> {
    let query = input.query;
    let sort_by = match query.sort_by {
        SubteamSort::CreatedAt => "createdAt",
        SubteamSort::Name => "name",
    };
    let page = page_request(query.page, query.limit, sort_by, query.sort_order);
    let request = ListSubteamsRequest { agency_team_id: call.team_id().to_owned(), page: Some(page) };
    let response = call.services.identity.clone().list_subteams(request).await?.into_inner();
    Ok(Page {
        data: response.subteams.iter().map(Subteam::from).collect(),
        pagination: response.page.unwrap_or_default().into(),
    })
}

fn subteam_request(call: &Call, path: SubteamPath) -> SubteamRequest {
    SubteamRequest { agency_team_id: call.team_id().to_owned(), team_id: path.subteam_id.into_string() }
}

async fn get(call: Call, input: Input<SubteamPath>) -> ServiceResult<Data<Subteam>> {
    let request = subteam_request(&call, input.path);
    let subteam = call.services.identity.clone().get_subteam(request).await?.into_inner();
    Ok(Data::new(Subteam::from(&subteam)))
}

async fn update(
    call: Call,
    input: Input<SubteamPath, Nothing, Json<UpdateSubteam>>,
) -> ServiceResult<Updated<Subteam>> {
    let Json(body) = input.body;
    let target = subteam_request(&call, input.path);
    let request = UpdateSubteamRequest {
        agency_team_id: target.agency_team_id,
        team_id: target.team_id,
        name: body.name,
        total_monthly_credits: body.total_monthly_credits,
        access: body.access_config.map(AccessFlags::from),
    };
    let subteam = call.services.identity.clone().update_subteam(request).await?.into_inner();
    Ok(Updated::new(Subteam::from(&subteam), "Subteam updated successfully"))
}

async fn delete(call: Call, input: Input<SubteamPath>) -> ServiceResult<Updated<Subteam>> {
    let request = subteam_request(&call, input.path);
    let subteam = call.services.identity.clone().delete_subteam(request).await?.into_inner();
    Ok(Updated::new(Subteam::from(&subteam), "Subteam deleted successfully"))
}

async fn add_credits(
    call: Call,
    input: Input<SubteamPath, Nothing, Json<AddCredits>>,
) -> ServiceResult<Updated<Subteam>> {
    let Json(body) = input.body;
    let target = subteam_request(&call, input.path);
    // Not found before anything moves: another agency's subteam is 404, not 403.
    let mut subteam = call.services.identity.clone().get_subteam(target.clone()).await?.into_inner();
    let transfer = TransferCreditsRequest {
        from_team_id: target.agency_team_id.clone(),
        to_team_id: target.team_id.clone(),
        amount: body.amount,
        reason: "credits added by the agency".to_owned(),
    };
    let moved = call.services.identity.clone().transfer_credits(transfer).await?.into_inner();
    // The transfer answers the subteam's balance after it; the rest was read just before.
    subteam.credit_balance = moved.credit.map_or(subteam.credit_balance, |credit| credit.balance_after);
    Ok(Updated::new(Subteam::from(&subteam), "Credits moved to the subteam"))
}

async fn create(call: Call, input: Input<Nothing, Nothing, Json<CreateSubteam>>) -> ServiceResult<Created<Subteam>> {
    let Json(body) = input.body;
    let access = body.access_config.map(AccessFlags::from);
    let request = CreateSubteamRequest {
        agency_team_id: call.team_id().to_owned(),
        team_name: body.team_name,
        user: Some(NewUser {
            first_name: body.first_name,
            last_name: body.last_name,
            email: body.email,
            role: String::new(),
        }),
        total_monthly_credits: body.total_monthly_credits,
        access,
        link_base: call.public_base.clone(),
    };
    let subteam = call.services.identity.clone().create_subteam(request).await?.into_inner();
    let invite_url = subteam.invite_token.as_deref().map(|token| invite_url(&call.public_base, token));
    Ok(Created::new(Subteam { invite_url, ..Subteam::from(&subteam) }, "Subteam created successfully"))
}
