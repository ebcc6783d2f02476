//! `/me` and `/users`: who is calling, and the team's users.

use super::failures::TEAM_GONE;
use switchboard_api::identity::{Me, User};
use switchboard_kit::ServiceResult;
use switchboard_proto::v1::ListUsersRequest;

use super::groups::IDENTITY;
use crate::call::Call;
use crate::endpoint::{Data, Endpoint, Input, List, Rendered};

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/me", me)
            .doc("getMe", IDENTITY, "The key's team, whether it owns an agency, its credit balance and subscription")
            .about(
                "The team acted on (the `teamId` subteam when given), whether it owns an agency, its credit balance \
                 and subscription, and the calling key's id, name, prefix and access (never the secret). Needs no \
                 access feature.",
            )
            .fails(404, TEAM_GONE)
            .tool(
                "whoami",
                "Confirms the key works and reports the team, its credit balance, its subscription and the key's \
                 access. Call it first.",
            ),
        Endpoint::get("/v1/users", users)
            .doc("listUsers", IDENTITY, "The team's users (their ids are what contact assignments take)")
            .about("The users of the team acted on, oldest first (not paged).")
            .fails(404, TEAM_GONE),
    ]
}

async fn me(call: Call, _: Input) -> ServiceResult<Rendered<Data<Me>>> {
    let identity = call.services.identity_of(call.team_id(), call.team_version).await?;
    if let Some(answer) = call.principal.me.get(&identity) {
        return Ok(Rendered::again(answer));
    }
    let user = call.principal.session().and_then(|session| session.user.as_ref());
    let answer = Rendered::new(&Data::new(Me::new(&identity, call.principal.key(), user)))?;
    call.principal.me.keep(identity, answer.bytes());
    Ok(answer)
}

async fn users(call: Call, _: Input) -> ServiceResult<List<User>> {
    let users = call
        .services
        .identity
        .clone()
        .list_users(ListUsersRequest { team_id: call.team_id().to_owned() })
        .await?
        .into_inner()
        .users;
    Ok(List::new(users.iter().map(User::from).collect()))
}
