//! Creating contacts: one path for one and for a bulk of up to `BULK_CONTACTS`, so that a
//! single create and an item of a bulk meet the same rules and give the same errors. Each
//! contact is checked and written alone (a failing one does not keep the others out), but
//! all of them with a few multi-row statements, so a bulk of 1,000 stays a few dozen.

use std::collections::{HashMap, HashSet};

use sqlx::{AnyConnection, Row};
use switchboard_kit::limits;
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::EventType;
use switchboard_kit::write_keys::{self, WriteKey};
use switchboard_kit::{ServiceError, ServiceResult, validate};
use switchboard_proto::v1::{Contact, ContactInput, CustomField, Tag};

use super::checks::{email_value, tag_violations, text_value};
use super::parts::{NewContact, write_parts};
use super::read::contacts_by_ids;
use super::{ACTOR, first_stages, numbers_in_use, sort_key, told};
use crate::store::fields;
use crate::store::tags;
use crate::store::{
    CrmStore, Val, board_not_found, check_ids, contact_exists, contact_not_found, distinct, id_list_violations,
    insert_rows, tag_not_found, uuid_violation,
};

/// What a recorded write key names (`switchboard_kit::write_keys`).
const CREATE_CONTACT: &str = "crm.CreateContact";

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

impl CrmStore {
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
        key: Option<&WriteKey>,
    ) -> ServiceResult<Vec<ServiceResult<Contact>>> {
        check_ids(&[("teamId", team_id)])?;
        let mut tx = self.db.begin_write().await?;
        if let Some(key) = key
            && let Some(id) = write_keys::recorded(&mut tx, team_id, key, CREATE_CONTACT).await?
        {
            let mut made = contacts_by_ids(&mut tx, team_id, std::slice::from_ref(&id)).await?;
            return Ok(vec![made.remove(&id).ok_or_else(contact_not_found)]);
        }
        let known = Known::load(&mut tx, team_id, inputs).await?;
        let mut outcomes: Vec<ServiceResult<NewContact>> =
            inputs.iter().map(|input| self.prepare(&known, input, actor)).collect();
        refuse_numbers_in_use(&mut tx, team_id, &mut outcomes).await?;
        let now = now_ms();
        insert_contacts(&mut tx, team_id, &mut outcomes, now).await?;

        let created: Vec<&NewContact> = outcomes.iter().flatten().collect();
        write_parts(&mut tx, team_id, &created, actor, now).await?;
        let ids: Vec<String> = created.iter().map(|new| new.id.clone()).collect();
        let mut contacts = contacts_by_ids(&mut tx, team_id, &ids).await?;
        for contact in ids.iter().filter_map(|id| contacts.get(id)) {
            told(&mut tx, EventType::ContactCreated, contact).await?;
        }
        if let (Some(key), [id]) = (key, ids.as_slice()) {
            write_keys::record(&mut tx, team_id, key, CREATE_CONTACT, id).await?;
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
        self.create_contact_once(team_id, input, actor, None).await
    }

    /// [`Self::create_contact`], answered with the contact made the first time when a write
    /// with `key` made one already (`switchboard_kit::write_keys`).
    pub async fn create_contact_once(
        &self,
        team_id: &str,
        input: &ContactInput,
        actor: &str,
        key: Option<&WriteKey>,
    ) -> ServiceResult<Contact> {
        let mut outcomes = self.create_contacts(team_id, std::slice::from_ref(input), actor, key).await?;
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
        let outcomes = self.create_contacts(team_id, inputs, actor, None).await?;
        let (mut created, mut failed) = (Vec::new(), Vec::new());
        for (index, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(contact) => created.push(contact),
                Err(error) => failed.push(bulk_failure(u32::try_from(index).unwrap_or(u32::MAX), error)),
            }
        }
        Ok((created, failed))
    }
}

/// Fails the new contacts whose number the team has, or an earlier item of the request has:
/// the later of two is refused, so that sending the same request twice creates nothing new.
async fn refuse_numbers_in_use(
    conn: &mut AnyConnection,
    team_id: &str,
    outcomes: &mut [ServiceResult<NewContact>],
) -> ServiceResult<()> {
    let numbers: Vec<String> = outcomes.iter().flatten().map(|new| new.number.clone()).collect();
    let mut owners = numbers_in_use(conn, team_id, &numbers).await?;
    for outcome in outcomes.iter_mut() {
        let Ok(new) = outcome else { continue };
        if let Some(owner) = owners.get(&new.number) {
            *outcome = Err(contact_exists(owner));
        } else {
            owners.insert(new.number.clone(), new.id.clone());
        }
    }
    Ok(())
}

/// Inserts the rows of the new contacts that passed so far, in one statement. A number taken
/// by a concurrent request since [`refuse_numbers_in_use`] fails that contact alone, rather
/// than being an error that would undo the whole transaction.
async fn insert_contacts(
    conn: &mut AnyConnection,
    team_id: &str,
    outcomes: &mut [ServiceResult<NewContact>],
    now: i64,
) -> ServiceResult<()> {
    let rows: Vec<Vec<Val>> = outcomes.iter().flatten().map(|new| contact_row(new, team_id, now)).collect();
    let head = "INSERT INTO contacts (id, team_id, number, first_name, last_name, email, carrier, first_name_key, \
                last_name_key, created_at, updated_at)";
    let inserted = insert_rows(conn, head, " ON CONFLICT (team_id, number) DO NOTHING RETURNING id", &rows).await?;
    let inserted: HashSet<String> = inserted.iter().map(|row| row.try_get("id")).collect::<Result<_, _>>()?;
    let lost: Vec<String> =
        outcomes.iter().flatten().filter(|new| !inserted.contains(&new.id)).map(|new| new.number.clone()).collect();
    if !lost.is_empty() {
        let owners = numbers_in_use(conn, team_id, &lost).await?;
        for outcome in outcomes.iter_mut() {
            if let Ok(new) = outcome
                && !inserted.contains(&new.id)
            {
                *outcome = Err(contact_exists(owners.get(&new.number).map_or("", String::as_str)));
            }
        }
    }
    Ok(())
}

/// The `contacts` row of a new contact, in the columns [`insert_contacts`] names.
fn contact_row(new: &NewContact, team_id: &str, now: i64) -> Vec<Val> {
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
}

pub use switchboard_kit::error::bulk_failure;
