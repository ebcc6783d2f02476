//! Who the people of exported calls and chats are, and where the portal shows each row: the
//! CRM contacts with their numbers, one request a page of rows, and links to the portal's
//! pages for the team the export was of.

use std::collections::HashMap;

use switchboard_api::access::Feature;
use switchboard_kit::ServiceResult;
use switchboard_kit::grpc::Channel;
use switchboard_proto::v1::ContactsByNumberRequest;
use switchboard_proto::v1::crm_service_client::CrmServiceClient;

use crate::call::Call;

/// A page's numbers → their contacts' names.
pub type Contacts = HashMap<String, String>;

pub struct People {
    /// None when the caller's access configuration hides the CRM: then no name is shown.
    crm: Option<CrmServiceClient<Channel>>,
    team_id: String,
    public_base: String,
    /// `?teamId=…` when the export is of a client subteam, so that the portal opens the row in
    /// that team.
    team_query: String,
}

impl People {
    pub fn of(call: &Call) -> Self {
        let crm = Feature::Crm.allowed_for(&call.principal.team).then(|| call.services.crm.clone());
        let subteam = call.team_id() != call.principal.team.id;
        Self {
            crm,
            team_id: call.team_id().to_owned(),
            public_base: call.public_base.trim_end_matches('/').to_owned(),
            team_query: if subteam { format!("?teamId={}", call.team_id()) } else { String::new() },
        }
    }

    /// The names of the contacts that have `numbers`; a number without a contact, or a
    /// contact without a name, is left out.
    pub async fn names<'a>(&self, numbers: impl Iterator<Item = &'a str>) -> ServiceResult<Contacts> {
        let Some(crm) = &self.crm else { return Ok(Contacts::new()) };
        let mut numbers: Vec<String> = numbers.filter(|number| !number.is_empty()).map(str::to_owned).collect();
        numbers.sort_unstable();
        numbers.dedup();
        if numbers.is_empty() {
            return Ok(Contacts::new());
        }
        let request = ContactsByNumberRequest { team_id: self.team_id.clone(), numbers };
        let found = crm.clone().contacts_by_number(request).await?.into_inner().contacts;
        Ok(found
            .into_iter()
            .filter_map(|contact| {
                let parts = [contact.first_name.as_deref(), contact.last_name.as_deref()];
                let name =
                    parts.into_iter().flatten().map(str::trim).filter(|part| !part.is_empty()).collect::<Vec<_>>();
                (!name.is_empty()).then(|| (contact.number, name.join(" ")))
            })
            .collect())
    }

    /// The portal's page of a row, e.g. `https://portal.example/calls/<id>`, with `anchor`
    /// (`#recording`) after the team.
    pub fn page_url(&self, section: &str, id: &str, anchor: &str) -> String {
        format!("{}/{section}/{id}{}{anchor}", self.public_base, self.team_query)
    }
}
