//! Notes on a contact (newest first) and the users assigned to it. Users live in the identity
//! service: the store keeps their ids, which the service checks against the team's users.

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::limits;
use switchboard_kit::time::now_ms;
use switchboard_kit::write_keys::{self, WriteKey};
use switchboard_kit::{FieldViolation, ServiceResult, validate};
use switchboard_proto::v1::{AddNoteRequest, AssignUsersRequest, Note};

use super::contacts::{ACTOR, find_contact};
use super::{CrmStore, check_ids, distinct, id_list_violations, note_not_found, uuid_violation};

/// The types a note may have; the first is the default.
pub const NOTE_TYPES: [&str; 4] = ["general", "info", "warning", "danger"];

/// What a recorded write key names (`switchboard_kit::write_keys`).
const ADD_NOTE: &str = "crm.AddNote";

const NOTE_COLUMNS: &str = "id, contact_id, note, type, created_at, created_by";

fn note_from_row(row: &AnyRow) -> Result<Note, sqlx::Error> {
    Ok(Note {
        id: row.try_get("id")?,
        contact_id: row.try_get("contact_id")?,
        note: row.try_get("note")?,
        r#type: row.try_get("type")?,
        created_at_ms: row.try_get("created_at")?,
        created_by: row.try_get("created_by")?,
    })
}

/// One of the contact's notes.
async fn note_of(conn: &mut AnyConnection, team_id: &str, contact_id: &str, note_id: &str) -> ServiceResult<Note> {
    let sql = format!("SELECT {NOTE_COLUMNS} FROM contact_notes WHERE id = $1 AND contact_id = $2 AND team_id = $3");
    let row = sqlx::query(&sql).bind(note_id).bind(contact_id).bind(team_id).fetch_optional(conn).await?;
    row.as_ref().map(note_from_row).transpose()?.ok_or_else(note_not_found)
}

async fn assigned(conn: &mut AnyConnection, contact_id: &str) -> ServiceResult<Vec<String>> {
    let rows =
        sqlx::query("SELECT user_id FROM contact_assignments WHERE contact_id = $1 ORDER BY assigned_at, user_id")
            .bind(contact_id)
            .fetch_all(conn)
            .await?;
    Ok(rows.iter().map(|row| row.try_get("user_id")).collect::<Result<_, _>>()?)
}

impl CrmStore {
    /// The contact's notes, newest first (ties by id, which grows with time).
    pub async fn list_notes(&self, team_id: &str, contact_id: &str) -> ServiceResult<Vec<Note>> {
        check_ids(&[("teamId", team_id), ("contactId", contact_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        find_contact(&mut conn, team_id, contact_id, "").await?;
        let sql = format!(
            "SELECT {NOTE_COLUMNS} FROM contact_notes WHERE contact_id = $1 AND team_id = $2 \
             ORDER BY created_at DESC, id DESC"
        );
        let rows = sqlx::query(&sql).bind(contact_id).bind(team_id).fetch_all(&mut *conn).await?;
        Ok(rows.iter().map(note_from_row).collect::<Result<_, _>>()?)
    }

    /// Adds a note by `actor`; an empty type is `general`.
    pub async fn add_note(&self, request: &AddNoteRequest) -> ServiceResult<Note> {
        self.add_note_once(request, None).await
    }

    /// [`Self::add_note`], answered with the note made the first time when a write with `key`
    /// made one already (`switchboard_kit::write_keys`).
    pub async fn add_note_once(&self, request: &AddNoteRequest, key: Option<&WriteKey>) -> ServiceResult<Note> {
        let kind = if request.r#type.is_empty() { NOTE_TYPES[0] } else { request.r#type.as_str() };
        validate([
            uuid_violation("teamId", &request.team_id),
            uuid_violation("contactId", &request.contact_id),
            limits::CONTACT_NOTE.check("note", &request.note),
            (!NOTE_TYPES.contains(&kind))
                .then(|| FieldViolation::new("type", format!("must be one of {}", NOTE_TYPES.join(", ")))),
            ACTOR.check("actor", &request.actor),
        ])?;
        let mut tx = self.db.begin_write().await?;
        find_contact(&mut tx, &request.team_id, &request.contact_id, self.db.for_update()).await?;
        if let Some(key) = key
            && let Some(id) = write_keys::recorded(&mut tx, &request.team_id, key, ADD_NOTE).await?
        {
            return note_of(&mut tx, &request.team_id, &request.contact_id, &id).await;
        }
        let note = Note {
            id: uuid::Uuid::now_v7().to_string(),
            contact_id: request.contact_id.clone(),
            note: request.note.clone(),
            r#type: kind.to_owned(),
            created_at_ms: now_ms(),
            created_by: request.actor.clone(),
        };
        sqlx::query(
            "INSERT INTO contact_notes (id, contact_id, team_id, note, type, created_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(note.id.as_str())
        .bind(note.contact_id.as_str())
        .bind(request.team_id.as_str())
        .bind(note.note.as_str())
        .bind(note.r#type.as_str())
        .bind(note.created_by.as_str())
        .bind(note.created_at_ms)
        .execute(&mut *tx)
        .await?;
        if let Some(key) = key {
            write_keys::record(&mut tx, &request.team_id, key, ADD_NOTE, &note.id).await?;
        }
        tx.commit().await?;
        Ok(note)
    }

    /// Deletes one of the contact's notes (another contact's note is not found). Returns it
    /// as it was.
    pub async fn delete_note(&self, team_id: &str, contact_id: &str, note_id: &str) -> ServiceResult<Note> {
        check_ids(&[("teamId", team_id), ("contactId", contact_id), ("noteId", note_id)])?;
        let mut tx = self.db.begin_write().await?;
        find_contact(&mut tx, team_id, contact_id, self.db.for_update()).await?;
        let note = note_of(&mut tx, team_id, contact_id, note_id).await?;
        sqlx::query("DELETE FROM contact_notes WHERE id = $1").bind(note_id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(note)
    }

    /// The ids of the users assigned to the contact, in the order they were assigned.
    pub async fn assignments(&self, team_id: &str, contact_id: &str) -> ServiceResult<Vec<String>> {
        check_ids(&[("teamId", team_id), ("contactId", contact_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        find_contact(&mut conn, team_id, contact_id, "").await?;
        assigned(&mut conn, contact_id).await
    }

    /// Assigns users to the contact (one assigned already stays as it is), or with `replace`
    /// makes them exactly its assigned users. The ids must be UUIDs; whether they are users
    /// of the team is the service's to check. Returns the assigned user ids.
    pub async fn assign_users(&self, request: &AssignUsersRequest) -> ServiceResult<Vec<String>> {
        let (team_id, contact_id) = (request.team_id.as_str(), request.contact_id.as_str());
        let mut violations = vec![uuid_violation("teamId", team_id), uuid_violation("contactId", contact_id)];
        violations.extend(id_list_violations("userIds", &request.user_ids).into_iter().map(Some));
        validate(violations)?;
        let user_ids = distinct(request.user_ids.iter().cloned());
        let mut tx = self.db.begin_write().await?;
        find_contact(&mut tx, team_id, contact_id, self.db.for_update()).await?;
        if request.replace {
            let rows = assigned(&mut tx, contact_id).await?;
            for user_id in rows.iter().filter(|id| !user_ids.contains(id)) {
                sqlx::query("DELETE FROM contact_assignments WHERE contact_id = $1 AND user_id = $2")
                    .bind(contact_id)
                    .bind(user_id.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        let now = now_ms();
        for user_id in &user_ids {
            sqlx::query(
                "INSERT INTO contact_assignments (contact_id, user_id, team_id, assigned_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (contact_id, user_id) DO NOTHING",
            )
            .bind(contact_id)
            .bind(user_id.as_str())
            .bind(team_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        let users = assigned(&mut tx, contact_id).await?;
        tx.commit().await?;
        Ok(users)
    }
}
