//! The `data` of webhook events: the resource as the API shows it, so that a receiver reads
//! the same shapes as a client of the endpoints. The webhooks service renders each event once,
//! when it is published, through [`render`].

use serde::Serialize;
use serde_json::Value;
use switchboard_proto::v1::event::Resource;

use super::contacts::Contact;
use super::sources::{Document, Webpage};

fn json(view: impl Serialize) -> Result<Value, String> {
    serde_json::to_value(view).map_err(|error| error.to_string())
}

/// The event's `data`; `Err` for a resource that has no API shape here yet.
pub fn render(resource: &Resource) -> Result<Value, String> {
    match resource {
        Resource::Contact(contact) => json(Contact::from(contact)),
        Resource::Webpage(webpage) => json(Webpage::from(webpage)),
        Resource::Document(document) => json(Document::from(document)),
        Resource::Json(text) => match serde_json::from_str::<Value>(text) {
            Ok(value @ Value::Object(_)) => Ok(value),
            Ok(_) => Err("the event's data is not a JSON object".to_owned()),
            Err(error) => Err(format!("the event's data is not JSON: {error}")),
        },
        Resource::Call(_) | Resource::Chat(_) | Resource::Agent(_) => {
            Err("calls, chats and agents are not rendered for webhooks yet".to_owned())
        }
    }
}
