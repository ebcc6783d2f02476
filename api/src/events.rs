//! The `data` of webhook events: the resource as the API shows it, so that a receiver reads
//! the same shapes as a client of the endpoints. The webhooks service renders each event once,
//! when it is published, through [`render`].

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;
use switchboard_proto::v1::event::Resource;

use crate::agency::Subteam;
use crate::agents::Instructions;
use crate::calls::CallView;
use crate::chats::ChatView;
use crate::contacts::Contact;
use crate::sources::{Document, Webpage};

fn json(view: impl Serialize) -> Result<Value, String> {
    serde_json::to_value(view).map_err(|error| error.to_string())
}

/// The agent a call or chat names, when it has one: its id, for the caller to look its name up.
pub fn agent_of(resource: &Resource) -> Option<&str> {
    match resource {
        Resource::Call(call) => call.agent_id.as_deref(),
        Resource::Chat(chat) => chat.agent_id.as_deref(),
        _ => None,
    }
}

/// The event's `data`; `agent_name` names the agent of a call or chat ([`agent_of`]; null
/// when it no longer exists, as in the API). A call's `recordingUrl` is null: playback links
/// expire, so a receiver fetches the call for one. `Err` for a resource without an API shape
/// here yet.
pub fn render(resource: &Resource, agent_name: Option<&str>) -> Result<Value, String> {
    let names: HashMap<String, String> = match (agent_of(resource), agent_name) {
        (Some(id), Some(name)) => HashMap::from([(id.to_owned(), name.to_owned())]),
        _ => HashMap::new(),
    };
    match resource {
        Resource::Call(call) => json(CallView::of(call, &names, None)),
        Resource::Chat(chat) => json(ChatView::new(chat, &names)),
        Resource::Contact(contact) => json(Contact::from(contact)),
        Resource::Webpage(webpage) => json(Webpage::from(webpage)),
        Resource::Document(document) => json(Document::from(document)),
        Resource::Json(text) => match serde_json::from_str::<Value>(text) {
            Ok(value @ Value::Object(_)) => Ok(value),
            Ok(_) => Err("the event's data is not a JSON object".to_owned()),
            Err(error) => Err(format!("the event's data is not JSON: {error}")),
        },
        Resource::Instructions(instructions) => json(Instructions::from(instructions)),
        Resource::Subteam(subteam) => json(Subteam::from(subteam)),
        Resource::Agent(_) => Err("agents are not rendered for webhooks yet".to_owned()),
    }
}
