//! Updating a contact, all or nothing: the request is checked whole (its own values first,
//! then against the team's fields, tags and stages) before anything is written, so a request
//! that fails changes nothing and reports every violation at once.

use serde_json::{Map, Value};
use sqlx::AnyConnection;
use switchboard_kit::limits;
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::EventType;
use switchboard_kit::{FieldViolation, ServiceResult, validate};
use switchboard_proto::v1::{Contact, TagSelection, UpdateContactRequest};

use super::checks::{email_value, tag_violations, text_value};
use super::placements::find_stage;
use super::read::hydrate_one;
use super::{find_contact, numbers_in_use, place, refresh_tag_bits, search_body, sort_key, told};
use crate::store::fields::{self, ValueChanges};
use crate::store::tags::{self, name_key};
use crate::store::{CrmStore, Val, check_ids, contact_exists, distinct, insert_rows, tag_not_found, uuid_violation};

/// What an update asks to change of the contact's own values, checked on their own: `None`
/// leaves a value as it is, `Some(None)` clears it.
struct Edit {
    number: Option<Option<String>>,
    first_name: Option<Option<String>>,
    last_name: Option<Option<String>>,
    email: Option<Option<String>>,
    carrier: Option<Option<String>>,
    /// Custom field values by name, as given: they are checked against the team's fields
    /// only in the transaction, where the fields cannot change meanwhile.
    values: Option<Map<String, Value>>,
}

impl Edit {
    /// `current` with the edit applied.
    fn applied_to(self, current: &Contact) -> Contact {
        let mut contact = current.clone();
        if let Some(number) = self.number.flatten() {
            contact.number = number;
        }
        if let Some(first_name) = self.first_name {
            contact.first_name = first_name;
        }
        if let Some(last_name) = self.last_name {
            contact.last_name = last_name;
        }
        if let Some(email) = self.email {
            contact.email = email;
        }
        if let Some(carrier) = self.carrier {
            contact.carrier = carrier;
        }
        contact
    }
}

impl CrmStore {
    /// Changes what the request gives (see `UpdateContactRequest`), all or nothing: an empty
    /// name, e-mail or carrier clears it; a new number must not be another contact's; custom
    /// field values merge by name (null removes one, which a required field refuses); a stage
    /// moves the contact there (adding its board); `tags` replaces the tags. `updatedAt`
    /// moves whenever the request changes anything.
    pub async fn update_contact(&self, request: &UpdateContactRequest) -> ServiceResult<Contact> {
        let (team_id, contact_id) = (request.team_id.as_str(), request.contact_id.as_str());
        check_ids(&[("teamId", team_id), ("contactId", contact_id)])?;
        let mut violations = Vec::new();
        let edit = self.check_edit(request, &mut violations);

        let mut tx = self.db.begin_write().await?;
        let current = find_contact(&mut tx, team_id, contact_id, self.db.for_update()).await?;
        let changes = value_changes(&mut tx, team_id, edit.values.as_ref(), &mut violations).await?;
        validate(violations.into_iter().map(Some))?;
        let tag_ids = known_tag_ids(&mut tx, team_id, request.tags.as_ref()).await?;
        let stage = match &request.crm_stage_id {
            Some(stage_id) => Some(find_stage(&mut tx, team_id, stage_id).await?),
            None => None,
        };
        let mut contact = edit.applied_to(&current);
        if contact.number != current.number {
            let owners = numbers_in_use(&mut tx, team_id, std::slice::from_ref(&contact.number)).await?;
            if let Some(owner) = owners.get(&contact.number) {
                return Err(contact_exists(owner));
            }
        }

        let now = now_ms();
        if let Err(error) = write_row(&mut tx, &contact, now).await {
            if switchboard_kit::db::is_unique_violation(&error) {
                // A concurrent request took the number after the check above.
                drop(tx);
                let mut conn = self.db.pool().acquire().await?;
                let owners = numbers_in_use(&mut conn, team_id, std::slice::from_ref(&contact.number)).await?;
                return Err(contact_exists(owners.get(&contact.number).map_or("", String::as_str)));
            }
            return Err(error.into());
        }
        write_search(&mut tx, &current, &contact).await?;
        write_values(&mut tx, team_id, &contact.id, &changes).await?;
        if let (Some(selection), Some(tag_ids)) = (&request.tags, tag_ids) {
            replace_tags(&mut tx, team_id, &contact.id, selection, tag_ids).await?;
        }
        if let Some((board_id, stage_id)) = &stage {
            place(&mut tx, team_id, &contact.id, (board_id, stage_id)).await?;
        }
        contact.updated_at_ms = now;
        let contact = hydrate_one(&mut tx, contact).await?;
        told(&mut tx, EventType::ContactUpdated, &contact).await?;
        tx.commit().await?;
        Ok(contact)
    }

    /// Checks what the request gives without the database (values, ids, the tag selection),
    /// adding every violation to `violations`.
    fn check_edit(&self, request: &UpdateContactRequest, violations: &mut Vec<FieldViolation>) -> Edit {
        let number = request.number.as_deref().map(|number| self.number_value(number, violations));
        let first_name =
            request.first_name.as_deref().map(|name| text_value("firstName", name, limits::CONTACT_NAME, violations));
        let last_name =
            request.last_name.as_deref().map(|name| text_value("lastName", name, limits::CONTACT_NAME, violations));
        let email = request.email.as_deref().map(|email| email_value(email, violations));
        let carrier =
            request.carrier.as_deref().map(|carrier| text_value("carrier", carrier, limits::CARRIER, violations));
        let values = match request.custom_fields.as_deref().map(fields::parse_object) {
            Some(Ok(given)) => Some(given),
            Some(Err(violation)) => {
                violations.push(violation);
                None
            }
            None => None,
        };
        violations.extend(request.crm_stage_id.as_deref().and_then(|id| uuid_violation("crmStageId", id)));
        if let Some(selection) = &request.tags {
            tag_violations(&selection.tag_ids, &selection.tag_names, violations);
        }
        Edit { number, first_name, last_name, email, carrier, values }
    }
}

/// The custom field values `given` changes, checked against the team's fields.
async fn value_changes(
    conn: &mut AnyConnection,
    team_id: &str,
    given: Option<&Map<String, Value>>,
    violations: &mut Vec<FieldViolation>,
) -> ServiceResult<ValueChanges> {
    match given {
        Some(given) => {
            let team_fields = fields::team_fields(conn, team_id).await?;
            Ok(fields::check_values(&team_fields, given, false, violations))
        }
        None => Ok(Vec::new()),
    }
}

/// The distinct tag ids a `tags` selection names, when it is given: all must be the team's.
async fn known_tag_ids(
    conn: &mut AnyConnection,
    team_id: &str,
    selection: Option<&TagSelection>,
) -> ServiceResult<Option<Vec<String>>> {
    let Some(selection) = selection else { return Ok(None) };
    let tag_ids = distinct(selection.tag_ids.iter().cloned());
    let found = tags::tags_by_id(conn, team_id, &tag_ids).await?;
    if found.len() != tag_ids.len() {
        return Err(tag_not_found());
    }
    Ok(Some(tag_ids))
}

/// Writes the contact's own values. The error is the database's, so that the caller can tell
/// a number taken meanwhile (a unique violation) from any other failure.
async fn write_row(conn: &mut AnyConnection, contact: &Contact, now: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
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
    .execute(conn)
    .await?;
    Ok(())
}

/// Rewrites the contact's search text, when what it is found by changed.
async fn write_search(conn: &mut AnyConnection, current: &Contact, contact: &Contact) -> ServiceResult<()> {
    let body = search_body(contact);
    if body != search_body(current) {
        sqlx::query("UPDATE contact_search SET body = $1 WHERE contact_id = $2")
            .bind(body)
            .bind(contact.id.as_str())
            .execute(conn)
            .await?;
    }
    Ok(())
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

/// Replaces the contact's tags with those of the selection: `tag_ids` (the team's, checked)
/// and the names (created when missing).
async fn replace_tags(
    conn: &mut AnyConnection,
    team_id: &str,
    contact_id: &str,
    selection: &TagSelection,
    tag_ids: Vec<String>,
) -> ServiceResult<()> {
    sqlx::query("DELETE FROM contact_tags WHERE contact_id = $1").bind(contact_id).execute(&mut *conn).await?;
    let by_name = tags::ensure_tags(conn, team_id, &selection.tag_names).await?;
    let ids = tag_ids
        .into_iter()
        .chain(selection.tag_names.iter().filter_map(|name| by_name.get(&name_key(name)).map(|tag| tag.id.clone())));
    let rows: Vec<Vec<Val>> = distinct(ids)
        .into_iter()
        .map(|tag_id| vec![Val::Text(contact_id.to_owned()), Val::Text(tag_id), Val::Text(team_id.to_owned())])
        .collect();
    insert_rows(conn, "INSERT INTO contact_tags (contact_id, tag_id, team_id)", "", &rows).await?;
    refresh_tag_bits(conn, &[contact_id]).await?;
    Ok(())
}
