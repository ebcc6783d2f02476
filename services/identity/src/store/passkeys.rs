//! Passkeys as stored: each user's WebAuthn credentials (the serialized `webauthn_rs::Passkey`,
//! found by credential id), and the ceremonies under way, whose server-side state is used once
//! and lasts five minutes. The ceremonies themselves are `crate::passkeys`.

use sqlx::Row;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::PasskeyInfo;

use super::IdentityStore;

/// How long a ceremony waits for the authenticator.
pub const CEREMONY_FOR_MS: i64 = 5 * 60 * 1000;
pub const REGISTER: &str = "register";
pub const SECOND_FACTOR: &str = "second_factor";
pub const SIGN_IN: &str = "sign_in";
/// A signed-in person proves again who they are (`Reauthenticate`).
pub const REAUTH: &str = "reauth";
/// Passkeys a person may have.
pub const MAX_PER_USER: i64 = 20;

/// A stored passkey: its row id and the serialized credential.
pub struct StoredPasskey {
    pub id: String,
    pub passkey: String,
}

/// A ceremony taken for its finish.
pub struct Ceremony {
    pub user_id: Option<String>,
    pub challenge_id: Option<String>,
    pub state: String,
}

fn ceremony_gone() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, "This passkey request has expired or was used; start again")
}

impl IdentityStore {
    pub async fn passkeys_of(&self, user_id: &str) -> ServiceResult<Vec<StoredPasskey>> {
        let rows = sqlx::query("SELECT id, passkey FROM passkeys WHERE user_id = $1 ORDER BY created_at, id")
            .bind(user_id)
            .fetch_all(self.db.pool())
            .await?;
        Ok(rows
            .iter()
            .map(|row| Ok(StoredPasskey { id: row.try_get("id")?, passkey: row.try_get("passkey")? }))
            .collect::<Result<_, sqlx::Error>>()?)
    }

    pub async fn passkey_infos(&self, user_id: &str) -> ServiceResult<Vec<PasskeyInfo>> {
        let rows = sqlx::query(
            "SELECT id, name, created_at, last_used_at FROM passkeys WHERE user_id = $1 ORDER BY created_at, id",
        )
        .bind(user_id)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows
            .iter()
            .map(|row| {
                Ok(PasskeyInfo {
                    id: row.try_get("id")?,
                    name: row.try_get("name")?,
                    created_at_ms: row.try_get("created_at")?,
                    last_used_at_ms: row.try_get("last_used_at")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()?)
    }

    /// Keeps a new passkey of the user. 409 past [`MAX_PER_USER`] or for a credential kept already.
    pub async fn add_passkey(
        &self,
        user_id: &str,
        credential_id: &str,
        passkey: &str,
        name: &str,
    ) -> ServiceResult<PasskeyInfo> {
        let mut tx = self.db.begin_write().await?;
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM passkeys WHERE user_id = $1")
            .bind(user_id)
            .fetch_one(&mut *tx)
            .await?;
        if count >= MAX_PER_USER {
            return Err(ServiceError::conflict(format!("A person has at most {MAX_PER_USER} passkeys")));
        }
        let info = PasskeyInfo {
            id: uuid::Uuid::new_v4().to_string(),
            name: name.to_owned(),
            created_at_ms: now_ms(),
            last_used_at_ms: None,
        };
        sqlx::query(
            "INSERT INTO passkeys (id, user_id, credential_id, passkey, name, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&info.id)
        .bind(user_id)
        .bind(credential_id)
        .bind(passkey)
        .bind(name)
        .bind(info.created_at_ms)
        .execute(&mut *tx)
        .await
        .map_err(|error| {
            if switchboard_kit::db::is_unique_violation(&error) {
                ServiceError::conflict("This passkey is registered already")
            } else {
                error.into()
            }
        })?;
        tx.commit().await?;
        Ok(info)
    }

    /// Stores a passkey's credential again after a use (its counter and backup state move).
    pub async fn passkey_used(&self, id: &str, passkey: &str) -> ServiceResult<()> {
        sqlx::query("UPDATE passkeys SET passkey = $1, last_used_at = $2 WHERE id = $3")
            .bind(passkey)
            .bind(now_ms())
            .bind(id)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// Removes one of the user's passkeys. 404 when it is not theirs; 409 when their team
    /// requires a second factor and it is their last one.
    pub async fn remove_passkey(&self, user_id: &str, team_id: &str, id: &str) -> ServiceResult<()> {
        let not_found = || ServiceError::not_found("Passkey not found");
        if uuid::Uuid::parse_str(id).is_err() {
            return Err(not_found());
        }
        let mut tx = self.db.begin_write().await?;
        let owned: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM passkeys WHERE id = $1 AND user_id = $2")
            .bind(id)
            .bind(user_id)
            .fetch_one(&mut *tx)
            .await?;
        if owned == 0 {
            return Err(not_found());
        }
        let others: i64 = sqlx::query_scalar(
            "SELECT (SELECT COUNT(*) FROM passkeys WHERE user_id = $1 AND id <> $2) \
             + (SELECT COUNT(*) FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL)",
        )
        .bind(user_id)
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        if others == 0 && self.requires_second_factor(team_id).await? {
            return Err(ServiceError::conflict("Your team requires a second factor")
                .with_hint("Add another second factor first, or ask an owner to lift the requirement."));
        }
        sqlx::query("DELETE FROM passkeys WHERE id = $1").bind(id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Keeps a ceremony's state; answers its id.
    pub async fn begin_ceremony(
        &self,
        kind: &str,
        user_id: Option<&str>,
        challenge_id: Option<&str>,
        state: &str,
    ) -> ServiceResult<String> {
        let id = uuid::Uuid::new_v4().to_string();
        let now = now_ms();
        sqlx::query(
            "INSERT INTO webauthn_ceremonies (id, kind, user_id, challenge_id, state, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&id)
        .bind(kind)
        .bind(user_id)
        .bind(challenge_id)
        .bind(state)
        .bind(now)
        .bind(now + CEREMONY_FOR_MS)
        .execute(self.db.pool())
        .await?;
        Ok(id)
    }

    /// Takes a ceremony of `kind`, once.
    pub async fn take_ceremony(&self, kind: &str, id: &str) -> ServiceResult<Ceremony> {
        if uuid::Uuid::parse_str(id).is_err() {
            return Err(ceremony_gone());
        }
        let now = now_ms();
        let taken = sqlx::query(
            "UPDATE webauthn_ceremonies SET used_at = $1 WHERE id = $2 AND kind = $3 AND used_at IS NULL \
             AND expires_at > $1",
        )
        .bind(now)
        .bind(id)
        .bind(kind)
        .execute(self.db.pool())
        .await?;
        if taken.rows_affected() == 0 {
            return Err(ceremony_gone());
        }
        let row = sqlx::query("SELECT user_id, challenge_id, state FROM webauthn_ceremonies WHERE id = $1")
            .bind(id)
            .fetch_one(self.db.pool())
            .await?;
        Ok(Ceremony {
            user_id: row.try_get("user_id")?,
            challenge_id: row.try_get("challenge_id")?,
            state: row.try_get("state")?,
        })
    }
}
