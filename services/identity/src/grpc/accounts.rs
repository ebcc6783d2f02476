//! The gRPC face of accounts (`AccountService`): passwords are checked and hashed here, so that
//! no other component ever holds one longer than a request. The events of signing in and out
//! are written to the audit log here, where the team is known even when the sign-in fails;
//! what authenticated callers do is written by the gateway, which knows who they are.

use switchboard_api::role::Role;
use switchboard_kit::grpc::{Reply, reply};
use switchboard_kit::team_versions::{TeamVersions, announce};
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::account_service_server::{AccountService, AccountServiceServer};
use switchboard_proto::v1::*;
use tonic::Request;

use crate::mail::{self, Mailer};
use crate::passwords;
use crate::settings::AccountSettings;
use crate::store::IdentityStore;
use crate::store::links::{LinkKind, Names};
use crate::store::members::is_owner;
use crate::store::second_factor::Purpose;
use crate::validate;

#[derive(Clone)]
pub struct AccountsApi {
    pub(crate) store: IdentityStore,
    pub(crate) settings: AccountSettings,
    pub(crate) mailer: Option<Mailer>,
    /// Reaches the teams' identity providers (single sign-on).
    pub(crate) sso_http: crate::sso_http::SsoHttp,
    /// A session that ends or changes gives its team a new version: every gateway then looks
    /// its sessions up again at their next request.
    versions: Option<TeamVersions>,
}

pub fn server(
    store: IdentityStore,
    settings: AccountSettings,
    mailer: Option<Mailer>,
    versions: Option<TeamVersions>,
    sso_http: crate::sso_http::SsoHttp,
) -> AccountServiceServer<AccountsApi> {
    AccountServiceServer::new(AccountsApi { store, settings, mailer, versions, sso_http })
}

fn wrong_credentials() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, "Invalid email or password")
}

pub(crate) fn user_actor(user: &User) -> Actor {
    let name = format!("{} {}", user.first_name, user.last_name).trim().to_owned();
    Actor { r#type: "user".to_owned(), id: user.id.clone(), name }
}

/// `about_user`: the person's e-mail, names and team, which a guesser tries first.
fn check_password(field: &str, password: &str, about_user: &[&str]) -> ServiceResult<()> {
    switchboard_kit::validate([passwords::check_new(field, password, about_user)])
}

impl AccountsApi {
    /// After sessions of `team_id` ended or changed: a new team version, before the answer.
    pub(crate) async fn sessions_changed(&self, team_id: &str) {
        announce(self.versions.as_ref(), &[team_id]).await;
    }

    async fn signed_in_changed(&self, signed_in: &SignedIn) {
        if let Some(team) = signed_in.session.as_ref().and_then(|s| s.team.as_ref()) {
            self.sessions_changed(&team.id).await;
        }
    }

    /// Writes an entry; a failure to write is logged, never the caller's failure.
    pub(crate) async fn audit(
        &self,
        team_id: &str,
        action: AuditAction,
        actor: Actor,
        target: &str,
        client: Option<&Client>,
    ) {
        let client = client.cloned().unwrap_or_default();
        let entry = AuditEntry {
            team_id: team_id.to_owned(),
            action: action.as_str().to_owned(),
            actor: Some(actor),
            target: target.to_owned(),
            ip: client.ip,
            user_agent: client.user_agent,
            ..AuditEntry::default()
        };
        if let Err(error) = self.store.record_audit(entry).await {
            tracing::warn!(%error, %action, "an audit entry was not written");
        }
    }

    /// `RequestPasswordReset`'s work, after its answer: a link for the account using the
    /// address, if there is one, mailed to it.
    async fn mail_reset_link(&self, request: &RequestPasswordResetRequest) -> ServiceResult<()> {
        let link = match self.store.reset_link(&request.email, self.settings.reset_valid_ms).await {
            Ok(link) => link,
            Err(error) if error.kind == ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(error),
        };
        match self.mailer.as_ref().filter(|_| !request.link_base.is_empty()) {
            Some(mailer) => {
                let url = switchboard_kit::links::reset_url(&request.link_base, &link.token);
                mailer.send_later(mail::reset(&link.email, &url));
            }
            None => tracing::warn!("a password reset was asked for, but no SMTP server is configured to send it"),
        }
        let actor = Actor { r#type: "visitor".to_owned(), ..Actor::default() };
        self.audit(&link.team_id, AuditAction::AuthPasswordResetRequested, actor, &link.email, request.client.as_ref())
            .await;
        Ok(())
    }

    pub(crate) async fn audit_signed_in(&self, action: AuditAction, signed_in: &SignedIn, client: Option<&Client>) {
        if let Some(user) = signed_in.session.as_ref().and_then(|s| s.user.as_ref()) {
            self.audit(&user.team_id, action, user_actor(user), &user.email, client).await;
        }
    }
}

#[tonic::async_trait]
impl AccountService for AccountsApi {
    async fn get_account_options(&self, _: Request<GetAccountOptionsRequest>) -> Reply<AccountOptions> {
        reply(Ok(AccountOptions { signup_open: self.settings.signup_open }))
    }

    async fn sign_in(&self, request: Request<SignInRequest>) -> Reply<SignedIn> {
        let request = request.into_inner();
        let account = self.store.account(&request.email).await?;
        let (user, hash) = match account {
            Some(account) => (Some(account.user), Some(account.password_hash)),
            None => (None, None),
        };
        let valid = passwords::verify(hash, &request.password).await?;
        let user = match user {
            Some(user) if valid => user,
            Some(user) => {
                let client = request.client.as_ref();
                self.audit(&user.team_id, AuditAction::AuthSignInFailed, user_actor(&user), &user.email, client).await;
                return Err(wrong_credentials().into());
            }
            None => return Err(wrong_credentials().into()),
        };
        let client = request.client.unwrap_or_default();
        reply(self.signed_in_or_challenged(&user, &client, Purpose::SignIn).await)
    }

    async fn verify_second_factor(&self, request: Request<VerifySecondFactorRequest>) -> Reply<SignedIn> {
        reply(AccountsApi::verify_second_factor(self, request.into_inner()).await)
    }

    async fn get_second_factors(&self, request: Request<SessionTokenRequest>) -> Reply<SecondFactors> {
        reply(self.second_factors_of(&request.into_inner().token_hash).await)
    }

    async fn begin_totp(&self, request: Request<SessionTokenRequest>) -> Reply<TotpEnrolment> {
        reply(AccountsApi::begin_totp(self, &request.into_inner().token_hash).await)
    }

    async fn confirm_totp(&self, request: Request<ConfirmTotpRequest>) -> Reply<RecoveryCodes> {
        reply(AccountsApi::confirm_totp(self, request.into_inner()).await)
    }

    async fn remove_totp(&self, request: Request<SessionTokenRequest>) -> Reply<SecondFactors> {
        let request = request.into_inner();
        reply(AccountsApi::remove_totp(self, &request.token_hash, request.client.as_ref()).await)
    }

    async fn new_recovery_codes(&self, request: Request<SessionTokenRequest>) -> Reply<RecoveryCodes> {
        let request = request.into_inner();
        reply(self.renew_recovery_codes(&request.token_hash, request.client.as_ref()).await)
    }

    async fn reauthenticate(&self, request: Request<ReauthenticateRequest>) -> Reply<Session> {
        reply(AccountsApi::reauthenticate(self, request.into_inner()).await)
    }

    async fn begin_passkey_reauthentication(&self, request: Request<PasskeyCeremonyRequest>) -> Reply<PasskeyCeremony> {
        reply(AccountsApi::begin_passkey_reauthentication(self, request.into_inner()).await)
    }

    async fn get_security_policy(&self, request: Request<SecurityPolicyRequest>) -> Reply<SecurityPolicy> {
        let team_id = request.into_inner().team_id;
        let require_second_factor = self.store.requires_second_factor(&team_id).await?;
        reply(Ok(SecurityPolicy { require_second_factor }))
    }

    async fn set_security_policy(&self, request: Request<SetSecurityPolicyRequest>) -> Reply<SecurityPolicy> {
        reply(AccountsApi::set_security_policy(self, request.into_inner()).await)
    }

    async fn get_sso_config(&self, request: Request<SsoConfigRequest>) -> Reply<SsoConfig> {
        let team_id = request.into_inner().team_id;
        let stored = self.store.sso(&team_id).await?;
        reply(
            stored
                .map(|stored| stored.config)
                .ok_or_else(|| ServiceError::not_found("This team has no single sign-on")),
        )
    }

    async fn set_sso_config(&self, request: Request<SetSsoConfigRequest>) -> Reply<SsoConfig> {
        reply(self.set_sso(request.into_inner()).await)
    }

    async fn delete_sso_config(&self, request: Request<SsoConfigRequest>) -> Reply<SsoConfig> {
        let request = request.into_inner();
        if !is_owner(&request.caller_role) {
            return Err(ServiceError::forbidden("Only an owner changes the team's single sign-on").into());
        }
        let stored = self.store.sso(&request.team_id).await?;
        let config = stored
            .map(|stored| stored.config)
            .ok_or_else(|| ServiceError::not_found("This team has no single sign-on"))?;
        self.store.delete_sso(&request.team_id).await?;
        reply(Ok(config))
    }

    async fn start_sso(&self, request: Request<StartSsoRequest>) -> Reply<SsoStart> {
        reply(AccountsApi::start_sso(self, request.into_inner()).await)
    }

    async fn finish_sso(&self, request: Request<FinishSsoRequest>) -> Reply<SignedIn> {
        reply(AccountsApi::finish_sso(self, request.into_inner()).await)
    }

    async fn verify_sso_domain(&self, request: Request<VerifySsoDomainRequest>) -> Reply<SsoDomain> {
        reply(AccountsApi::verify_sso_domain(self, request.into_inner()).await)
    }

    async fn get_sso_link(&self, request: Request<SessionTokenRequest>) -> Reply<SsoLinkStatus> {
        reply(self.sso_link_status(&request.into_inner().token_hash).await)
    }

    async fn start_sso_link(&self, request: Request<StartSsoLinkRequest>) -> Reply<SsoStart> {
        reply(AccountsApi::start_sso_link(self, request.into_inner()).await)
    }

    async fn begin_passkey_registration(&self, request: Request<PasskeyCeremonyRequest>) -> Reply<PasskeyCeremony> {
        reply(AccountsApi::begin_passkey_registration(self, request.into_inner()).await)
    }

    async fn finish_passkey_registration(&self, request: Request<FinishPasskeyRequest>) -> Reply<PasskeyInfo> {
        reply(AccountsApi::finish_passkey_registration(self, request.into_inner()).await)
    }

    async fn remove_passkey(&self, request: Request<RemovePasskeyRequest>) -> Reply<SecondFactors> {
        reply(AccountsApi::remove_passkey(self, request.into_inner()).await)
    }

    async fn begin_passkey_second_factor(&self, request: Request<PasskeyCeremonyRequest>) -> Reply<PasskeyCeremony> {
        reply(AccountsApi::begin_passkey_second_factor(self, request.into_inner()).await)
    }

    async fn begin_passkey_sign_in(&self, request: Request<PasskeyCeremonyRequest>) -> Reply<PasskeyCeremony> {
        reply(AccountsApi::begin_passkey_sign_in(self, request.into_inner()).await)
    }

    async fn finish_passkey_sign_in(&self, request: Request<FinishPasskeyRequest>) -> Reply<SignedIn> {
        reply(AccountsApi::finish_passkey_sign_in(self, request.into_inner()).await)
    }

    async fn sign_up(&self, request: Request<SignUpRequest>) -> Reply<SignedIn> {
        let request = request.into_inner();
        if !self.settings.signup_open {
            return Err(ServiceError::forbidden("Sign-up is closed on this platform")
                .with_hint("Ask its operator or a team owner for an invitation.")
                .into());
        }
        let about = [request.email.as_str(), &request.first_name, &request.last_name, &request.team_name];
        check_password("password", &request.password, &about)?;
        let password_hash = passwords::hash(&request.password).await?;
        let team = crate::store::NewTeam {
            name: request.team_name,
            initial_credits: self.settings.signup_credits,
            ..Default::default()
        };
        let owner = NewUser {
            first_name: request.first_name,
            last_name: request.last_name,
            email: request.email,
            role: Role::Owner.as_str().to_owned(),
        };
        let client = request.client.unwrap_or_default();
        let signed_in = self.store.sign_up(team, &owner, &password_hash, &client, self.settings.sessions).await?;
        self.audit_signed_in(AuditAction::AuthSignedUp, &signed_in, Some(&client)).await;
        reply(Ok(signed_in))
    }

    async fn authenticate_session(&self, request: Request<AuthenticateSessionRequest>) -> Reply<Session> {
        reply(self.store.session(&request.into_inner().token_hash, self.settings.sessions).await)
    }

    async fn end_session(&self, request: Request<EndSessionRequest>) -> Reply<EndSessionResponse> {
        let request = request.into_inner();
        let session = self.store.session(&request.token_hash, self.settings.sessions).await.ok();
        let ended = self.store.end_session(&request.token_hash).await?;
        if let Some((_, team_id)) = &ended {
            self.sessions_changed(team_id).await;
        }
        let ended = ended.is_some();
        if let Some(user) = session.as_ref().and_then(|s| s.user.as_ref()).filter(|_| ended) {
            self.audit(
                &user.team_id,
                AuditAction::AuthSignedOut,
                user_actor(user),
                &user.email,
                request.client.as_ref(),
            )
            .await;
        }
        reply(Ok(EndSessionResponse { ended }))
    }

    async fn change_password(&self, request: Request<ChangePasswordRequest>) -> Reply<SignedIn> {
        let request = request.into_inner();
        let session = self.store.session(&request.token_hash, self.settings.sessions).await?;
        let user = session.user.unwrap_or_default();
        let current = self.store.password_hash(&user.id).await?;
        if !passwords::verify(current, &request.current_password).await? {
            let client = request.client.as_ref();
            self.audit(&user.team_id, AuditAction::AuthPasswordChangeFailed, user_actor(&user), &user.email, client)
                .await;
            return Err(ServiceError::invalid_field("currentPassword", "is not the current password").into());
        }
        check_password("newPassword", &request.new_password, &[&user.email, &user.first_name, &user.last_name])?;
        let hash = passwords::hash(&request.new_password).await?;
        let client = request.client.unwrap_or_default();
        // The password alone proves no more than the password: for a person with a second
        // factor, a stolen cookie and a known password must not become a recent sign-in that
        // could then remove the factor. The new session keeps the old one's proof.
        let proven_at = if self.store.has_second_factor(&user.id).await? {
            self.store.session_proven_at(&session.id).await?
        } else {
            Some(switchboard_kit::time::now_ms())
        };
        let sessions = self.settings.sessions;
        let mut signed_in = self.store.set_password(&user.id, &hash, &client, sessions, proven_at).await?;
        // A passkey signs in without the password: the person sees which still do.
        signed_in.passkeys = self.store.passkey_infos(&user.id).await?;
        self.signed_in_changed(&signed_in).await;
        self.audit_signed_in(AuditAction::AuthPasswordChanged, &signed_in, Some(&client)).await;
        reply(Ok(signed_in))
    }

    async fn list_sessions(&self, request: Request<ListSessionsRequest>) -> Reply<ListSessionsResponse> {
        let token_hash = request.into_inner().token_hash;
        let sessions = self.store.user_sessions(&token_hash, self.settings.sessions).await?;
        reply(Ok(ListSessionsResponse { sessions }))
    }

    async fn end_user_sessions(&self, request: Request<EndUserSessionsRequest>) -> Reply<EndUserSessionsResponse> {
        let request = request.into_inner();
        let one = Some(request.session_id.as_str()).filter(|id| !id.is_empty());
        let (caller, ended) = self.store.end_user_sessions(&request.token_hash, one, self.settings.sessions).await?;
        if let Some(user) = caller.user.as_ref().filter(|_| ended > 0) {
            self.sessions_changed(&user.team_id).await;
            let action =
                if one.is_some() { AuditAction::AuthSessionEnded } else { AuditAction::AuthSignedOutElsewhere };
            self.audit(&user.team_id, action, user_actor(user), &user.email, request.client.as_ref()).await;
        }
        reply(Ok(EndUserSessionsResponse { ended }))
    }

    async fn create_invitation(&self, request: Request<CreateInvitationRequest>) -> Reply<Invitation> {
        let request = request.into_inner();
        let role = if request.role.is_empty() { Role::Member.as_str() } else { request.role.as_str() };
        if is_owner(role) && !is_owner(&request.caller_role) {
            return Err(ServiceError::forbidden("Only an owner can invite an owner").into());
        }
        let created_by = request.created_by.as_ref();
        let mut invitation = self
            .store
            .invite(&request.team_id, &request.email, role, created_by, self.settings.invite_valid_ms)
            .await?;
        if let Some(mailer) = self.mailer.as_ref().filter(|_| !request.link_base.is_empty()) {
            let team = self.store.team(&request.team_id).await?;
            let url = switchboard_kit::links::invite_url(&request.link_base, &invitation.token);
            mailer.send_later(mail::invitation(&invitation.email, &team.name, &url));
            invitation.mailed = true;
        }
        reply(Ok(invitation))
    }

    async fn accept_invitation(&self, request: Request<AcceptInvitationRequest>) -> Reply<SignedIn> {
        let request = request.into_inner();
        let email = self.store.check_link(LinkKind::Invite, &request.token).await?;
        check_password("password", &request.password, &[&email, &request.first_name, &request.last_name])?;
        let hash = passwords::hash(&request.password).await?;
        let client = request.client.unwrap_or_default();
        let names = Names { first_name: &request.first_name, last_name: &request.last_name };
        let signed_in =
            self.store.accept_invitation(&request.token, names, &hash, &client, self.settings.sessions).await?;
        self.audit_signed_in(AuditAction::MemberJoined, &signed_in, Some(&client)).await;
        reply(Ok(signed_in))
    }

    async fn create_reset_link(&self, request: Request<CreateResetLinkRequest>) -> Reply<Invitation> {
        reply(self.store.reset_link(&request.into_inner().email, self.settings.reset_valid_ms).await)
    }

    async fn reset_password(&self, request: Request<ResetPasswordRequest>) -> Reply<SignedIn> {
        let request = request.into_inner();
        let email = self.store.check_link(LinkKind::Reset, &request.token).await?;
        check_password("password", &request.password, &[&email])?;
        let hash = passwords::hash(&request.password).await?;
        let client = request.client.unwrap_or_default();
        let user = self.store.reset_password(&request.token, &hash).await?;
        // Every session of the person ended with the reset.
        self.sessions_changed(&user.team_id).await;
        self.audit(&user.team_id, AuditAction::AuthPasswordReset, user_actor(&user), &user.email, Some(&client)).await;
        // Whoever reads the mailbox has not passed the person's second factor: a reset ends as a
        // sign-in does, with the factor first.
        reply(self.signed_in_or_challenged(&user, &client, Purpose::Reset).await)
    }

    async fn request_password_reset(
        &self,
        request: Request<RequestPasswordResetRequest>,
    ) -> Reply<PasswordResetRequested> {
        let request = request.into_inner();
        validate::all([validate::email("email", request.email.trim())])?;
        // Answered before the address is looked up, and the same for every address: neither the
        // answer nor its time tells who has an account. Only a known one gets a link, by mail.
        let api = self.clone();
        tokio::spawn(async move {
            if let Err(error) = api.mail_reset_link(&request).await {
                tracing::warn!(%error, "a password reset link was not made");
            }
        });
        reply(Ok(PasswordResetRequested {}))
    }

    async fn describe_invitation(&self, request: Request<InvitationTokenRequest>) -> Reply<InvitationPreview> {
        reply(self.store.invitation_preview(&request.into_inner().token).await)
    }

    async fn update_profile(&self, request: Request<UpdateProfileRequest>) -> Reply<User> {
        reply(AccountsApi::update_profile(self, request.into_inner()).await)
    }

    async fn request_email_change(&self, request: Request<RequestEmailChangeRequest>) -> Reply<EmailChangeRequested> {
        reply(AccountsApi::request_email_change(self, request.into_inner()).await)
    }

    async fn confirm_email_change(&self, request: Request<ConfirmEmailChangeRequest>) -> Reply<User> {
        reply(AccountsApi::confirm_email_change(self, request.into_inner()).await)
    }

    async fn list_members(&self, request: Request<ListMembersRequest>) -> Reply<ListMembersResponse> {
        let team_id = request.into_inner().team_id;
        reply(self.store.members(&team_id).await.map(|members| ListMembersResponse { members }))
    }

    async fn update_member(&self, request: Request<UpdateMemberRequest>) -> Reply<Member> {
        let request = request.into_inner();
        let member =
            self.store.set_role(&request.team_id, &request.user_id, &request.role, &request.caller_role).await?;
        self.sessions_changed(&request.team_id).await;
        reply(Ok(member))
    }

    async fn remove_member(&self, request: Request<RemoveMemberRequest>) -> Reply<RemovedMember> {
        let request = request.into_inner();
        let removed = self
            .store
            .remove_member(&request.team_id, &request.user_id, &request.caller_role, request.revoke_keys)
            .await?;
        // Also what makes every gateway look the team's keys up again (revoked ones refused).
        self.sessions_changed(&request.team_id).await;
        reply(Ok(removed))
    }

    async fn list_invitations(&self, request: Request<ListInvitationsRequest>) -> Reply<ListInvitationsResponse> {
        let team_id = request.into_inner().team_id;
        reply(self.store.pending_invitations(&team_id).await.map(|invitations| ListInvitationsResponse { invitations }))
    }

    async fn revoke_invitation(&self, request: Request<RevokeInvitationRequest>) -> Reply<Invitation> {
        let request = request.into_inner();
        reply(self.store.revoke_invitation(&request.team_id, &request.invitation_id, &request.caller_role).await)
    }

    async fn record_audit(&self, request: Request<AuditEntry>) -> Reply<AuditEntry> {
        let entry = request.into_inner();
        if entry.action.is_empty() {
            return Err(ServiceError::invalid_field("action", "is required").into());
        }
        reply(self.store.record_audit(entry).await)
    }

    async fn list_audit_log(&self, request: Request<ListAuditLogRequest>) -> Reply<ListAuditLogResponse> {
        let request = request.into_inner();
        let page = request.page.unwrap_or_default();
        reply(
            self.store
                .audit_log(&request.team_id, &request.action, &page)
                .await
                .map(|(entries, page)| ListAuditLogResponse { entries, page: Some(page) }),
        )
    }
}
