//! The gRPC face of the CRM service. The store checks and writes everything it owns; what
//! lives in another service is checked here: assigned users must be users of the team
//! (identity service), and assignments are answered as users.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use switchboard_kit::grpc::{Channel, Reply, reply};
use switchboard_kit::recent::Recent;
use switchboard_kit::write_keys::WriteKey;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, limits};
use switchboard_proto::v1::crm_service_server::{CrmService, CrmServiceServer};
use switchboard_proto::v1::identity_service_client::IdentityServiceClient;
use switchboard_proto::v1::*;
use tonic::Request;
use tonic::service::Routes;

use crate::store::{ContactFilter, ContactSort, CrmStore, bulk_failure};

/// How long a team that was found is trusted to still exist: a deleted team's keys stop at
/// the gateway at once; this only keeps internal callers from writing for unknown teams.
const KNOWN_FOR: Duration = Duration::from_secs(60);
const KNOWN_MAX: usize = 10_000;

#[derive(Clone)]
pub struct CrmApi {
    store: CrmStore,
    identity: IdentityServiceClient<Channel>,
    /// Teams found recently, by when.
    known: Arc<Recent<String>>,
}

pub fn routes(store: CrmStore, identity: IdentityServiceClient<Channel>) -> Routes {
    Routes::new(CrmServiceServer::new(CrmApi { store, identity, known: Arc::new(Recent::new(KNOWN_FOR, KNOWN_MAX)) }))
}

impl CrmApi {
    /// NOT_FOUND unless the team exists: checked before anything is written for it.
    async fn check_team(&self, team_id: &str) -> ServiceResult<()> {
        if self.known.contains(&team_id.to_owned()).await {
            return Ok(());
        }
        if uuid::Uuid::parse_str(team_id).is_err() {
            return Err(ServiceError::validation(vec![FieldViolation::new("teamId", "must be a UUID")]));
        }
        let team = self.identity.clone().get_team(GetTeamRequest { team_id: team_id.to_owned() }).await?;
        if team.into_inner().deleted {
            return Err(ServiceError::team_not_found());
        }
        self.known.remember(team_id.to_owned()).await;
        Ok(())
    }

    /// The team's users by id.
    async fn team_users(&self, team_id: &str) -> ServiceResult<HashMap<String, User>> {
        let request = ListUsersRequest { team_id: team_id.to_owned() };
        let users = self.identity.clone().list_users(request).await?.into_inner().users;
        Ok(users.into_iter().map(|user| (user.id.clone(), user)).collect())
    }

    /// A violation for each id (`field[i]`) that is not one of `users`. Ids that are not
    /// UUIDs are left to the store, which names them too.
    fn unknown_users(field: &str, ids: &[String], users: &HashMap<String, User>) -> Vec<FieldViolation> {
        ids.iter()
            .enumerate()
            .filter(|(_, id)| uuid::Uuid::parse_str(id).is_ok() && !users.contains_key(id.as_str()))
            .map(|(index, id)| {
                FieldViolation::new(format!("{field}[{index}]"), format!("{id} is not a user of the team"))
            })
            .collect()
    }

    fn as_users(ids: Vec<String>, users: &HashMap<String, User>) -> Assignments {
        // A user deleted since the assignment is left out.
        Assignments { users: ids.iter().filter_map(|id| users.get(id).cloned()).collect() }
    }

    fn filter(request: &ListContactsRequest) -> ServiceResult<ContactFilter> {
        let page = request.page.clone().unwrap_or_default();
        let sort =
            if page.sort_by.is_empty() { Some(ContactSort::CreatedAt) } else { ContactSort::parse(&page.sort_by) };
        let Some(sort) = sort else {
            return Err(ServiceError::validation(vec![FieldViolation::new(
                "sortBy",
                "must be one of createdAt, firstName, lastName, email, number",
            )]));
        };
        let limit = if page.limit == 0 { u32::try_from(limits::PAGE_LIMIT.default).unwrap_or(20) } else { page.limit };
        Ok(ContactFilter {
            page: page.page.max(1),
            limit,
            search: request.search.clone(),
            sort,
            ascending: page.ascending,
            tag_ids: request.tag_ids.clone(),
            board_id: request.board_id.clone(),
            stage_id: request.stage_id.clone(),
            assigned_user_id: request.assigned_user_id.clone(),
            number: request.number.clone(),
        })
    }
}

#[tonic::async_trait]
impl CrmService for CrmApi {
    async fn list_contacts(&self, request: Request<ListContactsRequest>) -> Reply<ListContactsResponse> {
        let request = request.into_inner();
        let filter = Self::filter(&request)?;
        reply(self.store.list_contacts(&request.team_id, &filter).await)
    }

    async fn contacts_by_number(&self, request: Request<ContactsByNumberRequest>) -> Reply<ContactsByNumberResponse> {
        let request = request.into_inner();
        let contacts = self.store.contacts_by_number(&request.team_id, &request.numbers).await?;
        reply(Ok(ContactsByNumberResponse { contacts }))
    }

    async fn get_contact(&self, request: Request<ContactRef>) -> Reply<Contact> {
        let request = request.into_inner();
        reply(self.store.contact(&request.team_id, &request.contact_id).await)
    }

    async fn create_contact(&self, request: Request<CreateContactRequest>) -> Reply<Contact> {
        let key = WriteKey::from_metadata(request.metadata());
        let request = request.into_inner();
        self.check_team(&request.team_id).await?;
        let input = request.contact.unwrap_or_default();
        if !input.assign_user_ids.is_empty() {
            let users = self.team_users(&request.team_id).await?;
            let unknown = Self::unknown_users("assignUserIds", &input.assign_user_ids, &users);
            if !unknown.is_empty() {
                return Err(ServiceError::validation(unknown).into());
            }
        }
        reply(self.store.create_contact_once(&request.team_id, &input, &request.actor, key.as_ref()).await)
    }

    async fn update_contact(&self, request: Request<UpdateContactRequest>) -> Reply<Contact> {
        reply(self.store.update_contact(&request.into_inner()).await)
    }

    async fn delete_contact(&self, request: Request<ContactRef>) -> Reply<Contact> {
        let request = request.into_inner();
        reply(self.store.delete_contact(&request.team_id, &request.contact_id).await)
    }

    async fn bulk_create_contacts(
        &self,
        request: Request<BulkCreateContactsRequest>,
    ) -> Reply<BulkCreateContactsResponse> {
        let request = request.into_inner();
        self.check_team(&request.team_id).await?;
        let wants_users = request.contacts.iter().any(|contact| !contact.assign_user_ids.is_empty());
        let users = if wants_users { self.team_users(&request.team_id).await? } else { HashMap::new() };
        // Items assigning strangers fail here; `positions[i]` is the request index of the
        // store's item `i`.
        let (mut positions, mut inputs, mut failed) = (Vec::new(), Vec::new(), Vec::new());
        for (index, input) in request.contacts.into_iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            let unknown = Self::unknown_users("assignUserIds", &input.assign_user_ids, &users);
            if unknown.is_empty() {
                positions.push(index);
                inputs.push(input);
            } else {
                failed.push(bulk_failure(index, ServiceError::validation(unknown)));
            }
        }
        let (created, stored_failures) = if inputs.is_empty() && !failed.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            self.store.bulk_create_contacts(&request.team_id, &inputs, &request.actor).await?
        };
        failed.extend(stored_failures.into_iter().map(|mut failure| {
            let position = usize::try_from(failure.index).ok().and_then(|i| positions.get(i).copied());
            failure.index = position.unwrap_or(failure.index);
            failure
        }));
        failed.sort_by_key(|failure| failure.index);
        Ok(tonic::Response::new(BulkCreateContactsResponse { created, failed }))
    }

    async fn list_notes(&self, request: Request<ContactRef>) -> Reply<ListNotesResponse> {
        let request = request.into_inner();
        let notes = self.store.list_notes(&request.team_id, &request.contact_id).await;
        reply(notes.map(|notes| ListNotesResponse { notes }))
    }

    async fn add_note(&self, request: Request<AddNoteRequest>) -> Reply<Note> {
        let key = WriteKey::from_metadata(request.metadata());
        reply(self.store.add_note_once(&request.into_inner(), key.as_ref()).await)
    }

    async fn delete_note(&self, request: Request<NoteRef>) -> Reply<Note> {
        let request = request.into_inner();
        reply(self.store.delete_note(&request.team_id, &request.contact_id, &request.note_id).await)
    }

    async fn list_assignments(&self, request: Request<ContactRef>) -> Reply<Assignments> {
        let request = request.into_inner();
        let ids = self.store.assignments(&request.team_id, &request.contact_id).await?;
        let users = if ids.is_empty() { HashMap::new() } else { self.team_users(&request.team_id).await? };
        Ok(tonic::Response::new(Self::as_users(ids, &users)))
    }

    async fn assign_users(&self, request: Request<AssignUsersRequest>) -> Reply<Assignments> {
        let request = request.into_inner();
        // The contact first: an unknown contact is 404 whatever the ids.
        self.store.contact(&request.team_id, &request.contact_id).await?;
        let users = self.team_users(&request.team_id).await?;
        let unknown = Self::unknown_users("userIds", &request.user_ids, &users);
        if !unknown.is_empty() {
            return Err(ServiceError::validation(unknown).into());
        }
        let ids = self.store.assign_users(&request).await?;
        Ok(tonic::Response::new(Self::as_users(ids, &users)))
    }

    async fn set_contact_boards(&self, request: Request<SetContactBoardsRequest>) -> Reply<Contact> {
        reply(self.store.set_contact_boards(&request.into_inner()).await)
    }

    async fn list_boards(&self, request: Request<ListBoardsRequest>) -> Reply<ListBoardsResponse> {
        let request = request.into_inner();
        reply(self.store.list_boards(&request.team_id).await.map(|boards| ListBoardsResponse { boards }))
    }

    async fn get_board(&self, request: Request<BoardRef>) -> Reply<Board> {
        let request = request.into_inner();
        reply(self.store.board(&request.team_id, &request.board_id).await)
    }

    async fn create_board(&self, request: Request<CreateBoardRequest>) -> Reply<Board> {
        let request = request.into_inner();
        self.check_team(&request.team_id).await?;
        reply(self.store.create_board(&request).await)
    }

    async fn update_board(&self, request: Request<UpdateBoardRequest>) -> Reply<Board> {
        reply(self.store.update_board(&request.into_inner()).await)
    }

    async fn delete_board(&self, request: Request<BoardRef>) -> Reply<Board> {
        let request = request.into_inner();
        reply(self.store.delete_board(&request.team_id, &request.board_id).await)
    }

    async fn list_tags(&self, request: Request<ListTagsRequest>) -> Reply<ListTagsResponse> {
        let request = request.into_inner();
        reply(self.store.list_tags(&request.team_id).await.map(|tags| ListTagsResponse { tags }))
    }

    async fn create_tag(&self, request: Request<CreateTagRequest>) -> Reply<Tag> {
        let request = request.into_inner();
        self.check_team(&request.team_id).await?;
        reply(self.store.create_tag(&request).await)
    }

    async fn update_tag(&self, request: Request<UpdateTagRequest>) -> Reply<Tag> {
        reply(self.store.update_tag(&request.into_inner()).await)
    }

    async fn delete_tag(&self, request: Request<TagRef>) -> Reply<Tag> {
        let request = request.into_inner();
        reply(self.store.delete_tag(&request.team_id, &request.tag_id).await)
    }

    async fn list_custom_fields(&self, request: Request<ListCustomFieldsRequest>) -> Reply<ListCustomFieldsResponse> {
        let request = request.into_inner();
        reply(self.store.list_custom_fields(&request.team_id).await.map(|fields| ListCustomFieldsResponse { fields }))
    }

    async fn create_custom_field(&self, request: Request<CreateCustomFieldRequest>) -> Reply<CustomField> {
        let request = request.into_inner();
        self.check_team(&request.team_id).await?;
        reply(self.store.create_custom_field(&request).await)
    }

    async fn update_custom_field(&self, request: Request<UpdateCustomFieldRequest>) -> Reply<CustomField> {
        reply(self.store.update_custom_field(&request.into_inner()).await)
    }

    async fn delete_custom_field(&self, request: Request<CustomFieldRef>) -> Reply<CustomField> {
        let request = request.into_inner();
        reply(self.store.delete_custom_field(&request.team_id, &request.field_id).await)
    }
}
