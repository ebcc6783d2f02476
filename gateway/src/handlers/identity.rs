use switchboard_proto::v1::GetIdentityRequest;

use crate::call::{Call, Reply};
use crate::routes::HandlerFuture;
use crate::services::traced;
use crate::views;

/// `GET /me`
pub fn me(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let identity = call
            .services
            .identity
            .clone()
            .get_identity(traced(GetIdentityRequest { team_id: call.team_id().to_owned() }))
            .await?
            .into_inner();
        Ok(Reply::data(views::identity(&identity, &call.principal.key)))
    })
}
