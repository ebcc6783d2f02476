//! Users of a team: needed for assignments and created with every subteam.

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_api::role::Role;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{NewUser, User};

use super::{IdentityStore, check_id};
use crate::validate;

pub(super) const USER_COLUMNS: &str = "id, team_id, first_name, last_name, email, role, created_at";
/// What is wrong with `role`, if it is not the name of a [`Role`].
pub(super) fn role_violation(role: &str) -> Option<switchboard_kit::FieldViolation> {
    Role::parse(role)
        .is_none()
        .then(|| switchboard_kit::FieldViolation::new("role", format!("must be one of {}", Role::names())))
}

pub(super) fn user_from_row(row: &AnyRow) -> Result<User, sqlx::Error> {
    Ok(User {
        id: row.try_get("id")?,
        team_id: row.try_get("team_id")?,
        first_name: row.try_get("first_name")?,
        last_name: row.try_get("last_name")?,
        email: row.try_get("email")?,
        role: row.try_get("role")?,
        created_at_ms: row.try_get("created_at")?,
    })
}

pub(super) async fn insert_user(conn: &mut AnyConnection, team_id: &str, new: &NewUser) -> ServiceResult<User> {
    let role = if new.role.is_empty() { "member" } else { new.role.as_str() };
    validate::all([
        switchboard_kit::limits::PERSON_NAME.check("firstName", &new.first_name),
        switchboard_kit::limits::PERSON_NAME.check("lastName", &new.last_name),
        validate::email("email", &new.email),
        role_violation(role),
    ])?;
    let user = User {
        id: uuid::Uuid::new_v4().to_string(),
        team_id: team_id.to_owned(),
        first_name: new.first_name.trim().to_owned(),
        last_name: new.last_name.trim().to_owned(),
        email: new.email.trim().to_lowercase(),
        role: role.to_owned(),
        created_at_ms: now_ms(),
    };
    sqlx::query(&format!("INSERT INTO users ({USER_COLUMNS}, email_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $5)"))
        .bind(&user.id)
        .bind(&user.team_id)
        .bind(&user.first_name)
        .bind(&user.last_name)
        .bind(&user.email)
        .bind(&user.role)
        .bind(user.created_at_ms)
        .execute(conn)
        .await
        .map_err(|error| {
            if switchboard_kit::db::is_unique_violation(&error) {
                ServiceError::conflict("A user with this e-mail already exists in the team")
            } else {
                error.into()
            }
        })?;
    Ok(user)
}

impl IdentityStore {
    pub async fn create_user(&self, team_id: &str, new: &NewUser) -> ServiceResult<User> {
        self.team(team_id).await?;
        let mut tx = self.db.begin_write().await?;
        let user = insert_user(&mut tx, team_id, new).await?;
        tx.commit().await?;
        Ok(user)
    }

    pub async fn list_users(&self, team_id: &str) -> ServiceResult<Vec<User>> {
        check_id("teamId", team_id)?;
        Ok(self.users_of(&[team_id.to_owned()]).await?.remove(team_id).unwrap_or_default())
    }
}

/// Whether `role` (a stored role, or a caller's: "key" for an API key) is an owner's.
pub fn is_owner(role: &str) -> bool {
    Role::parse(role) == Some(Role::Owner)
}
