//! The contacts of a set of numbers: who the people of a page of calls or chats are, one
//! query for the page rather than one a row.

use std::collections::HashMap;

use sqlx::Row;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult};
use switchboard_proto::v1::NumberedContact;

use crate::store::{CrmStore, select_in, uuid_violation};

/// The most numbers one request may name: a page of an export.
pub const MOST_NUMBERS: usize = 1_000;

impl CrmStore {
    /// The team's contacts whose number is one of `numbers` (in any spelling), each with the
    /// number as it was given; a text that is no phone number is skipped.
    pub async fn contacts_by_number(&self, team_id: &str, numbers: &[String]) -> ServiceResult<Vec<NumberedContact>> {
        if let Some(violation) = uuid_violation("teamId", team_id) {
            return Err(ServiceError::validation(vec![violation]));
        }
        if numbers.len() > MOST_NUMBERS {
            return Err(ServiceError::validation(vec![FieldViolation::new(
                "numbers",
                format!("must name at most {MOST_NUMBERS} numbers"),
            )]));
        }
        // E.164 → the spellings asked for (two spellings of one number both get its contact).
        let mut asked: HashMap<String, Vec<&str>> = HashMap::new();
        for number in numbers {
            if let Ok(normal) = self.phone.normalise(number) {
                asked.entry(normal).or_default().push(number);
            }
        }
        if asked.is_empty() {
            return Ok(Vec::new());
        }
        let normal: Vec<String> = asked.keys().cloned().collect();
        let mut conn = self.db.pool().acquire().await?;
        let rows = select_in(
            &mut conn,
            "SELECT id, number, first_name, last_name FROM contacts WHERE team_id = $1 AND number IN ({ids})",
            &[team_id],
            &normal,
        )
        .await?;
        let mut found = Vec::new();
        for row in &rows {
            let number: String = row.try_get("number")?;
            let (contact_id, first_name, last_name): (String, Option<String>, Option<String>) =
                (row.try_get("id")?, row.try_get("first_name")?, row.try_get("last_name")?);
            for spelling in asked.get(&number).into_iter().flatten() {
                found.push(NumberedContact {
                    number: (*spelling).to_owned(),
                    contact_id: contact_id.clone(),
                    first_name: first_name.clone(),
                    last_name: last_name.clone(),
                });
            }
        }
        Ok(found)
    }
}
