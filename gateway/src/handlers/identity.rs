use crate::call::{Call, Reply};
use crate::routes::HandlerFuture;
use crate::views;

/// `GET /me`
pub fn me(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let identity = call.services.identity_of(call.team_id()).await?;
        Ok(Reply::data(views::identity(&identity, &call.principal.key)))
    })
}
