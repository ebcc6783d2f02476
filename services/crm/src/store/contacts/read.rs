//! Reading contacts whole: a contact's tags, boards, stage and custom field values live in
//! tables of their own, and are filled in with a few queries for a whole page or batch at
//! once rather than a few per contact.

use std::collections::HashMap;

use serde_json::{Map, Value};
use sqlx::{AnyConnection, Row};
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{Contact, CrmStage, Tag};

use super::{CONTACT_COLUMNS, contact_from_row, find_contact};
use crate::store::{CrmStore, check_ids, select_in, tags};

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

pub(in crate::store) async fn hydrate_one(conn: &mut AnyConnection, contact: Contact) -> ServiceResult<Contact> {
    hydrate(conn, vec![contact])
        .await?
        .pop()
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("a contact went missing while reading it")))
}

/// The team's contacts of these ids, whole, by id.
pub(super) async fn contacts_by_ids(
    conn: &mut AnyConnection,
    team_id: &str,
    ids: &[String],
) -> ServiceResult<HashMap<String, Contact>> {
    let sql = format!("SELECT {CONTACT_COLUMNS} FROM contacts c WHERE c.team_id = $1 AND c.id IN ({{ids}})");
    let rows = select_in(conn, &sql, &[team_id], ids).await?;
    let contacts = rows.iter().map(contact_from_row).collect::<Result<Vec<_>, _>>()?;
    Ok(hydrate(conn, contacts).await?.into_iter().map(|contact| (contact.id.clone(), contact)).collect())
}

impl CrmStore {
    /// The contact with its tags, stage, boards and custom field values.
    pub async fn contact(&self, team_id: &str, contact_id: &str) -> ServiceResult<Contact> {
        check_ids(&[("teamId", team_id), ("contactId", contact_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        let contact = find_contact(&mut conn, team_id, contact_id, "").await?;
        hydrate_one(&mut conn, contact).await
    }
}
