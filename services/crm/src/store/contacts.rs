//! Contacts: created alone or in bulk (one path: a single create is a bulk of one), read with
//! their tags, stage, boards and custom field values, updated, deleted and listed.
//!
//! A contact is named by its number (E.164) within the team: a second contact with the same
//! number is refused with `CONTACT_EXISTS` and the first one's id. Its searchable text (name,
//! e-mail, number, lowercased) lives in `contact_search`, changed in the same transaction as
//! the contact; see `switchboard_kit::listing` for how it is indexed on each engine.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::db::Engine;
use switchboard_kit::limits::{self, Length};
use switchboard_kit::listing::{self, Arg, Filter, Listing, Step, TextIndex, Total};
use switchboard_kit::phone;
use switchboard_kit::time::now_ms;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, validate};
use switchboard_proto::v1::{
    Contact, ContactInput, CrmStage, CustomField, ListContactsResponse, Tag, UpdateContactRequest,
};

use super::fields::{self, ValueChanges};
use super::tags::{self, name_key};
use super::{
    ContactFilter, ContactSort, CrmStore, Val, board_not_found, check_ids, contact_exists, contact_not_found,
    count_violation, distinct, id_list_violations, insert_rows, select_in, stage_not_found, tag_not_found,
    uuid_violation,
};

/// Where a contact search reads: one short row per contact, so that up to 10,000 matches are
/// carried by id (a search sorted by last name walked far along its index otherwise, many
/// times slower: BENCHMARKS.md, "Why the lists are planned the way they are").
const CONTACT_TEXT: TextIndex = TextIndex {
    table: "contact_search",
    fts_table: "contact_search_fts",
    owner_column: "contact_id",
    carried_rows: 10_000,
    signature_column: None,
};

const CONTACT_COLUMNS: &str =
    "c.id, c.team_id, c.number, c.first_name, c.last_name, c.email, c.carrier, c.created_at, c.updated_at";

/// Who wrote a note: the API key's name as the service passes it.
pub(super) const ACTOR: Length = Length::new(1, 255);

fn contact_from_row(row: &AnyRow) -> Result<Contact, sqlx::Error> {
    Ok(Contact {
        id: row.try_get("id")?,
        team_id: row.try_get("team_id")?,
        first_name: row.try_get("first_name")?,
        last_name: row.try_get("last_name")?,
        email: row.try_get("email")?,
        number: row.try_get("number")?,
        carrier: row.try_get("carrier")?,
        custom_fields: "{}".to_owned(),
        tags: Vec::new(),
        crm_stage: None,
        board_ids: Vec::new(),
        created_at_ms: row.try_get("created_at")?,
        updated_at_ms: row.try_get("updated_at")?,
    })
}

/// The contact without its tags, stage, boards and values, if the team has it; `lock` is
/// `Db::for_update` in a writing transaction.
pub(super) async fn find_contact(
    conn: &mut AnyConnection,
    team_id: &str,
    contact_id: &str,
    lock: &str,
) -> ServiceResult<Contact> {
    let sql = format!("SELECT {CONTACT_COLUMNS} FROM contacts c WHERE c.team_id = $1 AND c.id = $2{lock}");
    let row = sqlx::query(&sql).bind(team_id).bind(contact_id).fetch_optional(conn).await?;
    row.as_ref().map(contact_from_row).transpose()?.ok_or_else(contact_not_found)
}

/// Fills in the tags (by name regardless of case), boards (in the order the contact was
/// placed on them), stage (the latest placement) and custom field values (in the fields'
/// order) of `contacts`, a few queries for all of them.
pub(super) async fn hydrate(conn: &mut AnyConnection, mut contacts: Vec<Contact>) -> ServiceResult<Vec<Contact>> {
    if contacts.is_empty() {
        return Ok(contacts);
    }
    let ids: Vec<String> = contacts.iter().map(|contact| contact.id.clone()).collect();
    let tag_rows = select_in(
        conn,
        "SELECT ct.contact_id, t.id, t.name, t.color, t.created_at FROM contact_tags ct JOIN tags t ON t.id = ct.tag_id \
         WHERE ct.contact_id IN ({ids}) ORDER BY t.name_key, t.id",
        &[],
        &ids,
    )
    .await?;
    let mut tags: HashMap<String, Vec<Tag>> = HashMap::new();
    for row in &tag_rows {
        tags.entry(row.try_get("contact_id")?).or_default().push(tags::tag_from_row(row)?);
    }
    let placement_rows = select_in(
        conn,
        "SELECT p.contact_id, p.board_id, p.stage_id, s.name FROM contact_placements p JOIN stages s ON s.id = p.stage_id \
         WHERE p.contact_id IN ({ids}) ORDER BY p.placed_at, p.board_id",
        &[],
        &ids,
    )
    .await?;
    let mut placements: HashMap<String, Vec<CrmStage>> = HashMap::new();
    for row in &placement_rows {
        let stage =
            CrmStage { id: row.try_get("stage_id")?, name: row.try_get("name")?, board_id: row.try_get("board_id")? };
        placements.entry(row.try_get("contact_id")?).or_default().push(stage);
    }
    let value_rows = select_in(
        conn,
        "SELECT v.contact_id, f.name, v.value FROM contact_field_values v JOIN custom_fields f ON f.id = v.field_id \
         WHERE v.contact_id IN ({ids}) ORDER BY f.created_at, f.id",
        &[],
        &ids,
    )
    .await?;
    let mut values: HashMap<String, Map<String, Value>> = HashMap::new();
    for row in &value_rows {
        let value: String = row.try_get("value")?;
        let value: Value = serde_json::from_str(&value).map_err(|error| {
            ServiceError::internal(anyhow::Error::new(error).context("reading a custom field value"))
        })?;
        values.entry(row.try_get("contact_id")?).or_default().insert(row.try_get("name")?, value);
    }
    for contact in &mut contacts {
        contact.tags = tags.remove(&contact.id).unwrap_or_default();
        let placed = placements.remove(&contact.id).unwrap_or_default();
        contact.board_ids = placed.iter().map(|stage| stage.board_id.clone()).collect();
        contact.crm_stage = placed.into_iter().last();
        contact.custom_fields = Value::Object(values.remove(&contact.id).unwrap_or_default()).to_string();
    }
    Ok(contacts)
}

pub(super) async fn hydrate_one(conn: &mut AnyConnection, contact: Contact) -> ServiceResult<Contact> {
    hydrate(conn, vec![contact])
        .await?
        .pop()
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("a contact went missing while reading it")))
}

/// The team's contacts of these ids, whole, by id.
async fn contacts_by_ids(
    conn: &mut AnyConnection,
    team_id: &str,
    ids: &[String],
) -> ServiceResult<HashMap<String, Contact>> {
    let sql = format!("SELECT {CONTACT_COLUMNS} FROM contacts c WHERE c.team_id = $1 AND c.id IN ({{ids}})");
    let rows = select_in(conn, &sql, &[team_id], ids).await?;
    let contacts = rows.iter().map(contact_from_row).collect::<Result<Vec<_>, _>>()?;
    Ok(hydrate(conn, contacts).await?.into_iter().map(|contact| (contact.id.clone(), contact)).collect())
}

/// What a search finds a contact by: its full name, e-mail and number, lowercased, one per
/// line (a query is one line, so it cannot match across two).
fn search_body(contact: &Contact) -> String {
    let name = format!(
        "{} {}",
        contact.first_name.as_deref().unwrap_or_default(),
        contact.last_name.as_deref().unwrap_or_default()
    );
    let lines = [name.trim(), contact.email.as_deref().unwrap_or_default(), contact.number.as_str()];
    lines.into_iter().filter(|line| !line.is_empty()).collect::<Vec<_>>().join("\n").to_lowercase()
}

/// The sort key of a name: lowercased, so that `ada` and `Ada` sort together.
fn sort_key(name: Option<&str>) -> Option<String> {
    name.map(str::to_lowercase)
}

/// The team's contacts that have these numbers: number → id.
async fn numbers_in_use(
    conn: &mut AnyConnection,
    team_id: &str,
    numbers: &[String],
) -> ServiceResult<HashMap<String, String>> {
    let rows = select_in(
        conn,
        "SELECT id, number FROM contacts WHERE team_id = $1 AND number IN ({ids})",
        &[team_id],
        numbers,
    )
    .await?;
    rows.iter().map(|row| Ok((row.try_get("number")?, row.try_get("id")?))).collect()
}

/// The first stage (lowest position) of each of these boards that is the team's.
pub(super) async fn first_stages(
    conn: &mut AnyConnection,
    team_id: &str,
    board_ids: &[String],
) -> ServiceResult<HashMap<String, String>> {
    let rows = select_in(
        conn,
        "SELECT s.board_id, s.id FROM stages s WHERE s.team_id = $1 AND s.board_id IN ({ids}) ORDER BY s.position, s.id",
        &[team_id],
        board_ids,
    )
    .await?;
    let mut first = HashMap::new();
    for row in &rows {
        first.entry(row.try_get("board_id")?).or_insert(row.try_get("id")?);
    }
    Ok(first)
}

/// Puts the contact in `stage_id` on its board (moving it if it sits elsewhere on that
/// board), as its latest placement: `placed_at` is kept increasing per contact, so that two
/// placements within one millisecond still have an order.
pub(super) async fn place(
    conn: &mut AnyConnection,
    team_id: &str,
    contact_id: &str,
    (board_id, stage_id): (&str, &str),
) -> ServiceResult<()> {
    let latest: Option<i64> =
        sqlx::query("SELECT MAX(placed_at) AS latest FROM contact_placements WHERE contact_id = $1")
            .bind(contact_id)
            .fetch_one(&mut *conn)
            .await?
            .try_get("latest")?;
    let placed_at = latest.map_or(now_ms(), |latest| now_ms().max(latest + 1));
    sqlx::query(
        "INSERT INTO contact_placements (contact_id, board_id, stage_id, team_id, placed_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (contact_id, board_id) DO UPDATE SET stage_id = excluded.stage_id, placed_at = excluded.placed_at",
    )
    .bind(contact_id)
    .bind(board_id)
    .bind(stage_id)
    .bind(team_id)
    .bind(placed_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) async fn touch(conn: &mut AnyConnection, contact_id: &str) -> ServiceResult<i64> {
    let now = now_ms();
    sqlx::query("UPDATE contacts SET updated_at = $1 WHERE id = $2").bind(now).bind(contact_id).execute(conn).await?;
    Ok(now)
}

/// A name or carrier as given: trimmed, and empty is none.
fn text_value(field: &str, value: &str, length: Length, violations: &mut Vec<FieldViolation>) -> Option<String> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    match length.check(field, value) {
        Some(violation) => {
            violations.push(violation);
            None
        }
        None => Some(value.to_owned()),
    }
}

/// An e-mail as given: trimmed and lowercased, and empty is none.
fn email_value(value: &str, violations: &mut Vec<FieldViolation>) -> Option<String> {
    let value = value.trim().to_lowercase();
    if value.is_empty() {
        return None;
    }
    if !limits::is_email(&value) || value.contains('\0') {
        violations.push(FieldViolation::new("email", "must be an e-mail address"));
        return None;
    }
    Some(value)
}

/// A new contact, checked, with its id.
struct NewContact {
    id: String,
    number: String,
    first_name: Option<String>,
    last_name: Option<String>,
    email: Option<String>,
    carrier: Option<String>,
    /// By field id, compact JSON.
    values: Vec<(String, String)>,
    tag_ids: Vec<String>,
    tag_names: Vec<String>,
    note: Option<String>,
    user_ids: Vec<String>,
    /// (board, its first stage), in the order given.
    boards: Vec<(String, String)>,
}

/// What the team has of what a create names: its fields, the named tags and boards.
struct Known {
    fields: Vec<CustomField>,
    tags: HashMap<String, Tag>,
    first_stages: HashMap<String, String>,
}

impl Known {
    async fn load(conn: &mut AnyConnection, team_id: &str, inputs: &[ContactInput]) -> ServiceResult<Known> {
        let uuids = |ids: Vec<&String>| -> Vec<String> {
            distinct(ids.into_iter().filter(|id| uuid::Uuid::parse_str(id).is_ok()).cloned())
        };
        let tag_ids = uuids(inputs.iter().flat_map(|input| &input.tag_ids).collect());
        let board_ids = uuids(inputs.iter().flat_map(|input| &input.board_ids).collect());
        Ok(Known {
            fields: fields::team_fields(conn, team_id).await?,
            tags: tags::tags_by_id(conn, team_id, &tag_ids).await?,
            first_stages: first_stages(conn, team_id, &board_ids).await?,
        })
    }
}

/// Checks a tag selection (ids and names, of a create or an update) for violations.
fn tag_violations(tag_ids: &[String], tag_names: &[String], violations: &mut Vec<FieldViolation>) {
    violations.extend(id_list_violations("tagIds", tag_ids));
    violations.extend(count_violation("tagNames", tag_names.len()));
    for (index, name) in tag_names.iter().enumerate() {
        violations.extend(limits::TAG_NAME.check(&format!("tagNames[{index}]"), name.trim()));
    }
}

impl CrmStore {
    fn number_value(&self, value: &str, violations: &mut Vec<FieldViolation>) -> Option<String> {
        if value.trim().is_empty() {
            violations.push(FieldViolation::new("number", "is required"));
            return None;
        }
        match self.phone.normalise(value) {
            Ok(number) => Some(number),
            Err(message) => {
                violations.push(FieldViolation::new("number", message));
                None
            }
        }
    }

    /// Checks a new contact: every violation at once, then the tags and boards it names.
    fn prepare(&self, known: &Known, input: &ContactInput, actor: &str) -> ServiceResult<NewContact> {
        let mut violations = Vec::new();
        let number = self.number_value(&input.number, &mut violations);
        let first_name = input
            .first_name
            .as_deref()
            .and_then(|name| text_value("firstName", name, limits::CONTACT_NAME, &mut violations));
        let last_name = input
            .last_name
            .as_deref()
            .and_then(|name| text_value("lastName", name, limits::CONTACT_NAME, &mut violations));
        let email = input.email.as_deref().and_then(|email| email_value(email, &mut violations));
        let carrier = input
            .carrier
            .as_deref()
            .and_then(|carrier| text_value("carrier", carrier, limits::CARRIER, &mut violations));
        let values = match fields::parse_object(&input.custom_fields) {
            Ok(given) => fields::check_values(&known.fields, &given, true, &mut violations),
            Err(violation) => {
                violations.push(violation);
                Vec::new()
            }
        };
        tag_violations(&input.tag_ids, &input.tag_names, &mut violations);
        if let Some(note) = &input.note {
            violations.extend(limits::CONTACT_NOTE.check("note", note));
            violations.extend(ACTOR.check("actor", actor));
        }
        violations.extend(id_list_violations("assignUserIds", &input.assign_user_ids));
        violations.extend(id_list_violations("boardIds", &input.board_ids));
        validate(violations.into_iter().map(Some))?;

        let tag_ids = distinct(input.tag_ids.iter().cloned());
        if tag_ids.iter().any(|id| !known.tags.contains_key(id)) {
            return Err(tag_not_found());
        }
        let mut boards = Vec::new();
        for board_id in distinct(input.board_ids.iter().cloned()) {
            let stage = known.first_stages.get(&board_id).ok_or_else(board_not_found)?;
            boards.push((board_id, stage.clone()));
        }
        Ok(NewContact {
            id: uuid::Uuid::now_v7().to_string(),
            number: number.unwrap_or_default(),
            first_name,
            last_name,
            email,
            carrier,
            values: values.into_iter().filter_map(|(field, value)| value.map(|value| (field, value))).collect(),
            tag_ids,
            tag_names: input.tag_names.iter().map(|name| name.trim().to_owned()).collect(),
            note: input.note.clone(),
            user_ids: distinct(input.assign_user_ids.iter().cloned()),
            boards,
        })
    }

    /// Creates each contact alone, in one transaction: a contact that fails (invalid, naming
    /// an unknown tag or board, or with a number the team or an earlier item has) is not
    /// written and does not keep the others from being written. Numbers are checked in one
    /// query and every part goes in with a few multi-row statements, so 1,000 contacts take
    /// a few dozen statements rather than thousands.
    async fn create_contacts(
        &self,
        team_id: &str,
        inputs: &[ContactInput],
        actor: &str,
    ) -> ServiceResult<Vec<ServiceResult<Contact>>> {
        check_ids(&[("teamId", team_id)])?;
        let mut tx = self.db.begin_write().await?;
        let known = Known::load(&mut tx, team_id, inputs).await?;
        let mut outcomes: Vec<ServiceResult<NewContact>> =
            inputs.iter().map(|input| self.prepare(&known, input, actor)).collect();

        let numbers: Vec<String> = outcomes.iter().flatten().map(|new| new.number.clone()).collect();
        let mut owners = numbers_in_use(&mut tx, team_id, &numbers).await?;
        for outcome in &mut outcomes {
            let Ok(new) = outcome else { continue };
            if let Some(owner) = owners.get(&new.number) {
                *outcome = Err(contact_exists(owner));
            } else {
                owners.insert(new.number.clone(), new.id.clone());
            }
        }

        let now = now_ms();
        let rows: Vec<Vec<Val>> = outcomes
            .iter()
            .flatten()
            .map(|new| {
                vec![
                    Val::Text(new.id.clone()),
                    Val::Text(team_id.to_owned()),
                    Val::Text(new.number.clone()),
                    Val::OptText(new.first_name.clone()),
                    Val::OptText(new.last_name.clone()),
                    Val::OptText(new.email.clone()),
                    Val::OptText(new.carrier.clone()),
                    Val::OptText(sort_key(new.first_name.as_deref())),
                    Val::OptText(sort_key(new.last_name.as_deref())),
                    Val::Int(now),
                    Val::Int(now),
                ]
            })
            .collect();
        let head = "INSERT INTO contacts (id, team_id, number, first_name, last_name, email, carrier, first_name_key, \
                    last_name_key, created_at, updated_at)";
        // A number taken by a concurrent request since the check above is skipped, not an
        // error that would undo the whole transaction.
        let inserted =
            insert_rows(&mut tx, head, " ON CONFLICT (team_id, number) DO NOTHING RETURNING id", &rows).await?;
        let inserted: HashSet<String> = inserted.iter().map(|row| row.try_get("id")).collect::<Result<_, _>>()?;
        let lost: Vec<String> =
            outcomes.iter().flatten().filter(|new| !inserted.contains(&new.id)).map(|new| new.number.clone()).collect();
        if !lost.is_empty() {
            let owners = numbers_in_use(&mut tx, team_id, &lost).await?;
            for outcome in &mut outcomes {
                if let Ok(new) = outcome
                    && !inserted.contains(&new.id)
                {
                    *outcome = Err(contact_exists(owners.get(&new.number).map_or("", String::as_str)));
                }
            }
        }

        let created: Vec<&NewContact> = outcomes.iter().flatten().collect();
        write_parts(&mut tx, team_id, &created, actor, now).await?;
        let ids: Vec<String> = created.iter().map(|new| new.id.clone()).collect();
        let mut contacts = contacts_by_ids(&mut tx, team_id, &ids).await?;
        for contact in ids.iter().filter_map(|id| contacts.get(id)) {
            told(&mut tx, CONTACT_CREATED, contact).await?;
        }
        tx.commit().await?;
        Ok(outcomes
            .into_iter()
            .map(|outcome| {
                outcome.and_then(|new| {
                    contacts.remove(&new.id).ok_or_else(|| {
                        ServiceError::internal(anyhow::anyhow!("a created contact went missing while reading it"))
                    })
                })
            })
            .collect())
    }

    /// Creates a contact with its tags (by id, or by name: created when missing), custom
    /// field values, first note (by `actor`), assigned users and boards (each in its first
    /// stage; the last one given is its `crmStage`), all in one transaction.
    pub async fn create_contact(&self, team_id: &str, input: &ContactInput, actor: &str) -> ServiceResult<Contact> {
        let mut outcomes = self.create_contacts(team_id, std::slice::from_ref(input), actor).await?;
        outcomes.pop().unwrap_or_else(|| Err(ServiceError::internal(anyhow::anyhow!("a create returned nothing"))))
    }

    /// Creates 1 to `BULK_CONTACTS` contacts, each checked and written alone: the created
    /// ones, and the failures by index (a number repeated in the request fails the later
    /// items with `CONTACT_EXISTS`, so sending the same request twice creates nothing new).
    pub async fn bulk_create_contacts(
        &self,
        team_id: &str,
        inputs: &[ContactInput],
        actor: &str,
    ) -> ServiceResult<(Vec<Contact>, Vec<switchboard_proto::v1::BulkFailure>)> {
        validate([
            uuid_violation("teamId", team_id),
            limits::BULK_CONTACTS.check("contacts", i64::try_from(inputs.len()).unwrap_or(i64::MAX)),
        ])?;
        let outcomes = self.create_contacts(team_id, inputs, actor).await?;
        let (mut created, mut failed) = (Vec::new(), Vec::new());
        for (index, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(contact) => created.push(contact),
                Err(error) => failed.push(bulk_failure(u32::try_from(index).unwrap_or(u32::MAX), error)),
            }
        }
        Ok((created, failed))
    }

    /// The contact with its tags, stage, boards and custom field values.
    pub async fn contact(&self, team_id: &str, contact_id: &str) -> ServiceResult<Contact> {
        check_ids(&[("teamId", team_id), ("contactId", contact_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        let contact = find_contact(&mut conn, team_id, contact_id, "").await?;
        hydrate_one(&mut conn, contact).await
    }

    /// Changes what the request gives (see `UpdateContactRequest`), all or nothing: an empty
    /// name, e-mail or carrier clears it; a new number must not be another contact's; custom
    /// field values merge by name (null removes one, which a required field refuses); a stage
    /// moves the contact there (adding its board); `tags` replaces the tags. `updatedAt`
    /// moves whenever the request changes anything.
    pub async fn update_contact(&self, request: &UpdateContactRequest) -> ServiceResult<Contact> {
        let (team_id, contact_id) = (request.team_id.as_str(), request.contact_id.as_str());
        check_ids(&[("teamId", team_id), ("contactId", contact_id)])?;
        let mut violations = Vec::new();
        let number = request.number.as_deref().map(|number| self.number_value(number, &mut violations));
        let first_name = request
            .first_name
            .as_deref()
            .map(|name| text_value("firstName", name, limits::CONTACT_NAME, &mut violations));
        let last_name = request
            .last_name
            .as_deref()
            .map(|name| text_value("lastName", name, limits::CONTACT_NAME, &mut violations));
        let email = request.email.as_deref().map(|email| email_value(email, &mut violations));
        let carrier =
            request.carrier.as_deref().map(|carrier| text_value("carrier", carrier, limits::CARRIER, &mut violations));
        let given_values = match request.custom_fields.as_deref().map(fields::parse_object) {
            Some(Ok(given)) => Some(given),
            Some(Err(violation)) => {
                violations.push(violation);
                None
            }
            None => None,
        };
        violations.extend(request.crm_stage_id.as_deref().and_then(|id| uuid_violation("crmStageId", id)));
        if let Some(selection) = &request.tags {
            tag_violations(&selection.tag_ids, &selection.tag_names, &mut violations);
        }

        let mut tx = self.db.begin_write().await?;
        let current = find_contact(&mut tx, team_id, contact_id, self.db.for_update()).await?;
        let changes: ValueChanges = match &given_values {
            Some(given) => {
                let team_fields = fields::team_fields(&mut tx, team_id).await?;
                fields::check_values(&team_fields, given, false, &mut violations)
            }
            None => Vec::new(),
        };
        validate(violations.into_iter().map(Some))?;

        let tag_ids = request.tags.as_ref().map(|selection| distinct(selection.tag_ids.iter().cloned()));
        if let Some(tag_ids) = &tag_ids {
            let found = tags::tags_by_id(&mut tx, team_id, tag_ids).await?;
            if found.len() != tag_ids.len() {
                return Err(tag_not_found());
            }
        }
        let stage = match &request.crm_stage_id {
            Some(stage_id) => Some(find_stage(&mut tx, team_id, stage_id).await?),
            None => None,
        };

        let mut contact = current.clone();
        if let Some(number) = number.flatten() {
            contact.number = number;
        }
        if let Some(first_name) = first_name {
            contact.first_name = first_name;
        }
        if let Some(last_name) = last_name {
            contact.last_name = last_name;
        }
        if let Some(email) = email {
            contact.email = email;
        }
        if let Some(carrier) = carrier {
            contact.carrier = carrier;
        }
        if contact.number != current.number {
            let owners = numbers_in_use(&mut tx, team_id, std::slice::from_ref(&contact.number)).await?;
            if let Some(owner) = owners.get(&contact.number) {
                return Err(contact_exists(owner));
            }
        }

        let now = now_ms();
        let written = sqlx::query(
            "UPDATE contacts SET number = $1, first_name = $2, last_name = $3, email = $4, carrier = $5, \
             first_name_key = $6, last_name_key = $7, updated_at = $8 WHERE id = $9",
        )
        .bind(contact.number.as_str())
        .bind(contact.first_name.as_deref())
        .bind(contact.last_name.as_deref())
        .bind(contact.email.as_deref())
        .bind(contact.carrier.as_deref())
        .bind(sort_key(contact.first_name.as_deref()))
        .bind(sort_key(contact.last_name.as_deref()))
        .bind(now)
        .bind(contact.id.as_str())
        .execute(&mut *tx)
        .await;
        if let Err(error) = written {
            if switchboard_kit::db::is_unique_violation(&error) {
                // A concurrent request took the number after the check above.
                drop(tx);
                let mut conn = self.db.pool().acquire().await?;
                let owners = numbers_in_use(&mut conn, team_id, std::slice::from_ref(&contact.number)).await?;
                return Err(contact_exists(owners.get(&contact.number).map_or("", String::as_str)));
            }
            return Err(error.into());
        }
        let body = search_body(&contact);
        if body != search_body(&current) {
            sqlx::query("UPDATE contact_search SET body = $1 WHERE contact_id = $2")
                .bind(body)
                .bind(contact.id.as_str())
                .execute(&mut *tx)
                .await?;
        }
        write_values(&mut tx, team_id, &contact.id, &changes).await?;
        if let (Some(selection), Some(tag_ids)) = (&request.tags, tag_ids) {
            sqlx::query("DELETE FROM contact_tags WHERE contact_id = $1")
                .bind(contact.id.as_str())
                .execute(&mut *tx)
                .await?;
            let by_name = tags::ensure_tags(&mut tx, team_id, &selection.tag_names).await?;
            let ids = tag_ids.into_iter().chain(
                selection.tag_names.iter().filter_map(|name| by_name.get(&name_key(name)).map(|tag| tag.id.clone())),
            );
            let rows: Vec<Vec<Val>> = distinct(ids)
                .into_iter()
                .map(|tag_id| vec![Val::Text(contact.id.clone()), Val::Text(tag_id), Val::Text(team_id.to_owned())])
                .collect();
            insert_rows(&mut tx, "INSERT INTO contact_tags (contact_id, tag_id, team_id)", "", &rows).await?;
            refresh_tag_bits(&mut tx, &[contact.id.as_str()]).await?;
        }
        if let Some((board_id, stage_id)) = &stage {
            place(&mut tx, team_id, &contact.id, (board_id, stage_id)).await?;
        }
        contact.updated_at_ms = now;
        let contact = hydrate_one(&mut tx, contact).await?;
        told(&mut tx, CONTACT_UPDATED, &contact).await?;
        tx.commit().await?;
        Ok(contact)
    }

    /// Deletes the contact with its notes, tags, assignments, places on boards and custom
    /// field values. Returns it as it was.
    pub async fn delete_contact(&self, team_id: &str, contact_id: &str) -> ServiceResult<Contact> {
        check_ids(&[("teamId", team_id), ("contactId", contact_id)])?;
        let mut tx = self.db.begin_write().await?;
        let contact = find_contact(&mut tx, team_id, contact_id, self.db.for_update()).await?;
        let contact = hydrate_one(&mut tx, contact).await?;
        for table in [
            "contact_notes",
            "contact_tags",
            "contact_assignments",
            "contact_placements",
            "contact_field_values",
            "contact_search",
        ] {
            sqlx::query(&format!("DELETE FROM {table} WHERE contact_id = $1"))
                .bind(contact_id)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("DELETE FROM contacts WHERE id = $1 AND team_id = $2")
            .bind(contact_id)
            .bind(team_id)
            .execute(&mut *tx)
            .await?;
        told(&mut tx, CONTACT_DELETED, &contact).await?;
        tx.commit().await?;
        Ok(contact)
    }

    /// A page of the team's contacts (see [`ContactFilter`]), with the team's custom field
    /// schemas and all its tags. Ties of the sort key go by id in the same direction, and
    /// contacts without the key (no first name, say) come last either way.
    pub async fn list_contacts(&self, team_id: &str, filter: &ContactFilter) -> ServiceResult<ListContactsResponse> {
        // Numbers are stored in E.164: `555-2671` is looked for as `5552671`.
        let search = filter
            .search
            .as_deref()
            .map(|query| phone::fragment(query).unwrap_or_else(|| listing::normalise_query(query)))
            .filter(|query| !query.is_empty());
        let mut violations = vec![
            uuid_violation("teamId", team_id),
            limits::PAGE.check("page", i64::from(filter.page)),
            limits::PAGE_LIMIT.check("limit", i64::from(filter.limit)),
            search.as_deref().and_then(|query| limits::CONTACT_SEARCH.check("search", query)),
            filter.board_id.as_deref().and_then(|id| uuid_violation("boardId", id)),
            filter.stage_id.as_deref().and_then(|id| uuid_violation("stageId", id)),
            filter.assigned_user_id.as_deref().and_then(|id| uuid_violation("assignedUserId", id)),
        ];
        violations.extend(id_list_violations("tagIds", &filter.tag_ids).into_iter().map(Some));
        let mut number_problems = Vec::new();
        let number = filter.number.as_deref().and_then(|number| self.number_value(number, &mut number_problems));
        violations.extend(number_problems.into_iter().map(Some));
        validate(violations)?;
        // Whether a filter besides the tags and the search narrows the list.
        let narrowed = filter.board_id.is_some()
            || filter.stage_id.is_some()
            || filter.assigned_user_id.is_some()
            || number.is_some();

        let (key, nullable) = match filter.sort {
            ContactSort::CreatedAt => ("c.created_at", false),
            ContactSort::FirstName => ("c.first_name_key", true),
            ContactSort::LastName => ("c.last_name_key", true),
            ContactSort::Email => ("c.email", true),
            ContactSort::Number => ("c.number", false),
        };
        let listing = Listing {
            columns: CONTACT_COLUMNS,
            from: "contacts c",
            key,
            id: "c.id",
            nullable,
            ascending: filter.ascending,
        };
        let engine = self.db.engine();
        let mut conn = self.db.pool().acquire().await?;
        let tag_ids = distinct(filter.tag_ids.iter().cloned());
        let tag_ids_given = tag_ids.len();
        // How many contacts match, when the tags alone tell: none when a tag is not the
        // team's; with no other filter, the count of the tags' links (a link joins a team's
        // tag to one of its contacts only), which needs no join with the contacts.
        let mut known_total = None;
        let (limit, page) = (i64::from(filter.limit), i64::from(filter.page));
        let offset = (page - 1) * limit;
        let mut tag_bits = None;
        if !tag_ids.is_empty() {
            let owned = tags::tags_by_id(&mut conn, team_id, &tag_ids).await?;
            let alone = search.is_none() && !narrowed;
            if owned.len() < tag_ids.len() {
                known_total = Some(0);
            } else if alone {
                let total = count_tagged(&mut conn, &tag_ids).await?;
                known_total = Some(total);
                if engine == Engine::Postgres && walks_short(&mut conn, team_id, total, offset + limit).await? {
                    tag_bits = Some(tags::bit_mask(&mut conn, team_id, &tag_ids).await?);
                }
            }
        }
        let mut conditions = Filter::for_team(engine, "c", team_id, search.is_some());
        if let Some(mask) = tag_bits {
            conditions.and(listing::weighed_a_third(&format!("(c.tag_bits & {mask}) = {mask}")));
        }
        for tag_id in tag_ids {
            let tag = conditions.arg(Arg::Text(tag_id));
            conditions.and(match tag_bits {
                // Only contacts whose bits passed are probed; the page is a walk along the sort
                // index that stops at the page.
                Some(_) => listing::probed_per_row(&format!(
                    "FROM contact_tags ct WHERE ct.contact_id = c.id AND ct.tag_id = {tag}"
                )),
                None => format!("c.id IN (SELECT ct.contact_id FROM contact_tags ct WHERE ct.tag_id = {tag})"),
            });
        }
        if let Some(board_id) = &filter.board_id {
            let board = conditions.arg(Arg::Text(board_id.clone()));
            conditions
                .and(format!("c.id IN (SELECT p.contact_id FROM contact_placements p WHERE p.board_id = {board})"));
        }
        if let Some(stage_id) = &filter.stage_id {
            let stage = conditions.arg(Arg::Text(stage_id.clone()));
            conditions
                .and(format!("c.id IN (SELECT p.contact_id FROM contact_placements p WHERE p.stage_id = {stage})"));
        }
        if let Some(user_id) = &filter.assigned_user_id {
            let user = conditions.arg(Arg::Text(user_id.clone()));
            conditions.and(format!(
                "c.id IN (SELECT a.contact_id FROM contact_assignments a WHERE a.team_id = $1 AND a.user_id = {user})"
            ));
        }
        if let Some(number) = number {
            // Numbers are unique in a team: at most one contact.
            let number = conditions.arg(Arg::Text(number));
            conditions.and(format!("c.number = {number}"));
        }
        if let Some(query) = search.as_deref().filter(|_| known_total != Some(0)) {
            let found = conditions.search(&mut conn, engine, (&CONTACT_TEXT, "c"), query).await?;
            // A contact has one search row: with no other filter, the search counted them.
            let alone = tag_ids_given == 0 && !narrowed;
            if alone && let Some(found) = found {
                known_total = Some(i64::try_from(found).unwrap_or(i64::MAX));
            }
        }
        let (rows, total) = match known_total {
            Some(total) => (
                listing::read_counted_page(&mut conn, &listing, &conditions, (offset, limit), total).await?,
                Total::exact(total),
            ),
            None => listing::read_page(&mut conn, &listing, &conditions, offset, limit).await?,
        };
        let contacts = rows.iter().map(contact_from_row).collect::<Result<Vec<_>, _>>()?;
        let contacts = hydrate(&mut conn, contacts).await?;
        let team_fields = fields::team_fields(&mut conn, team_id).await?;
        let available_tags = tags::team_tags(&mut conn, team_id).await?;
        Ok(ListContactsResponse {
            contacts,
            page: Some(listing::page_info(filter.page, filter.limit, total)),
            custom_field_schemas: team_fields.iter().map(fields::schema).collect(),
            available_tags,
        })
    }
}

/// Up to how many contacts a page of a tag-filtered list may expect to pass along its sort
/// index for the page to be read as a walk testing each contact's tag bits (see
/// `list_contacts`): an index-only walk passes contacts quickly, and probes the tag links only
/// of those whose bits match (its rate: BENCHMARKS.md, "Why the lists are planned the way they
/// are"). A longer walk (rare tags, deep pages) is left to the planner, which then starts from
/// the tags' links.
const TAG_WALK_CONTACTS: i64 = 20_000;

/// Whether a page ending at `end` of a list of `total` tagged contacts (PostgreSQL) lies within
/// [`TAG_WALK_CONTACTS`] of the start of the sort index, reckoning the team's size by the
/// planner's estimate.
async fn walks_short(conn: &mut AnyConnection, team_id: &str, total: i64, end: i64) -> ServiceResult<bool> {
    if total <= 0 {
        return Ok(false);
    }
    let team = Filter::for_team(Engine::Postgres, "c", team_id, false);
    let contacts = listing::estimate(conn, &team, &format!("SELECT 1 FROM contacts c WHERE {}", team.sql())).await?;
    Ok(end.min(total).saturating_mul(contacts) / total <= TAG_WALK_CONTACTS)
}

/// Rewrites the tag bits of these contacts from their tags (PostgreSQL only: migration 0003).
async fn refresh_tag_bits(conn: &mut AnyConnection, contact_ids: &[&str]) -> ServiceResult<()> {
    if Engine::of(conn) != Engine::Postgres || contact_ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE contacts c SET tag_bits = COALESCE((SELECT bit_or(t.bit_mask) FROM contact_tags ct \
         JOIN tags t ON t.id = ct.tag_id WHERE ct.contact_id = c.id), 0) WHERE c.id = ANY(string_to_array($1, ','))",
    )
    .bind(contact_ids.join(","))
    .execute(conn)
    .await?;
    Ok(())
}

/// How many contacts carry every one of these tags (all the team's, at least one).
async fn count_tagged(conn: &mut AnyConnection, tag_ids: &[String]) -> ServiceResult<i64> {
    let mut sql = "SELECT COUNT(*) AS n FROM contact_tags t0 WHERE t0.tag_id = $1".to_owned();
    for n in 2..=tag_ids.len() {
        sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM contact_tags t{n} WHERE t{n}.contact_id = t0.contact_id AND t{n}.tag_id = ${n})"
        ));
    }
    listing::record(Step::Store("count tagged"), &sql, || tag_ids.iter().cloned().map(Arg::Text).collect());
    let mut query = sqlx::query(&sql);
    for tag_id in tag_ids {
        query = query.bind(tag_id.as_str());
    }
    Ok(query.fetch_one(conn).await?.try_get("n")?)
}

/// The team's stage of this id: (board, stage).
pub(super) async fn find_stage(
    conn: &mut AnyConnection,
    team_id: &str,
    stage_id: &str,
) -> ServiceResult<(String, String)> {
    let row = sqlx::query("SELECT board_id, id FROM stages WHERE team_id = $1 AND id = $2")
        .bind(team_id)
        .bind(stage_id)
        .fetch_optional(conn)
        .await?
        .ok_or_else(stage_not_found)?;
    Ok((row.try_get("board_id")?, row.try_get("id")?))
}

/// Sets or removes custom field values of one contact.
async fn write_values(
    conn: &mut AnyConnection,
    team_id: &str,
    contact_id: &str,
    changes: &ValueChanges,
) -> ServiceResult<()> {
    for (field_id, value) in changes {
        match value {
            Some(value) => {
                sqlx::query(
                    "INSERT INTO contact_field_values (contact_id, field_id, team_id, value) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (contact_id, field_id) DO UPDATE SET value = excluded.value",
                )
                .bind(contact_id)
                .bind(field_id.as_str())
                .bind(team_id)
                .bind(value.as_str())
                .execute(&mut *conn)
                .await?;
            }
            None => {
                sqlx::query("DELETE FROM contact_field_values WHERE contact_id = $1 AND field_id = $2")
                    .bind(contact_id)
                    .bind(field_id.as_str())
                    .execute(&mut *conn)
                    .await?;
            }
        }
    }
    Ok(())
}

/// Writes everything of new contacts but the contact rows: tags (creating those named but
/// missing), values, first notes, assignments, places on boards and search text.
async fn write_parts(
    conn: &mut AnyConnection,
    team_id: &str,
    created: &[&NewContact],
    actor: &str,
    now: i64,
) -> ServiceResult<()> {
    let team = || Val::Text(team_id.to_owned());
    let names: Vec<String> = created.iter().flat_map(|new| new.tag_names.iter().cloned()).collect();
    let by_name = if names.is_empty() { HashMap::new() } else { tags::ensure_tags(conn, team_id, &names).await? };
    let mut tag_rows = Vec::new();
    let mut value_rows = Vec::new();
    let mut note_rows = Vec::new();
    let mut user_rows = Vec::new();
    let mut placement_rows = Vec::new();
    let mut search_rows = Vec::new();
    for new in created {
        let contact = Val::Text(new.id.clone());
        let named = new.tag_names.iter().filter_map(|name| by_name.get(&name_key(name)).map(|tag| tag.id.clone()));
        for tag_id in distinct(new.tag_ids.iter().cloned().chain(named)) {
            tag_rows.push(vec![contact.clone(), Val::Text(tag_id), team()]);
        }
        for (field_id, value) in &new.values {
            value_rows.push(vec![contact.clone(), Val::Text(field_id.clone()), team(), Val::Text(value.clone())]);
        }
        if let Some(note) = &new.note {
            note_rows.push(vec![
                Val::Text(uuid::Uuid::now_v7().to_string()),
                contact.clone(),
                team(),
                Val::Text(note.clone()),
                Val::Text("general".to_owned()),
                Val::Text(actor.to_owned()),
                Val::Int(now),
            ]);
        }
        for user_id in &new.user_ids {
            user_rows.push(vec![contact.clone(), Val::Text(user_id.clone()), team(), Val::Int(now)]);
        }
        // In the order given, so that the last board given holds the contact's stage.
        for (offset, (board_id, stage_id)) in (0i64..).zip(&new.boards) {
            placement_rows.push(vec![
                contact.clone(),
                Val::Text(board_id.clone()),
                Val::Text(stage_id.clone()),
                team(),
                Val::Int(now + offset),
            ]);
        }
        let shown = Contact {
            first_name: new.first_name.clone(),
            last_name: new.last_name.clone(),
            email: new.email.clone(),
            number: new.number.clone(),
            ..Contact::default()
        };
        search_rows.push(vec![contact, team(), Val::Text(search_body(&shown))]);
    }
    insert_rows(conn, "INSERT INTO contact_tags (contact_id, tag_id, team_id)", "", &tag_rows).await?;
    // Every new contact, tagged or not: the column's default (every bit) would have them
    // probed by every tag-filtered list.
    let ids: Vec<&str> = created.iter().map(|new| new.id.as_str()).collect();
    refresh_tag_bits(conn, &ids).await?;
    insert_rows(conn, "INSERT INTO contact_field_values (contact_id, field_id, team_id, value)", "", &value_rows)
        .await?;
    let head = "INSERT INTO contact_notes (id, contact_id, team_id, note, type, created_by, created_at)";
    insert_rows(conn, head, "", &note_rows).await?;
    insert_rows(conn, "INSERT INTO contact_assignments (contact_id, user_id, team_id, assigned_at)", "", &user_rows)
        .await?;
    let head = "INSERT INTO contact_placements (contact_id, board_id, stage_id, team_id, placed_at)";
    insert_rows(conn, head, "", &placement_rows).await?;
    insert_rows(conn, "INSERT INTO contact_search (contact_id, team_id, body)", "", &search_rows).await?;
    Ok(())
}

/// An item of a bulk create that was not written, as `createContact` would have failed.
pub fn bulk_failure(index: u32, error: ServiceError) -> switchboard_proto::v1::BulkFailure {
    switchboard_proto::v1::BulkFailure {
        index,
        code: error.kind.code().to_owned(),
        error: error.message,
        details: error
            .details
            .into_iter()
            .map(|v| switchboard_proto::v1::FieldViolation { field: v.field, message: v.message })
            .collect(),
    }
}

pub const CONTACT_CREATED: &str = "contact.created";
pub const CONTACT_UPDATED: &str = "contact.updated";
pub const CONTACT_DELETED: &str = "contact.deleted";

/// Tells webhooks of a change to `contact`, in the change's transaction.
pub async fn told(conn: &mut AnyConnection, kind: &str, contact: &Contact) -> ServiceResult<()> {
    let resource = switchboard_proto::v1::event::Resource::Contact(contact.clone());
    switchboard_kit::outbox::record(conn, kind, (&contact.team_id, &contact.id), resource).await?;
    Ok(())
}
