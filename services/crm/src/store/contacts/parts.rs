//! The parts of new contacts other than their rows (tags, values, first notes, assignments,
//! places on boards, search text), each kind written for a whole create with one multi-row
//! statement: a bulk of 1,000 contacts would otherwise take thousands of round trips.

use std::collections::HashMap;

use sqlx::AnyConnection;
use switchboard_kit::ServiceResult;
use switchboard_proto::v1::Contact;

use super::{refresh_tag_bits, search_body};
use crate::store::tags::{self, name_key};
use crate::store::{Val, distinct, insert_rows};

/// A new contact, checked, with its id.
pub(super) struct NewContact {
    pub(super) id: String,
    pub(super) number: String,
    pub(super) first_name: Option<String>,
    pub(super) last_name: Option<String>,
    pub(super) email: Option<String>,
    pub(super) carrier: Option<String>,
    /// By field id, compact JSON.
    pub(super) values: Vec<(String, String)>,
    pub(super) tag_ids: Vec<String>,
    pub(super) tag_names: Vec<String>,
    pub(super) note: Option<String>,
    pub(super) user_ids: Vec<String>,
    /// (board, its first stage), in the order given.
    pub(super) boards: Vec<(String, String)>,
}

/// Writes everything of new contacts but the contact rows: tags (creating those named but
/// missing), values, first notes, assignments, places on boards and search text.
pub(super) async fn write_parts(
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
