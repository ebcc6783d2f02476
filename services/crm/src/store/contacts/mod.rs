//! Contacts: created alone or in bulk (one path: a single create is a bulk of one), read with
//! their tags, stage, boards and custom field values, updated, deleted and listed.
//!
//! A contact is named by its number (E.164) within the team: a second contact with the same
//! number is refused with `CONTACT_EXISTS` and the first one's id. Its searchable text (name,
//! e-mail, number, lowercased) lives in `contact_search`, changed in the same transaction as
//! the contact; see `switchboard_kit::listing` for how it is indexed on each engine.
//!
//! Each verb has a module of its own; what they share (the row, its search text and sort
//! keys, who owns a number, the tag bits, the webhook event) stays here, so that a change to
//! how a contact is stored is made once for all of them.

mod by_number;
mod checks;
mod create;
mod delete;
mod list;
mod parts;
mod placements;
mod read;
mod update;

use std::collections::HashMap;

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::ServiceResult;
use switchboard_kit::db::Engine;
use switchboard_kit::limits::Length;
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::EventType;
use switchboard_proto::v1::Contact;

pub use self::create::bulk_failure;
pub(super) use self::placements::{first_stages, place};
pub(super) use self::read::hydrate_one;
use super::{contact_not_found, select_in};

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

pub(super) async fn touch(conn: &mut AnyConnection, contact_id: &str) -> ServiceResult<i64> {
    let now = now_ms();
    sqlx::query("UPDATE contacts SET updated_at = $1 WHERE id = $2").bind(now).bind(contact_id).execute(conn).await?;
    Ok(now)
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

/// Tells webhooks of a change to `contact`, in the change's transaction.
pub async fn told(conn: &mut AnyConnection, kind: EventType, contact: &Contact) -> ServiceResult<()> {
    let resource = switchboard_proto::v1::event::Resource::Contact(contact.clone());
    switchboard_kit::outbox::record(conn, kind, (&contact.team_id, &contact.id), resource).await?;
    Ok(())
}
