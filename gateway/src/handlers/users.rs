use serde_json::Value;
use switchboard_proto::v1::ListUsersRequest;

use crate::call::{Call, Reply};
use crate::routes::HandlerFuture;
use crate::views;

/// `GET /users`: the team's users, whose ids assignments take.
pub fn list(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let users = call
            .services
            .identity
            .clone()
            .list_users(ListUsersRequest { team_id: call.team_id().to_owned() })
            .await?
            .into_inner()
            .users;
        Ok(Reply::data(Value::from(users.iter().map(views::user).collect::<Vec<_>>())))
    })
}
