//! `/contacts`: the team's CRM contacts (CRM service) with their notes, assigned users and
//! places on boards. Numbers are stored in E.164; the service normalises any spelling.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use switchboard_api::contacts::{BulkResult, Contact, ContactPage, Note, NoteKind};
use switchboard_api::custom_fields::CustomFieldSchema;
use switchboard_api::tags::Tag;
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceResult, limits};
use switchboard_proto::v1::{
    AddNoteRequest, AssignUsersRequest, BulkCreateContactsRequest, ContactInput, ContactRef, CreateContactRequest,
    ListContactsRequest, NoteRef, SetContactBoardsRequest, TagSelection, UpdateContactRequest,
};

use super::groups::CONTACTS;
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::bulk::{BulkBody, BulkItem, Items};
use crate::endpoint::{
    Answer, Created, Data, Endpoint, Id, IdList, Input, Json, List, Nothing, Patch, Updated, serialized,
};
use crate::reply::Reply;
use switchboard_api::identity::User;
use switchboard_api::paging::{SortOrder, default_limit, descending, first_page, page_request};

const CONTACT_GONE: &str = "Contact not found";
const CONTACT_EXISTS: &str = "A contact with this number already exists (`code` CONTACT_EXISTS, its id in `details`).";

pub fn endpoints() -> Vec<Endpoint> {
    let mut endpoints = vec![
        Endpoint::get("/v1/contacts", list)
            .doc("listContacts", CONTACTS, "The team's contacts, with the team's custom fields and tags")
            .lists("contactId")
            .about(
                "Filters combine. `search` finds a part (case-insensitive) of the first or last name, the \
                 e-mail or the number (`gra` finds Grace, `5552671` finds +14155552671). `tagIds` keeps contacts \
                 carrying every one of the tags. Ties of `sortBy` are broken by id; contacts without the sorted \
                 value come last in either order. Unknown tag, board, stage or user ids match nothing. \
                 `number` finds the one contact with that number, however it is written.",
            )
            .tool("find_contacts", "Finds the team's CRM contacts by name, e-mail or number part, or by tags."),
        Endpoint::post("/v1/contacts", create)
            .audited(AuditAction::ContactCreated)
            .doc("createContact", CONTACTS, "Create a contact")
            .creates("contactId")
            .about(
                "`number` is stored in E.164; a number without a country code is read in the region of \
                 `SWITCHBOARD_DEFAULT_PHONE_REGION` (default US). `tagNames` that the team does not have yet \
                 are created (names match regardless of case); `note` becomes the first note; `boardIds` put \
                 the contact in each board's first stage. All of it is written or none.",
            )
            .fails(404, "Tag not found, or Board not found (an id that is not the team's).")
            .fails(409, CONTACT_EXISTS)
            .tool("create_contact", "Creates a CRM contact from a phone number, with optional names, tags and a note."),
        Endpoint::post("/v1/contacts/bulk", bulk_create)
            .audited(AuditAction::ContactsImported)
            .doc("bulkCreateContacts", CONTACTS, "Create up to 1,000 contacts; each is checked and written alone")
            .about(
                "Counts in the bulk rate class. Each item is a `createContact` body, checked and written on its \
                 own: a bad item is listed in `failed` (by its index in `contacts`, with the code and details \
                 `createContact` would answer) and never blocks the others. A number already in the team, or \
                 earlier in the same request, fails with `CONTACT_EXISTS`, so sending a request again creates \
                 no duplicates.",
            )
            .class(RateClass::Bulk)
            .body_limit(BULK_BODY_BYTES)
            .fails(
                413,
                "The body is larger than 16 MiB (or the gateway's limit, `SWITCHBOARD_MAX_BODY_BYTES`, if larger).",
            ),
        Endpoint::get("/v1/contacts/{contactId}", get)
            .doc("getContact", CONTACTS, "A contact")
            .fails(404, CONTACT_GONE)
            .tool("get_contact", "Reads one CRM contact with its tags, custom fields and stage."),
        Endpoint::put("/v1/contacts/{contactId}", update)
            .audited(AuditAction::ContactUpdated)
            .doc("updateContact", CONTACTS, "Change a contact")
            .about(
                "Members left out keep their value; `null` clears `firstName`, `lastName`, `email` and \
                 `carrier`. `customFields` replaces the values it names (`null` removes one). `tagIds` and \
                 `tagNames`, when either is given, are together the contact's new tags. `crmStageId` moves the \
                 contact to that stage, adding its board if needed.",
            )
            .fails(404, "Contact not found, or Tag not found, or Stage not found.")
            .fails(409, CONTACT_EXISTS),
        Endpoint::delete("/v1/contacts/{contactId}", delete)
            .audited(AuditAction::ContactDeleted)
            .doc("deleteContact", CONTACTS, "Delete a contact with its notes")
            .fails(404, CONTACT_GONE),
        Endpoint::get("/v1/contacts/{contactId}/notes", list_notes)
            .doc("listContactNotes", CONTACTS, "A contact's notes, newest first")
            .lists("noteId")
            .fails(404, CONTACT_GONE),
        Endpoint::post("/v1/contacts/{contactId}/notes", add_note)
            .audited(AuditAction::ContactNoteAdded)
            .doc("addContactNote", CONTACTS, "Add a note to a contact")
            .creates("noteId")
            .about("`createdBy` is the name of the API key that wrote it.")
            .fails(404, CONTACT_GONE)
            .tool("add_contact_note", "Adds a note (general, info, warning or danger) to a CRM contact."),
        Endpoint::delete("/v1/contacts/{contactId}/notes/{noteId}", delete_note)
            .audited(AuditAction::ContactNoteDeleted)
            .doc("deleteContactNote", CONTACTS, "Delete a note of a contact")
            .fails(404, "Contact not found, or Note not found"),
        Endpoint::get("/v1/contacts/{contactId}/assignments", list_assignments)
            .doc("listContactAssignments", CONTACTS, "The team's users assigned to a contact")
            .fails(404, CONTACT_GONE),
        Endpoint::post("/v1/contacts/{contactId}/assignments", add_assignments)
            .audited(AuditAction::ContactAssignmentsChanged)
            .doc("addContactAssignments", CONTACTS, "Assign more users to a contact")
            .about("Users already assigned stay assigned. Each id must be a user of the team (`GET /users`).")
            .fails(404, CONTACT_GONE),
        Endpoint::put("/v1/contacts/{contactId}/assignments", replace_assignments)
            .audited(AuditAction::ContactAssignmentsChanged)
            .doc("replaceContactAssignments", CONTACTS, "Replace the users assigned to a contact")
            .about("An empty `userIds` unassigns everyone. Each id must be a user of the team (`GET /users`).")
            .fails(404, CONTACT_GONE),
        Endpoint::post("/v1/contacts/{contactId}/boards", add_boards)
            .audited(AuditAction::ContactBoardsChanged)
            .doc("addContactBoards", CONTACTS, "Put a contact on more boards")
            .about("On each board it was not on yet, the contact sits in the first stage; the others are unchanged.")
            .fails(404, "Contact not found, or Board not found"),
        Endpoint::put("/v1/contacts/{contactId}/boards", replace_boards)
            .audited(AuditAction::ContactBoardsChanged)
            .doc("replaceContactBoards", CONTACTS, "Set the boards a contact is on")
            .about(
                "The contact leaves the boards not listed; on a board it was not on yet it sits in the first \
                 stage; on the others it keeps its stage.",
            )
            .fails(404, "Contact not found, or Board not found"),
    ];
    endpoints.extend(super::custom_fields::endpoints());
    endpoints
}

/// A contact's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactPath {
    pub contact_id: Id,
}

/// A note of a contact in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotePath {
    pub contact_id: Id,
    pub note_id: Id,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ContactSortBy {
    CreatedAt,
    FirstName,
    LastName,
    Email,
    Number,
}

fn by_creation() -> ContactSortBy {
    ContactSortBy::CreatedAt
}

/// The filters, order and page of a contact list.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactQuery {
    /// The page, from 1.
    #[serde(default = "first_page")]
    #[schemars(range(min = limits::PAGE.min, max = limits::PAGE.max))]
    pub page: u32,
    /// Contacts per page.
    #[serde(default = "default_limit")]
    #[schemars(range(min = limits::PAGE_LIMIT.min, max = limits::PAGE_LIMIT.max))]
    pub limit: u32,
    /// A part of the first or last name, the e-mail or the number (case-insensitive).
    #[schemars(length(min = limits::CONTACT_SEARCH.min, max = limits::CONTACT_SEARCH.max))]
    pub search: Option<String>,
    /// Sort field.
    #[serde(default = "by_creation")]
    pub sort_by: ContactSortBy,
    /// Sort direction; ties are broken by id, so that paging is stable.
    #[serde(default = "descending")]
    pub sort_order: SortOrder,
    /// Comma-separated tag ids: contacts carrying every one of them.
    pub tag_ids: Option<IdList>,
    /// Contacts on this board.
    pub board_id: Option<Id>,
    /// Contacts in this stage.
    pub stage_id: Option<Id>,
    /// Contacts assigned to this user.
    pub assigned_user_id: Option<Id>,
    /// The contact with this number, in any spelling (`(415) 555-2671`, `+14155552671`); a text
    /// that cannot be a phone number is 400.
    #[schemars(length(min = 1, max = 64))]
    pub number: Option<String>,
}

/// A tag's name, as a contact's `tagNames` give it.
#[derive(Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct TagName(#[schemars(length(min = limits::TAG_NAME.min, max = limits::TAG_NAME.max))] pub String);

/// A new contact. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateContact {
    /// Any spelling (`+1 (415) 555-2671`, `(415) 555-2671`); stored in E.164.
    #[schemars(length(min = 1, max = 64))]
    pub number: String,
    #[schemars(length(min = limits::CONTACT_NAME.min, max = limits::CONTACT_NAME.max))]
    pub first_name: Option<String>,
    #[schemars(length(min = limits::CONTACT_NAME.min, max = limits::CONTACT_NAME.max))]
    pub last_name: Option<String>,
    /// Stored lower-case.
    #[schemars(length(min = limits::EMAIL.min, max = limits::EMAIL.max))]
    #[schemars(extend("pattern" = limits::EMAIL_PATTERN))]
    pub email: Option<String>,
    #[schemars(length(min = limits::CARRIER.min, max = limits::CARRIER.max))]
    pub carrier: Option<String>,
    /// Values keyed by custom field `name`, each of its field's type.
    pub custom_fields: Option<Map<String, Value>>,
    /// Tags of the team to put on the contact.
    #[schemars(length(max = limits::ID_LIST.max))]
    pub tag_ids: Option<Vec<Id>>,
    /// Tags by name (regardless of case); missing ones are created.
    #[schemars(length(max = limits::ID_LIST.max))]
    pub tag_names: Option<Vec<TagName>>,
    /// The contact's first note (type general).
    #[schemars(length(min = limits::CONTACT_NOTE.min, max = limits::CONTACT_NOTE.max))]
    pub note: Option<String>,
    /// Users of the team to assign.
    #[schemars(length(max = limits::ID_LIST.max))]
    pub assign_user_ids: Option<Vec<Id>>,
    /// Boards to put the contact on, in their first stage.
    #[schemars(length(max = limits::ID_LIST.max))]
    pub board_ids: Option<Vec<Id>>,
}

/// A partial update: members left out keep their value. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateContact {
    /// Null clears it.
    #[serde(default)]
    #[schemars(length(min = limits::CONTACT_NAME.min, max = limits::CONTACT_NAME.max))]
    pub first_name: Patch<String>,
    /// Null clears it.
    #[serde(default)]
    #[schemars(length(min = limits::CONTACT_NAME.min, max = limits::CONTACT_NAME.max))]
    pub last_name: Patch<String>,
    /// Null clears it.
    #[serde(default)]
    #[schemars(length(min = limits::EMAIL.min, max = limits::EMAIL.max))]
    #[schemars(extend("pattern" = limits::EMAIL_PATTERN))]
    pub email: Patch<String>,
    /// Any spelling; stored in E.164.
    #[schemars(length(min = 1, max = 64))]
    pub number: Option<String>,
    /// Null clears it.
    #[serde(default)]
    #[schemars(length(min = limits::CARRIER.min, max = limits::CARRIER.max))]
    pub carrier: Patch<String>,
    /// Values to set, keyed by custom field `name`; `null` removes a value.
    pub custom_fields: Option<Map<String, Value>>,
    /// Moves the contact to this stage (adding the stage's board if needed).
    pub crm_stage_id: Option<Id>,
    /// With `tagNames`: the contact's new tags.
    #[schemars(length(max = limits::ID_LIST.max))]
    pub tag_ids: Option<Vec<Id>>,
    /// With `tagIds`: the contact's new tags; missing ones are created.
    #[schemars(length(max = limits::ID_LIST.max))]
    pub tag_names: Option<Vec<TagName>>,
}

/// The largest body of a bulk create: 1,000 contacts of 16 KiB each (a note of 5,000
/// characters is up to 20 kB of UTF-8), beyond the gateway's 2 MiB sized for single writes.
const BULK_BODY_BYTES: usize = 16 << 20;

impl BulkBody for CreateContact {
    const ITEM: &'static str = "BulkContact";
    const SINGLE: &'static str = "createContact";
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct BulkContacts {
    #[schemars(length(min = limits::BULK_CONTACTS.min, max = limits::BULK_CONTACTS.max))]
    pub contacts: Vec<BulkItem<CreateContact>>,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct AddNote {
    #[schemars(length(min = limits::CONTACT_NOTE.min, max = limits::CONTACT_NOTE.max))]
    pub note: String,
    /// Default general.
    #[serde(rename = "type")]
    pub kind: Option<NoteKind>,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserIds {
    /// Users of the team (`GET /users`).
    #[schemars(length(max = limits::ID_LIST.max))]
    pub user_ids: Vec<Id>,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BoardIds {
    /// Boards of the team.
    #[schemars(length(max = limits::ID_LIST.max))]
    pub board_ids: Vec<Id>,
}

impl Answer for ContactPage {
    const STATUS: u16 = 200;

    fn into_reply(self) -> Reply {
        serialized(Self::STATUS, &self)
    }
}

fn contact_ref(call: &Call, path: &ContactPath) -> ContactRef {
    ContactRef { team_id: call.team_id().to_owned(), contact_id: path.contact_id.to_string() }
}

fn ids(given: Option<Vec<Id>>) -> Vec<String> {
    given.unwrap_or_default().into_iter().map(Id::into_string).collect()
}

fn names(given: Option<Vec<TagName>>) -> Vec<String> {
    given.unwrap_or_default().into_iter().map(|name| name.0).collect()
}

fn json_object(fields: Option<Map<String, Value>>) -> Option<String> {
    fields.map(|fields| Value::Object(fields).to_string())
}

impl From<CreateContact> for ContactInput {
    fn from(body: CreateContact) -> Self {
        Self {
            number: body.number,
            first_name: body.first_name,
            last_name: body.last_name,
            email: body.email,
            carrier: body.carrier,
            custom_fields: json_object(body.custom_fields).unwrap_or_default(),
            tag_ids: ids(body.tag_ids),
            tag_names: names(body.tag_names),
            note: body.note,
            assign_user_ids: ids(body.assign_user_ids),
            board_ids: ids(body.board_ids),
        }
    }
}

/// A cleared member is the empty string in the service's request.
fn patch(given: Patch<String>) -> Option<String> {
    match given {
        Patch::Absent => None,
        Patch::Null => Some(String::new()),
        Patch::Value(value) => Some(value),
    }
}

async fn list(call: Call, input: Input<Nothing, ContactQuery>) -> ServiceResult<ContactPage> {
    let query = input.query;
    let sort_by = match query.sort_by {
        ContactSortBy::CreatedAt => "createdAt",
        ContactSortBy::FirstName => "firstName",
        ContactSortBy::LastName => "lastName",
        ContactSortBy::Email => "email",
        ContactSortBy::Number => "number",
    };
    let request = ListContactsRequest {
        team_id: call.team_id().to_owned(),
        page: Some(page_request(query.page, query.limit, sort_by, query.sort_order)),
        search: query.search,
        tag_ids: query.tag_ids.map(IdList::into_strings).unwrap_or_default(),
        board_id: query.board_id.map(Id::into_string),
        stage_id: query.stage_id.map(Id::into_string),
        assigned_user_id: query.assigned_user_id.map(Id::into_string),
        number: query.number,
    };
    let listed = call.services.crm.clone().list_contacts(request).await?.into_inner();
    Ok(ContactPage {
        data: listed.contacts.iter().map(Contact::from).collect(),
        pagination: listed.page.unwrap_or_default().into(),
        custom_field_schemas: listed.custom_field_schemas.iter().map(CustomFieldSchema::from).collect(),
        available_tags: listed.available_tags.iter().map(Tag::from).collect(),
    })
}

async fn get(call: Call, input: Input<ContactPath>) -> ServiceResult<Data<Contact>> {
    let contact = call.services.crm.clone().get_contact(contact_ref(&call, &input.path)).await?.into_inner();
    Ok(Data::new(Contact::from(&contact)))
}

async fn create(call: Call, input: Input<Nothing, Nothing, Json<CreateContact>>) -> ServiceResult<Created<Contact>> {
    let request = CreateContactRequest {
        team_id: call.team_id().to_owned(),
        contact: Some(ContactInput::from(input.body.0)),
        actor: call.principal.actor().name,
    };
    let contact = call.services.crm.clone().create_contact(request).await?.into_inner();
    Ok(Created::new(Contact::from(&contact), "Contact created successfully"))
}

async fn bulk_create(
    call: Call,
    input: Input<Nothing, Nothing, Json<BulkContacts>>,
) -> ServiceResult<Data<BulkResult>> {
    let mut items = Items::read(input.body.0.contacts);
    let mut created = Vec::new();
    let mut failed = Vec::new();
    if !items.parsed.is_empty() {
        let request = BulkCreateContactsRequest {
            team_id: call.team_id().to_owned(),
            contacts: std::mem::take(&mut items.parsed).into_iter().map(ContactInput::from).collect(),
            actor: call.principal.actor().name,
        };
        let answer = call.services.crm.clone().bulk_create_contacts(request).await?.into_inner();
        created = answer.created.iter().map(Contact::from).collect();
        failed = answer.failed;
    }
    Ok(Data::new(BulkResult { created, failed: items.failures(failed) }))
}

async fn update(
    call: Call,
    input: Input<ContactPath, Nothing, Json<UpdateContact>>,
) -> ServiceResult<Updated<Contact>> {
    let body = input.body.0;
    let tags = (body.tag_ids.is_some() || body.tag_names.is_some())
        .then(|| TagSelection { tag_ids: ids(body.tag_ids), tag_names: names(body.tag_names) });
    let request = UpdateContactRequest {
        team_id: call.team_id().to_owned(),
        contact_id: input.path.contact_id.into_string(),
        first_name: patch(body.first_name),
        last_name: patch(body.last_name),
        email: patch(body.email),
        number: body.number,
        carrier: patch(body.carrier),
        custom_fields: json_object(body.custom_fields),
        crm_stage_id: body.crm_stage_id.map(Id::into_string),
        tags,
    };
    let contact = call.services.crm.clone().update_contact(request).await?.into_inner();
    Ok(Updated::new(Contact::from(&contact), "Contact updated successfully"))
}

async fn delete(call: Call, input: Input<ContactPath>) -> ServiceResult<Updated<Contact>> {
    let contact = call.services.crm.clone().delete_contact(contact_ref(&call, &input.path)).await?.into_inner();
    Ok(Updated::new(Contact::from(&contact), "Contact deleted successfully"))
}

async fn list_notes(call: Call, input: Input<ContactPath>) -> ServiceResult<List<Note>> {
    let notes = call.services.crm.clone().list_notes(contact_ref(&call, &input.path)).await?.into_inner().notes;
    Ok(List::new(notes.iter().map(Note::from).collect()))
}

async fn add_note(call: Call, input: Input<ContactPath, Nothing, Json<AddNote>>) -> ServiceResult<Created<Note>> {
    let body = input.body.0;
    let request = AddNoteRequest {
        team_id: call.team_id().to_owned(),
        contact_id: input.path.contact_id.into_string(),
        note: body.note,
        r#type: body.kind.unwrap_or(NoteKind::General).as_str().to_owned(),
        actor: call.principal.actor().name,
    };
    let note = call.services.crm.clone().add_note(request).await?.into_inner();
    Ok(Created::new(Note::from(&note), "Note added successfully"))
}

async fn delete_note(call: Call, input: Input<NotePath>) -> ServiceResult<Updated<Note>> {
    let request = NoteRef {
        team_id: call.team_id().to_owned(),
        contact_id: input.path.contact_id.into_string(),
        note_id: input.path.note_id.into_string(),
    };
    let note = call.services.crm.clone().delete_note(request).await?.into_inner();
    Ok(Updated::new(Note::from(&note), "Note deleted successfully"))
}

async fn list_assignments(call: Call, input: Input<ContactPath>) -> ServiceResult<List<User>> {
    let users = call.services.crm.clone().list_assignments(contact_ref(&call, &input.path)).await?.into_inner().users;
    Ok(List::new(users.iter().map(User::from).collect()))
}

async fn assign(call: &Call, path: ContactPath, body: UserIds, replace: bool) -> ServiceResult<List<User>> {
    let request = AssignUsersRequest {
        team_id: call.team_id().to_owned(),
        contact_id: path.contact_id.into_string(),
        user_ids: ids(Some(body.user_ids)),
        replace,
    };
    let users = call.services.crm.clone().assign_users(request).await?.into_inner().users;
    Ok(List::new(users.iter().map(User::from).collect()))
}

async fn add_assignments(call: Call, input: Input<ContactPath, Nothing, Json<UserIds>>) -> ServiceResult<List<User>> {
    assign(&call, input.path, input.body.0, false).await
}

async fn replace_assignments(
    call: Call,
    input: Input<ContactPath, Nothing, Json<UserIds>>,
) -> ServiceResult<List<User>> {
    assign(&call, input.path, input.body.0, true).await
}

async fn set_boards(call: &Call, path: ContactPath, body: BoardIds, replace: bool) -> ServiceResult<Updated<Contact>> {
    let request = SetContactBoardsRequest {
        team_id: call.team_id().to_owned(),
        contact_id: path.contact_id.into_string(),
        board_ids: ids(Some(body.board_ids)),
        replace,
    };
    let contact = call.services.crm.clone().set_contact_boards(request).await?.into_inner();
    Ok(Updated::new(Contact::from(&contact), "Contact boards updated successfully"))
}

async fn add_boards(call: Call, input: Input<ContactPath, Nothing, Json<BoardIds>>) -> ServiceResult<Updated<Contact>> {
    set_boards(&call, input.path, input.body.0, false).await
}

async fn replace_boards(
    call: Call,
    input: Input<ContactPath, Nothing, Json<BoardIds>>,
) -> ServiceResult<Updated<Contact>> {
    set_boards(&call, input.path, input.body.0, true).await
}
