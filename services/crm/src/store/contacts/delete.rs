//! Deleting a contact: everything that hangs off it goes in the same transaction, as nothing
//! else refers to a contact's notes, tags, placements or values, and none may outlive it.

use switchboard_kit::ServiceResult;
use switchboard_kit::vocabulary::EventType;
use switchboard_proto::v1::Contact;

use super::read::hydrate_one;
use super::{find_contact, told};
use crate::store::{CrmStore, check_ids};

impl CrmStore {
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
        told(&mut tx, EventType::ContactDeleted, &contact).await?;
        tx.commit().await?;
        Ok(contact)
    }
}
