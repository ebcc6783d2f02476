//! The `AccountService` calls with which a signed-in person changes their own names and
//! e-mail address (the store's part is `store::profile`). Each is in the audit log of the
//! person's team; the e-mail change mails a confirmation link to the new address and, once it
//! is used, a notice to the old one.

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

    pub(crate) async fn update_profile(&self, request: UpdateProfileRequest) -> ServiceResult<User> {
        let before = self.session_user(&request.token_hash).await?;
        let user = self.store.set_names(&before.id, &request.first_name, &request.last_name).await?;
        if (&user.first_name, &user.last_name) != (&before.first_name, &before.last_name) {
            // Gateways keep sessions (with their user's names) for a moment: they look again.
            self.sessions_changed(&user.team_id).await;
            let client = request.client.as_ref();
            self.audit(&user.team_id, "user.name_changed", user_actor(&user), &user.email, client).await;
        }
        Ok(user)
    }

    pub(crate) async fn request_email_change(
        &self,
        request: RequestEmailChangeRequest,
    ) -> ServiceResult<EmailChangeRequested> {
        let user = self.session_user(&request.token_hash).await?;
        // Someone who found a signed-in browser must not be able to move the account to their
        // own mailbox: whoever has a password proves they know it (single sign-on people
        // have none; their provider vouched for them).
        if let Some(hash) = self.store.password_hash(&user.id).await? {
            if request.password.is_empty() {
                return Err(ServiceError::invalid_field("password", "is required to change your e-mail address"));
            }
            if !passwords::verify(Some(hash), &request.password).await? {
                let client = request.client.as_ref();
                self.audit(&user.team_id, "user.email_change_failed", user_actor(&user), &user.email, client).await;
                return Err(ServiceError::invalid_field("password", "is not your current password"));
            }
        }
        let change = self.store.begin_email_change(&user, &request.email, EMAIL_CHANGE_VALID_MS).await?;
        let mailed = match self.mailer.as_ref().filter(|_| !request.link_base.is_empty()) {
            Some(mailer) => {
                let url = switchboard_kit::links::confirm_email_url(&request.link_base, &change.token);
                mailer.send_later(mail::email_change(&change.email, &url));
                true
            }
            None => {
                tracing::warn!("an e-mail change was asked for, but no SMTP server is configured to send its link");
                false
            }
        };
        let target = format!("{} -> {}", user.email, change.email);
        let client = request.client.as_ref();
        self.audit(&user.team_id, "user.email_change_requested", user_actor(&user), &target, client).await;
        Ok(EmailChangeRequested { email: change.email, expires_at_ms: change.expires_at_ms, mailed })
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
        self.audit(&user.team_id, "user.email_changed", user_actor(&user), &target, client).await;
        Ok(user)
    }
}
