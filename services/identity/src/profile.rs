//! The `AccountService` calls with which a signed-in person changes their own names and
//! e-mail address (the store's part is `store::profile`). Each is in the audit log of the
//! person's team; the e-mail change mails a confirmation link to the new address and, once it
//! is used, a notice to the old one. An address someone else uses gets a notice instead of a
//! link, and the same answer, at once: neither tells the requester who has an account.

use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{
    ConfirmEmailChangeRequest, EmailChangeRequested, RequestEmailChangeRequest, UpdateProfileRequest, User,
};

use crate::grpc::accounts::{AccountsApi, user_actor};
use crate::mail;
use crate::passwords;

/// How long a confirmation link works: as a password-reset link, one day.
const EMAIL_CHANGE_VALID_MS: i64 = 24 * 60 * 60 * 1000;

impl AccountsApi {
    /// The user of a live session.
    async fn session_user(&self, token_hash: &str) -> ServiceResult<User> {
        let session = self.store.session(token_hash, self.settings.sessions).await?;
        session.user.ok_or_else(|| ServiceError::not_found("User not found"))
    }

    /// The rest of an e-mail change, after its answer: a link to the new address, or a notice
    /// when another account uses it; and the audit entry.
    async fn send_email_change(
        &self,
        user: &User,
        email_key: &str,
        expires_at_ms: i64,
        request: &RequestEmailChangeRequest,
    ) -> ServiceResult<()> {
        let token = self.store.begin_email_change(user, email_key, expires_at_ms).await?;
        match self.mailer.as_ref().filter(|_| !request.link_base.is_empty()) {
            Some(mailer) => match token {
                Some(token) => {
                    let url = switchboard_kit::links::confirm_email_url(&request.link_base, &token);
                    mailer.send_later(mail::email_change(email_key, &url));
                }
                None => mailer.send_later(mail::email_in_use(email_key)),
            },
            None => tracing::warn!("an e-mail change was asked for, but no SMTP server is configured to send its link"),
        }
        let target = format!("{} -> {}", user.email, email_key);
        let client = request.client.as_ref();
        self.audit(&user.team_id, AuditAction::UserEmailChangeRequested, user_actor(user), &target, client).await;
        Ok(())
    }

    pub(crate) async fn update_profile(&self, request: UpdateProfileRequest) -> ServiceResult<User> {
        let before = self.session_user(&request.token_hash).await?;
        let user = self.store.set_names(&before.id, &request.first_name, &request.last_name).await?;
        if (&user.first_name, &user.last_name) != (&before.first_name, &before.last_name) {
            // Gateways keep sessions (with their user's names) for a moment: they look again.
            self.sessions_changed(&user.team_id).await;
            let client = request.client.as_ref();
            self.audit(&user.team_id, AuditAction::UserNameChanged, user_actor(&user), &user.email, client).await;
        }
        Ok(user)
    }

    pub(crate) async fn request_email_change(
        &self,
        request: RequestEmailChangeRequest,
    ) -> ServiceResult<EmailChangeRequested> {
        let session = self.store.session(&request.token_hash, self.settings.sessions).await?;
        let user = session.user.clone().ok_or_else(|| ServiceError::not_found("User not found"))?;
        // Someone who found a signed-in browser must not be able to move the account to their
        // own mailbox: whoever has a password proves they know it; a person without one
        // (single sign-on only) proves who they are as for any change to their account.
        match self.store.password_hash(&user.id).await? {
            Some(hash) => {
                if request.password.is_empty() {
                    return Err(ServiceError::invalid_field("password", "is required to change your e-mail address"));
                }
                if !passwords::verify(Some(hash), &request.password).await? {
                    let client = request.client.as_ref();
                    self.audit(
                        &user.team_id,
                        AuditAction::UserEmailChangeFailed,
                        user_actor(&user),
                        &user.email,
                        client,
                    )
                    .await;
                    return Err(ServiceError::invalid_field("password", "is not your current password"));
                }
                // With a second factor, a phished password and a stolen cookie together must
                // not move the account: the factor proved lately, as for a change of factors.
                if self.store.has_second_factor(&user.id).await? {
                    AccountsApi::check_recent(&session)?;
                }
            }
            None => AccountsApi::check_recent(&session)?,
        }
        let email_key = crate::store::profile::new_address(&user, &request.email)?;
        let expires_at_ms = now_ms() + EMAIL_CHANGE_VALID_MS;
        let mailed = self.mailer.is_some() && !request.link_base.is_empty();
        let api = self.clone();
        let email = email_key.clone();
        tokio::spawn(async move {
            if let Err(error) = api.send_email_change(&user, &email, expires_at_ms, &request).await {
                tracing::warn!(%error, "an e-mail change was not begun");
            }
        });
        Ok(EmailChangeRequested { email: email_key, expires_at_ms, mailed })
    }

    pub(crate) async fn confirm_email_change(&self, request: ConfirmEmailChangeRequest) -> ServiceResult<User> {
        let changed = self.store.confirm_email_change(&request.token).await?;
        let user = changed.user;
        // The sessions stay; gateways look them up again for the new address.
        self.sessions_changed(&user.team_id).await;
        if let Some(mailer) = self.mailer.as_ref() {
            mailer.send_later(mail::email_changed(&changed.old_email, &user.email));
        }
        let target = format!("{} -> {}", changed.old_email, user.email);
        let client = request.client.as_ref();
        self.audit(&user.team_id, AuditAction::UserEmailChanged, user_actor(&user), &target, client).await;
        Ok(user)
    }
}
