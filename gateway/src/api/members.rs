//! `/members` and `/audit-log`: the people of a team, their roles and invitations, and what
//! was done to the team (identity service, `AccountService`). Owners and admins (and full-access
//! keys) manage them; members and viewers do not see them. `GET /v1/users` still lists the
//! same people in the hosted shape.

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::accounts::{
    AuditEntryView, InvitationView, MemberView, PendingInvitationView, RemovedMemberView, SecurityPolicyView,
};
use switchboard_api::paging::{default_limit, first_page};
use switchboard_api::role::Role;
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceResult, limits};
use switchboard_proto::v1::{
    CreateInvitationRequest, ListAuditLogRequest, ListInvitationsRequest, ListMembersRequest, PageRequest,
    RemoveMemberRequest, RevokeInvitationRequest, SecurityPolicyRequest, SetSecurityPolicyRequest, UpdateMemberRequest,
};

use super::groups::MEMBERS;
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::{Created, Data, Endpoint, Id, Input, Json, List, Nothing, Page, Updated};

const MEMBER_GONE: &str = "Member not found (not a user of this team).";
const OWNERS: &str = "Only an owner can make, change or remove an owner; members and viewers manage no one.";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/members", list)
            .doc("listMembers", MEMBERS, "The team's members with their roles and sign-in state")
            .about("Oldest first (not paged). Roles: owner, admin, member, viewer.")
            .lists("userId")
            .for_admins()
            .class(RateClass::Write),
        Endpoint::put("/v1/members/{userId}", update)
            .doc("updateMember", MEMBERS, "Give a member another role")
            .about("The member's sessions see the new role within the gateway's cache time (2 s).")
            .for_admins()
            .audited(AuditAction::MemberRoleChanged)
            .fails(403, OWNERS)
            .fails(404, MEMBER_GONE)
            .fails(409, "The team would have no owner left."),
        Endpoint::delete("/v1/members/{userId}", remove)
            .doc("removeMember", MEMBERS, "Remove a member from the team")
            .about(
                "Their sessions end, and their pending links with them: the invitations they made stop working \
                 (`invitationsEnded`). The API keys they made keep working, since integrations may depend on them: \
                 the answer lists the active ones in `apiKeys`, and `?revokeKeys=true` revokes them in the same \
                 step (`apiKeysRevoked`).",
            )
            .for_admins()
            .audited(AuditAction::MemberRemoved)
            .fails(403, OWNERS)
            .fails(404, MEMBER_GONE)
            .fails(409, "The team would have no owner left."),
        Endpoint::post("/v1/members/invitations", invite)
            .shows_secret_once()
            .gives("token", "/data/token")
            .doc("inviteMember", MEMBERS, "Invite someone into the team: a single-use link, valid 7 days")
            .about(
                "The answer's `url` (the portal's `/invite/{token}`) is shown here once; whoever opens it sets a \
                 name and password (POST /v1/auth/accept-invite) and joins with the role given. The answer is the \
                 same whether or not the address has an account in another team (one address signs in to one \
                 team: accepting such an invitation then answers 409), so that it tells the inviter nothing about \
                 other teams' people.",
            )
            .for_admins()
            .audited(AuditAction::MemberInvited)
            .fails(403, "Only an owner can invite an owner.")
            .fails(409, "This person is a member of the team already."),
        Endpoint::get("/v1/members/invitations", invitations)
            .doc("listInvitations", MEMBERS, "The team's pending invitations, newest first")
            .about(
                "Invitations not yet accepted, revoked or expired (not paged; a team has few). Their links were \
                 shown once, to whoever made them, and are not shown here.",
            )
            .lists("invitationId")
            .for_admins()
            .class(RateClass::Write),
        Endpoint::delete("/v1/members/invitations/{invitationId}", revoke_invitation)
            .doc("revokeInvitation", MEMBERS, "Revoke a pending invitation: its link stops working at once")
            .for_admins()
            .audited(AuditAction::MemberInvitationRevoked)
            .fails(403, "Only an owner can revoke an invitation as owner.")
            .fails(404, "Invitation not found: unknown, used already, revoked or expired."),
        Endpoint::get("/v1/members/security", security)
            .doc("getSecurityPolicy", MEMBERS, "The team's sign-in requirements")
            .for_admins()
            .class(RateClass::Write),
        Endpoint::put("/v1/members/security", set_security)
            .doc("setSecurityPolicy", MEMBERS, "Require a second factor of every person of the team, or not")
            .about(
                "Owners only. Required, a person without a second factor may only set one up and look after \
                 their own sign-in (the `/v1/auth/*` operations: sessions, password, signing out); every other \
                 operation, their profile included, is 403 until then, sessions already begun included. API keys \
                 are not affected. An owner must have a second factor to require one (409).",
            )
            .for_admins()
            .audited(AuditAction::TeamSecurityChanged)
            .fails(403, "Only an owner changes the team's sign-in requirements.")
            .fails(409, "Set up your own second factor before requiring one."),
        Endpoint::get("/v1/audit-log", audit_log)
            .doc("listAuditLog", MEMBERS, "What was done to the team, by whom, when and from where; newest first")
            .about(
                "Kept 90 days. `action` is one of the `AuditAction` schema's values, each with its meaning in \
                 `x-enum-descriptions`. Every write of the team's data is recorded (each operation's \
                 `x-audit-action` names its action), with its target by id and by name (`targetName`, as it was \
                 then) and the fields it set (`changes`, by name only); so are sign-ins, factors and the other \
                 changes to a person's account, by the identity service. A write that failed records nothing.",
            )
            .needs_full_access()
            .for_admins()
            .class(RateClass::Write),
    ]
}

/// A member's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberPath {
    pub user_id: Id,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityPolicyBody {
    pub require_second_factor: bool,
}

/// An invitation's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InvitationPath {
    pub invitation_id: Id,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoveQuery {
    /// Also revoke the API keys the member made that are still active.
    #[serde(default)]
    pub revoke_keys: bool,
}

/// What a member may do: `owner` everything, `admin` everything but owners, `member` the data
/// but not keys, members or webhooks, `viewer` read only.
/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct UpdateMember {
    pub role: Role,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct Invite {
    #[schemars(length(min = limits::EMAIL.min, max = limits::EMAIL.max), extend("pattern" = limits::EMAIL_PATTERN))]
    pub email: String,
    /// `member` when not given.
    pub role: Option<Role>,
}

#[derive(Deserialize, JsonSchema)]
pub struct AuditQuery {
    /// The page, from 1.
    #[serde(default = "first_page")]
    #[schemars(range(min = limits::PAGE.min, max = limits::PAGE.max))]
    pub page: u32,
    /// Entries per page.
    #[serde(default = "default_limit")]
    #[schemars(range(min = limits::PAGE_LIMIT.min, max = limits::PAGE_LIMIT.max))]
    pub limit: u32,
    /// Only entries of this action, e.g. `auth.sign_in_failed`.
    #[schemars(length(min = 1, max = 64))]
    pub action: Option<String>,
}

async fn list(call: Call, _: Input) -> ServiceResult<List<MemberView>> {
    let request = ListMembersRequest { team_id: call.team_id().to_owned() };
    let members = call.services.accounts.clone().list_members(request).await?.into_inner().members;
    Ok(List::new(members.iter().map(MemberView::from).collect()))
}

async fn update(
    call: Call,
    input: Input<MemberPath, Nothing, Json<UpdateMember>>,
) -> ServiceResult<Updated<MemberView>> {
    let Json(body) = input.body;
    let request = UpdateMemberRequest {
        team_id: call.team_id().to_owned(),
        user_id: input.path.user_id.into_string(),
        role: body.role.as_str().to_owned(),
        caller_role: call.principal.standing().caller_role().to_owned(),
        actor: Some(call.principal.actor()),
        client: Some((&call.client).into()),
    };
    let member = call.services.accounts.clone().update_member(request).await?.into_inner();
    Ok(Updated::new(MemberView::from(&member), "Member updated"))
}

async fn remove(call: Call, input: Input<MemberPath, RemoveQuery>) -> ServiceResult<Updated<RemovedMemberView>> {
    let request = RemoveMemberRequest {
        team_id: call.team_id().to_owned(),
        user_id: input.path.user_id.into_string(),
        caller_role: call.principal.standing().caller_role().to_owned(),
        actor: Some(call.principal.actor()),
        client: Some((&call.client).into()),
        revoke_keys: input.query.revoke_keys,
    };
    let removed = call.services.accounts.clone().remove_member(request).await?.into_inner();
    Ok(Updated::new(RemovedMemberView::from(&removed), "Member removed"))
}

async fn invitations(call: Call, _: Input) -> ServiceResult<List<PendingInvitationView>> {
    let request = ListInvitationsRequest { team_id: call.team_id().to_owned() };
    let invitations = call.services.accounts.clone().list_invitations(request).await?.into_inner().invitations;
    Ok(List::new(invitations.iter().map(PendingInvitationView::from).collect()))
}

async fn revoke_invitation(call: Call, input: Input<InvitationPath>) -> ServiceResult<Data<PendingInvitationView>> {
    let request = RevokeInvitationRequest {
        team_id: call.team_id().to_owned(),
        invitation_id: input.path.invitation_id.into_string(),
        caller_role: call.principal.standing().caller_role().to_owned(),
    };
    let revoked = call.services.accounts.clone().revoke_invitation(request).await?.into_inner();
    Ok(Data::new(PendingInvitationView::from(&revoked)))
}

async fn invite(call: Call, input: Input<Nothing, Nothing, Json<Invite>>) -> ServiceResult<Created<InvitationView>> {
    let Json(body) = input.body;
    let request = CreateInvitationRequest {
        team_id: call.team_id().to_owned(),
        email: body.email,
        role: body.role.unwrap_or(Role::Member).as_str().to_owned(),
        created_by: Some(call.principal.actor()),
        caller_role: call.principal.standing().caller_role().to_owned(),
        client: Some((&call.client).into()),
        link_base: call.public_base.clone(),
    };
    let invitation = call.services.accounts.clone().create_invitation(request).await?.into_inner();
    Ok(Created::new(InvitationView::new(&invitation, &call.public_base), "Invitation created; share its url"))
}

async fn audit_log(call: Call, input: Input<Nothing, AuditQuery>) -> ServiceResult<Page<AuditEntryView>> {
    let query = input.query;
    let request = ListAuditLogRequest {
        team_id: call.team_id().to_owned(),
        page: Some(PageRequest { page: query.page, limit: query.limit, ..PageRequest::default() }),
        action: query.action.unwrap_or_default(),
    };
    let answer = call.services.accounts.clone().list_audit_log(request).await?.into_inner();
    Ok(Page {
        data: answer.entries.iter().map(AuditEntryView::from).collect(),
        pagination: answer.page.unwrap_or_default().into(),
    })
}

async fn security(call: Call, _: Input) -> ServiceResult<Data<SecurityPolicyView>> {
    let request = SecurityPolicyRequest { team_id: call.team_id().to_owned() };
    let policy = call.services.accounts.clone().get_security_policy(request).await?.into_inner();
    Ok(Data::new(SecurityPolicyView { require_second_factor: policy.require_second_factor }))
}

async fn set_security(
    call: Call,
    input: Input<Nothing, Nothing, Json<SecurityPolicyBody>>,
) -> ServiceResult<Updated<SecurityPolicyView>> {
    let Json(body) = input.body;
    let request = SetSecurityPolicyRequest {
        team_id: call.team_id().to_owned(),
        require_second_factor: body.require_second_factor,
        caller_role: call.principal.standing().caller_role().to_owned(),
        actor: Some(call.principal.actor()),
        client: Some((&call.client).into()),
    };
    let policy = call.services.accounts.clone().set_security_policy(request).await?.into_inner();
    let view = SecurityPolicyView { require_second_factor: policy.require_second_factor };
    Ok(Updated::new(view, "Sign-in requirements updated"))
}
