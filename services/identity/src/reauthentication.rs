//! Re-authentication (ASVS 3.7.1): a person's second factors, password, e-mail address and
//! sessions change only from a session that proved who its person is in the last few minutes
//! (`SWITCHBOARD_REAUTH_AFTER`, 5 minutes): its sign-in, or `Reauthenticate`. A stolen session
//! cookie, or one opened before a factor existed, then cannot register a passkey of its own,
//! read new recovery codes or remove the authenticator app.
//!
//! The proof is the strongest the person has: a second factor (an authenticator code, a
//! recovery code or a passkey) when they have one, so that a stolen session and a phished
//! password together still cannot change the factors; otherwise their password. A person who
//! signs in only through single sign-on and has no factor signs in again. The gateway refuses
//! the changes once `Session.reauthenticate_after_ms` has passed.

use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::{ReauthenticateRequest, Session, User};

use crate::grpc::accounts::{AccountsApi, user_actor};
use crate::passwords;
use crate::second_factor::CodeVerdict;
use crate::store::passkeys::REAUTH;
use crate::store::second_factor::Purpose;

fn not_signed_in() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, "Not signed in")
}

/// A passkey answer that failed, told as the field it came in: the session stays signed in.
fn passkey_refused(error: ServiceError) -> ServiceError {
    if error.kind == ErrorKind::Unauthorized { ServiceError::invalid_field("passkey", error.message) } else { error }
}

impl AccountsApi {
    pub(crate) async fn reauthenticate(&self, request: ReauthenticateRequest) -> ServiceResult<Session> {
        let session = self.store.session(&request.token_hash, self.settings.sessions).await?;
        let user = session.user.clone().ok_or_else(not_signed_in)?;
        let client = request.client.clone().unwrap_or_default();
        let has_factor = self.store.has_second_factor(&user.id).await?;
        if !request.passkey_ceremony.is_empty() {
            let assertion =
                (request.passkey_ceremony.as_str(), request.passkey_credential.as_str(), request.origin.as_str());
            let accepted = self.passkey_assertion(REAUTH, &user, None, assertion).await.map_err(passkey_refused)?;
            if !accepted {
                self.reauthentication_failed(&user, &client).await;
                return Err(ServiceError::invalid_field("passkey", "is not one of your passkeys"));
            }
        } else if !request.code.trim().is_empty() {
            if !has_factor {
                return Err(ServiceError::invalid_field("code", "you have no second factor: send your password"));
            }
            self.reauthenticate_with_code(&user, &request.code, &client).await?;
        } else if !request.password.is_empty() {
            if has_factor {
                return Err(ServiceError::invalid_field(
                    "code",
                    "is required: you have a second factor, so confirm with it (a code of your authenticator app, a \
                     recovery code, or a passkey)",
                ));
            }
            let hash = self.store.password_hash(&user.id).await?.ok_or_else(|| {
                ServiceError::invalid_field("password", "you have none: sign in again through single sign-on")
            })?;
            if !passwords::verify(Some(hash), &request.password).await? {
                self.reauthentication_failed(&user, &client).await;
                return Err(ServiceError::invalid_field("password", "is not your current password"));
            }
        } else {
            let field = if has_factor { "code" } else { "password" };
            return Err(ServiceError::invalid_field(field, "is required to confirm it is you"));
        }
        self.store.mark_reauthenticated(&session.id).await?;
        self.audit(&user.team_id, AuditAction::AuthReauthenticated, user_actor(&user), &user.email, Some(&client))
            .await;
        self.sessions_changed(&user.team_id).await;
        self.store.session(&request.token_hash, self.settings.sessions).await
    }

    /// A code checked as a sign-in's second step is: through a challenge of its own, so that it
    /// counts with the person's other tries (10 wrong ones in 15 minutes, then 429).
    async fn reauthenticate_with_code(
        &self,
        user: &User,
        code: &str,
        client: &switchboard_proto::v1::Client,
    ) -> ServiceResult<()> {
        let (token, _) = self.store.create_challenge(user, client, Purpose::Reauth).await?;
        let challenge = self.store.challenge(&token).await?;
        let verdict = self.check_code(user, code, client).await?;
        if verdict != CodeVerdict::Accepted {
            self.audit(&user.team_id, AuditAction::AuthSecondFactorFailed, user_actor(user), &user.email, Some(client))
                .await;
            return Err(ServiceError::invalid_field(
                "code",
                if verdict == CodeVerdict::Reused {
                    "was already used: wait for the next code of your authenticator app, or use a recovery code"
                } else {
                    "is neither the current code of your authenticator app nor an unused recovery code"
                },
            ));
        }
        self.store.finish_challenge(&challenge.id).await
    }

    async fn reauthentication_failed(&self, user: &User, client: &switchboard_proto::v1::Client) {
        self.audit(&user.team_id, AuditAction::AuthReauthenticationFailed, user_actor(user), &user.email, Some(client))
            .await;
    }

    /// For a change that needs a recent proof and is not behind the gateway's check: refused
    /// past the session's window.
    pub(crate) fn check_recent(session: &Session) -> ServiceResult<()> {
        if session.reauthenticate_after_ms <= switchboard_kit::time::now_ms() {
            return Err(ServiceError::reauthentication_required());
        }
        Ok(())
    }
}
