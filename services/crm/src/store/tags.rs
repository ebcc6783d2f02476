//! Tags: a team's labels for contacts, unique by name regardless of case. Contacts name them
//! by id or by name; a name the team has no tag for makes one (default colour).

use std::collections::HashMap;

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::db::is_unique_violation;
use switchboard_kit::limits;
use switchboard_kit::time::now_ms;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, validate};
use switchboard_proto::v1::{CreateTagRequest, Tag, UpdateTagRequest};

use super::{CrmStore, Val, check_ids, insert_rows, select_in, tag_not_found};

/// The colour of a tag created without one.
pub const DEFAULT_TAG_COLOR: &str = "#6B7280";

const TAG_COLUMNS: &str = "t.id, t.name, t.color, t.created_at";

pub(super) fn tag_from_row(row: &AnyRow) -> Result<Tag, sqlx::Error> {
    Ok(Tag {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        color: row.try_get("color")?,
        created_at_ms: row.try_get("created_at")?,
    })
}

/// The key that makes names unique regardless of case (Rust's Unicode lowercase, the same
/// on both engines).
pub(super) fn name_key(name: &str) -> String {
    name.trim().to_lowercase()
}

pub(super) fn color_violation(field: &str, color: &str) -> Option<FieldViolation> {
    (!color.is_empty() && !limits::is_color(color)).then(|| FieldViolation::new(field, "must be a colour #RRGGBB"))
}

fn name_taken() -> ServiceError {
    // The field is named, so that a form can show the error beside it.
    ServiceError {
        details: vec![FieldViolation::new("name", "is already the name of another tag")],
        ..ServiceError::conflict("A tag with this name already exists")
            .with_hint("Tag names are unique in a team regardless of case.")
    }
}

/// The team's tags, by name (regardless of case).
pub(super) async fn team_tags(conn: &mut AnyConnection, team_id: &str) -> ServiceResult<Vec<Tag>> {
    let sql = format!("SELECT {TAG_COLUMNS} FROM tags t WHERE t.team_id = $1 ORDER BY t.name_key, t.id");
    let rows = sqlx::query(&sql).bind(team_id).fetch_all(conn).await?;
    Ok(rows.iter().map(tag_from_row).collect::<Result<_, _>>()?)
}

/// Those of `ids` that are the team's tags, by id.
pub(super) async fn tags_by_id(
    conn: &mut AnyConnection,
    team_id: &str,
    ids: &[String],
) -> ServiceResult<HashMap<String, Tag>> {
    let sql = format!("SELECT {TAG_COLUMNS} FROM tags t WHERE t.team_id = $1 AND t.id IN ({{ids}})");
    let rows = select_in(conn, &sql, &[team_id], ids).await?;
    rows.iter()
        .map(|row| tag_from_row(row).map(|tag| (tag.id.clone(), tag)))
        .collect::<Result<_, _>>()
        .map_err(Into::into)
}

/// The bits of these tags (the team's) ORed together, as `contacts.tag_bits` holds them
/// (PostgreSQL only; migration 0003).
pub(super) async fn bit_mask(conn: &mut AnyConnection, team_id: &str, ids: &[String]) -> ServiceResult<i64> {
    let sql = "SELECT t.bit_mask FROM tags t WHERE t.team_id = $1 AND t.id IN ({ids})";
    let rows = select_in(conn, sql, &[team_id], ids).await?;
    rows.iter().try_fold(0i64, |mask, row| Ok(mask | row.try_get::<i64, _>("bit_mask")?))
}

/// Those of the name keys that the team has tags for, by key.
pub(super) async fn tags_by_key(
    conn: &mut AnyConnection,
    team_id: &str,
    keys: &[String],
) -> ServiceResult<HashMap<String, Tag>> {
    let sql = format!("SELECT {TAG_COLUMNS}, t.name_key FROM tags t WHERE t.team_id = $1 AND t.name_key IN ({{ids}})");
    let rows = select_in(conn, &sql, &[team_id], keys).await?;
    let mut found = HashMap::with_capacity(rows.len());
    for row in &rows {
        found.insert(row.try_get::<String, _>("name_key")?, tag_from_row(row)?);
    }
    Ok(found)
}

/// The team's tags of these names (trimmed; matched regardless of case), creating those it
/// lacks with the default colour: by name key. A tag created concurrently by another request
/// is taken as found.
pub(super) async fn ensure_tags(
    conn: &mut AnyConnection,
    team_id: &str,
    names: &[String],
) -> ServiceResult<HashMap<String, Tag>> {
    let mut wanted: HashMap<String, String> = HashMap::new();
    for name in names {
        wanted.entry(name_key(name)).or_insert_with(|| name.trim().to_owned());
    }
    let keys: Vec<String> = wanted.keys().cloned().collect();
    let mut found = tags_by_key(conn, team_id, &keys).await?;
    let now = now_ms();
    let missing: Vec<Vec<Val>> = wanted
        .iter()
        .filter(|(key, _)| !found.contains_key(*key))
        .map(|(key, name)| {
            vec![
                Val::Text(uuid::Uuid::now_v7().to_string()),
                Val::Text(team_id.to_owned()),
                Val::Text(name.clone()),
                Val::Text(key.clone()),
                Val::Text(DEFAULT_TAG_COLOR.to_owned()),
                Val::Int(now),
                Val::Int(now),
            ]
        })
        .collect();
    if !missing.is_empty() {
        let head = "INSERT INTO tags (id, team_id, name, name_key, color, created_at, updated_at)";
        insert_rows(conn, head, " ON CONFLICT (team_id, name_key) DO NOTHING", &missing).await?;
        found = tags_by_key(conn, team_id, &keys).await?;
    }
    Ok(found)
}

async fn find_tag(conn: &mut AnyConnection, team_id: &str, tag_id: &str, lock: &str) -> ServiceResult<Tag> {
    let sql = format!("SELECT {TAG_COLUMNS} FROM tags t WHERE t.team_id = $1 AND t.id = $2{lock}");
    let row = sqlx::query(&sql).bind(team_id).bind(tag_id).fetch_optional(conn).await?;
    row.as_ref().map(tag_from_row).transpose()?.ok_or_else(tag_not_found)
}

/// Whether another tag of the team (not `except`) has this name regardless of case.
async fn name_in_use(conn: &mut AnyConnection, team_id: &str, key: &str, except: &str) -> ServiceResult<bool> {
    let row = sqlx::query("SELECT id FROM tags WHERE team_id = $1 AND name_key = $2 AND id <> $3")
        .bind(team_id)
        .bind(key)
        .bind(except)
        .fetch_optional(conn)
        .await?;
    Ok(row.is_some())
}

fn unique_or(error: sqlx::Error) -> ServiceError {
    if is_unique_violation(&error) { name_taken() } else { error.into() }
}

impl CrmStore {
    /// The team's tags, by name regardless of case.
    pub async fn list_tags(&self, team_id: &str) -> ServiceResult<Vec<Tag>> {
        check_ids(&[("teamId", team_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        team_tags(&mut conn, team_id).await
    }

    /// A new tag; the name is trimmed, and taken (regardless of case) is a conflict. An empty
    /// colour is the default one.
    pub async fn create_tag(&self, request: &CreateTagRequest) -> ServiceResult<Tag> {
        let name = request.name.trim();
        validate([
            super::uuid_violation("teamId", &request.team_id),
            limits::TAG_NAME.check("name", name),
            color_violation("color", &request.color),
        ])?;
        let color = if request.color.is_empty() { DEFAULT_TAG_COLOR } else { request.color.as_str() };
        let mut tx = self.db.begin_write().await?;
        let key = name_key(name);
        if name_in_use(&mut tx, &request.team_id, &key, "").await? {
            return Err(name_taken());
        }
        let now = now_ms();
        let tag = Tag {
            id: uuid::Uuid::now_v7().to_string(),
            name: name.to_owned(),
            color: color.to_owned(),
            created_at_ms: now,
        };
        sqlx::query(
            "INSERT INTO tags (id, team_id, name, name_key, color, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $6)",
        )
        .bind(tag.id.as_str())
        .bind(request.team_id.as_str())
        .bind(tag.name.as_str())
        .bind(key.as_str())
        .bind(tag.color.as_str())
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(unique_or)?;
        tx.commit().await?;
        Ok(tag)
    }

    /// Renames or recolours a tag (an empty colour is the default one); the new name must not
    /// be another tag's regardless of case.
    pub async fn update_tag(&self, request: &UpdateTagRequest) -> ServiceResult<Tag> {
        let name = request.name.as_deref().map(str::trim);
        validate([
            super::uuid_violation("teamId", &request.team_id),
            super::uuid_violation("tagId", &request.tag_id),
            name.and_then(|name| limits::TAG_NAME.check("name", name)),
            request.color.as_deref().and_then(|color| color_violation("color", color)),
        ])?;
        let mut tx = self.db.begin_write().await?;
        let mut tag = find_tag(&mut tx, &request.team_id, &request.tag_id, self.db.for_update()).await?;
        if let Some(name) = name {
            if name_in_use(&mut tx, &request.team_id, &name_key(name), &tag.id).await? {
                return Err(name_taken());
            }
            tag.name = name.to_owned();
        }
        if let Some(color) = &request.color {
            tag.color = if color.is_empty() { DEFAULT_TAG_COLOR.to_owned() } else { color.clone() };
        }
        sqlx::query("UPDATE tags SET name = $1, name_key = $2, color = $3, updated_at = $4 WHERE id = $5")
            .bind(tag.name.as_str())
            .bind(name_key(&tag.name))
            .bind(tag.color.as_str())
            .bind(now_ms())
            .bind(tag.id.as_str())
            .execute(&mut *tx)
            .await
            .map_err(unique_or)?;
        tx.commit().await?;
        Ok(tag)
    }

    /// Deletes the tag and takes it off its contacts. Returns it as it was.
    pub async fn delete_tag(&self, team_id: &str, tag_id: &str) -> ServiceResult<Tag> {
        check_ids(&[("teamId", team_id), ("tagId", tag_id)])?;
        let mut tx = self.db.begin_write().await?;
        let tag = find_tag(&mut tx, team_id, tag_id, self.db.for_update()).await?;
        sqlx::query("DELETE FROM contact_tags WHERE tag_id = $1").bind(tag_id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM tags WHERE id = $1 AND team_id = $2")
            .bind(tag_id)
            .bind(team_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(tag)
    }
}
