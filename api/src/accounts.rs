//! People who sign in: sessions, members, invitations and the audit log (`/auth`, `/members`,
//! `/audit-log`).

use crate::role::Role;
use schemars::JsonSchema;
use serde::Serialize;
use switchboard_proto::v1 as proto;

use crate::api_keys::{ActorView, TeamApiKey};
use crate::id::Id;
use crate::identity::User;
use crate::time::Timestamp;

/// What a visitor may do before signing in.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct AuthOptions {
    /// `open`: anyone may make a team with `POST /v1/auth/sign-up`; `closed`: only by invitation.
    #[schemars(extend("enum" = ["open", "closed"]))]
    pub sign_up: &'static str,
}

/// A team a signed-in person may act on.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SessionTeam {
    pub id: Id,
    pub name: String,
    /// An agency reaches its client subteams with `teamId`, as with keys.
    pub owns_agency: bool,
}

impl From<&proto::Team> for SessionTeam {
    fn from(team: &proto::Team) -> Self {
        Self { id: Id::stored(team.id.clone()), name: team.name.clone(), owns_agency: team.owns_agency }
    }
}

/// A signed-in session: who, in which team, with what role.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SessionView {
    pub user: User,
    pub team: SessionTeam,
    pub role: Role,
    /// The teams the session may act on: its own (an agency's subteams are reached with `teamId`).
    pub teams: Vec<SessionTeam>,
    /// Send it as `X-CSRF-Token` with every POST, PUT, PATCH and DELETE made with the cookie.
    pub csrf_token: String,
    /// The session ends then at the latest (and after 12 hours without a request).
    pub expires_at: Timestamp,
    /// The team requires a second factor and this person has none yet: until they set one up
    /// (`/v1/auth/second-factors`), only `/v1/auth/*` answers; everything else is 403.
    pub second_factor_needed: bool,
    /// Until then the person's second factors, password, e-mail and sessions may change; after
    /// it such a change answers 403 `REAUTHENTICATION_REQUIRED` until they confirm it is them
    /// (`POST /v1/auth/reauthenticate`). A sign-in counts as such a proof.
    pub reauthenticate_after: Timestamp,
    /// Only in the answer of a password reset or change: the passkeys that still sign in as
    /// this person without a password. One they do not know should go
    /// (`DELETE /v1/auth/second-factors/passkeys/{passkeyId}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passkeys: Option<Vec<PasskeyView>>,
}

impl SessionView {
    pub fn new(session: &proto::Session, csrf_token: String) -> Self {
        let user = session.user.clone().unwrap_or_default();
        let team = session.team.clone().unwrap_or_default();
        Self {
            role: Role::of_stored(&user.role),
            user: User::from(&user),
            teams: vec![SessionTeam::from(&team)],
            team: SessionTeam::from(&team),
            csrf_token,
            expires_at: Timestamp::from_ms(session.expires_at_ms),
            second_factor_needed: session.second_factor_needed,
            reauthenticate_after: Timestamp::from_ms(session.reauthenticate_after_ms),
            passkeys: None,
        }
    }

    /// With the passkeys that still sign in, after a password reset or change.
    pub fn with_passkeys(mut self, passkeys: &[proto::PasskeyInfo]) -> Self {
        self.passkeys = Some(passkeys.iter().map(PasskeyView::from).collect());
        self
    }
}

/// A sign-in that passed the password and waits for a second factor: send `challenge` with a
/// code to `POST /v1/auth/sign-in/verify` before `expiresAt`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SecondFactorChallengeView {
    /// A secret of this sign-in; at most 5 codes are tried with it.
    pub challenge: String,
    /// What the person may use: `totp` (an authenticator app's 6 digits), `passkey`
    /// (POST /v1/auth/sign-in/passkey-options), `recovery_code`.
    pub methods: Vec<String>,
    pub expires_at: Timestamp,
}

impl From<&proto::SecondFactorChallenge> for SecondFactorChallengeView {
    fn from(challenge: &proto::SecondFactorChallenge) -> Self {
        Self {
            challenge: challenge.token.clone(),
            methods: challenge.methods.clone(),
            expires_at: Timestamp::from_ms(challenge.expires_at_ms),
        }
    }
}

/// The signed-in person's second factors.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SecondFactorsView {
    /// An authenticator app (TOTP) is set up.
    pub totp: bool,
    pub totp_enabled_at: Option<Timestamp>,
    /// Unused recovery codes.
    pub recovery_codes_left: i32,
    /// The team requires a second factor.
    pub required: bool,
    pub passkeys: Vec<PasskeyView>,
    /// The person has a password (one who signs in only through single sign-on has none).
    pub has_password: bool,
}

impl From<&proto::SecondFactors> for SecondFactorsView {
    fn from(factors: &proto::SecondFactors) -> Self {
        Self {
            totp: factors.totp,
            totp_enabled_at: Timestamp::option(factors.totp_confirmed_at_ms),
            recovery_codes_left: factors.recovery_codes_left,
            required: factors.required,
            passkeys: factors.passkeys.iter().map(PasskeyView::from).collect(),
            has_password: factors.password,
        }
    }
}

/// One of the signed-in person's passkeys.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct PasskeyView {
    pub id: Id,
    pub name: String,
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
}

impl From<&proto::PasskeyInfo> for PasskeyView {
    fn from(info: &proto::PasskeyInfo) -> Self {
        Self {
            id: Id::stored(info.id.clone()),
            name: info.name.clone(),
            created_at: Timestamp::from_ms(info.created_at_ms),
            last_used_at: Timestamp::option(info.last_used_at_ms),
        }
    }
}

/// An authenticator app being set up: not used until a code from it is confirmed.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct TotpEnrolmentView {
    /// The secret in base32, for typing into the app.
    pub secret: String,
    /// The `otpauth://` URI the QR code holds.
    pub uri: String,
    /// The URI as a QR code: an SVG image as a `data:` URL.
    pub qr_code: String,
}

/// Recovery codes: each signs in once instead of a code of the app. Shown this once.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct RecoveryCodesView {
    pub codes: Vec<String>,
}

/// The team's sign-in requirements.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SecurityPolicyView {
    /// Every person of the team needs a second factor: without one, a session may only set one up.
    pub require_second_factor: bool,
}

/// One of the signed-in person's own sessions.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SessionItem {
    pub id: Id,
    /// The browser and system, as its user agent names them, e.g. `Chrome on Linux`.
    pub device: String,
    pub ip: String,
    pub user_agent: String,
    pub created_at: Timestamp,
    /// To the minute.
    pub last_seen_at: Timestamp,
    pub expires_at: Timestamp,
    /// The session of this request.
    pub current: bool,
}

impl From<&proto::SessionInfo> for SessionItem {
    fn from(session: &proto::SessionInfo) -> Self {
        Self {
            id: Id::stored(session.id.clone()),
            device: device_of(&session.user_agent),
            ip: session.ip.clone(),
            user_agent: session.user_agent.clone(),
            created_at: Timestamp::from_ms(session.created_at_ms),
            last_seen_at: Timestamp::from_ms(session.last_seen_at_ms),
            expires_at: Timestamp::from_ms(session.expires_at_ms),
            current: session.current,
        }
    }
}

/// A short name of the browser and system a user agent names; good enough to tell one's own
/// devices apart, not a fingerprint.
pub fn device_of(user_agent: &str) -> String {
    // Order matters: Edge and Opera say Chrome too, Chrome says Safari.
    const BROWSERS: [(&str, &str); 7] = [
        ("Edg/", "Edge"),
        ("OPR/", "Opera"),
        ("Firefox/", "Firefox"),
        ("HeadlessChrome/", "Chrome (headless)"),
        ("Chrome/", "Chrome"),
        ("Safari/", "Safari"),
        ("curl/", "curl"),
    ];
    const SYSTEMS: [(&str, &str); 7] = [
        ("iPhone", "iPhone"),
        ("iPad", "iPad"),
        ("Android", "Android"),
        ("Windows", "Windows"),
        ("Mac OS X", "macOS"),
        ("CrOS", "ChromeOS"),
        ("Linux", "Linux"),
    ];
    let found = |table: &[(&str, &'static str)]| {
        table.iter().find(|(mark, _)| user_agent.contains(mark)).map(|(_, name)| *name)
    };
    match (found(&BROWSERS), found(&SYSTEMS)) {
        (Some(browser), Some(system)) => format!("{browser} on {system}"),
        (Some(browser), None) => browser.to_owned(),
        (None, Some(system)) => system.to_owned(),
        (None, None) if user_agent.is_empty() => "Unknown device".to_owned(),
        (None, None) => user_agent.split('/').next().unwrap_or(user_agent).chars().take(40).collect(),
    }
}

/// How many sessions a request ended.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SessionsEnded {
    pub ended: i32,
}

/// The answer to signing out.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct SignedOut {
    /// False when there was no live session to end (signing out twice is harmless).
    pub signed_out: bool,
}

/// A member of the team: a user with their role and sign-in state.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct MemberView {
    pub id: Id,
    pub first_name: String,
    pub last_name: String,
    pub email: String,
    pub role: Role,
    pub created_at: Timestamp,
    /// Has set a password: can sign in to the portal.
    pub can_sign_in: bool,
    pub last_sign_in_at: Option<Timestamp>,
}

impl From<&proto::Member> for MemberView {
    fn from(member: &proto::Member) -> Self {
        let user = member.user.clone().unwrap_or_default();
        Self {
            id: Id::stored(user.id),
            first_name: user.first_name,
            last_name: user.last_name,
            email: user.email,
            role: Role::of_stored(&user.role),
            created_at: Timestamp::from_ms(user.created_at_ms),
            can_sign_in: member.can_sign_in,
            last_sign_in_at: Timestamp::option(member.last_sign_in_at_ms),
        }
    }
}

/// A single-use invitation link, shown once to whoever made it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct InvitationView {
    pub id: Id,
    pub email: String,
    pub role: Role,
    /// The portal page that accepts it (`/invite/{token}`); valid once, for 7 days.
    pub url: String,
    /// The last segment of `url`: what `POST /v1/auth/accept-invite` and
    /// `GET /v1/auth/invitations/{token}` take. Shown once, as `url` is.
    pub token: String,
    pub expires_at: Timestamp,
    /// Whether the platform e-mailed the link to `email` (it does when it has SMTP); when
    /// false, send `url` yourself.
    pub mailed: bool,
}

impl InvitationView {
    pub fn new(invitation: &proto::Invitation, public_base: &str) -> Self {
        Self {
            id: Id::stored(invitation.id.clone()),
            email: invitation.email.clone(),
            role: Role::of_stored(&invitation.role),
            url: invite_url(public_base, &invitation.token),
            token: invitation.token.clone(),
            expires_at: Timestamp::from_ms(invitation.expires_at_ms),
            mailed: invitation.mailed,
        }
    }
}

/// An invitation that can still be accepted. Its link was shown once, to whoever made it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct PendingInvitationView {
    pub id: Id,
    pub email: String,
    pub role: Role,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    /// Who made it: a key or a person; null for an operator's (`switchboard admin invite`) and a
    /// subteam's first owner's.
    pub created_by: Option<ActorView>,
}

impl From<&proto::Invitation> for PendingInvitationView {
    fn from(invitation: &proto::Invitation) -> Self {
        Self {
            id: Id::stored(invitation.id.clone()),
            email: invitation.email.clone(),
            role: Role::of_stored(&invitation.role),
            created_at: Timestamp::from_ms(invitation.created_at_ms),
            expires_at: Timestamp::from_ms(invitation.expires_at_ms),
            created_by: invitation.created_by.as_ref().map(ActorView::from),
        }
    }
}

/// A member just removed, and what the removal ended or left.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct RemovedMemberView {
    pub id: Id,
    pub first_name: String,
    pub last_name: String,
    pub email: String,
    pub role: Role,
    pub created_at: Timestamp,
    pub can_sign_in: bool,
    pub last_sign_in_at: Option<Timestamp>,
    /// The pending invitations the member had made: they no longer let anyone in.
    pub invitations_ended: i32,
    /// The API keys the member made that were active: still working unless `apiKeysRevoked`
    /// (ask with `?revokeKeys=true`, or revoke them one by one).
    pub api_keys: Vec<TeamApiKey>,
    pub api_keys_revoked: bool,
}

impl From<&proto::RemovedMember> for RemovedMemberView {
    fn from(removed: &proto::RemovedMember) -> Self {
        let member = MemberView::from(&removed.member.clone().unwrap_or_default());
        Self {
            id: member.id,
            first_name: member.first_name,
            last_name: member.last_name,
            email: member.email,
            role: member.role,
            created_at: member.created_at,
            can_sign_in: member.can_sign_in,
            last_sign_in_at: member.last_sign_in_at,
            invitations_ended: removed.invitations_ended,
            api_keys: removed.keys.iter().map(TeamApiKey::from).collect(),
            api_keys_revoked: removed.keys_revoked,
        }
    }
}

pub use switchboard_kit::links::{invite_url, reset_url};

/// Something done to the team, by whom, when and from where.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct AuditEntryView {
    pub id: Id,
    /// What was done: one of the `AuditAction` values.
    #[schemars(with = "switchboard_kit::vocabulary::AuditAction")]
    pub action: String,
    pub actor: ActorView,
    /// What it was done to: an id, or an e-mail address.
    pub target: String,
    /// The target as the portal names it (a name, a URL, a question), as it was at the time;
    /// empty when it has none.
    pub target_name: String,
    /// The fields the write set, by name; never their values. Empty for an action that sets
    /// none (a delete, a sign-in).
    pub changes: Vec<String>,
    pub ip: String,
    pub user_agent: String,
    /// The browser and system the user agent names, e.g. "Chrome on macOS", or the client
    /// library, e.g. "curl".
    pub device: String,
    pub created_at: Timestamp,
}

impl From<&proto::AuditEntry> for AuditEntryView {
    fn from(entry: &proto::AuditEntry) -> Self {
        Self {
            id: Id::stored(entry.id.clone()),
            action: entry.action.clone(),
            actor: ActorView::from(&entry.actor.clone().unwrap_or_default()),
            target: entry.target.clone(),
            target_name: entry.target_name.clone(),
            changes: entry.changes.clone(),
            ip: entry.ip.clone(),
            user_agent: entry.user_agent.clone(),
            device: device_of(&entry.user_agent),
            created_at: Timestamp::from_ms(entry.created_at_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::device_of;

    #[test]
    fn devices_are_named_by_browser_and_system() {
        let chrome =
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0 Safari/537.36";
        assert_eq!(device_of(chrome), "Chrome on Linux");
        let safari =
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Version/17.0 Safari/604.1";
        assert_eq!(device_of(safari), "Safari on iPhone");
        let edge = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120.0 Safari/537.36 Edg/120.0";
        assert_eq!(device_of(edge), "Edge on Windows");
        assert_eq!(device_of("curl/8.4.0"), "curl");
        assert_eq!(device_of("reqwest/0.12"), "reqwest");
        assert_eq!(device_of(""), "Unknown device");
    }
}

/// What an invitation's page shows before it is accepted (`GET /v1/auth/invitations/{token}`).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct InvitationPreviewView {
    /// The team it joins.
    pub team: InvitedTeam,
    /// The address invited: the account it makes signs in with it.
    pub email: String,
    pub role: Role,
    pub expires_at: Timestamp,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct InvitedTeam {
    pub id: Id,
    pub name: String,
}

impl From<&proto::InvitationPreview> for InvitationPreviewView {
    fn from(preview: &proto::InvitationPreview) -> Self {
        Self {
            team: InvitedTeam { id: Id::stored(preview.team_id.clone()), name: preview.team_name.clone() },
            email: preview.email.clone(),
            role: Role::of_stored(&preview.role),
            expires_at: Timestamp::from_ms(preview.expires_at_ms),
        }
    }
}

/// A password reset asked for: the same whether or not an account uses the address.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct ResetRequestedView {
    /// The address as given.
    pub email: String,
}

/// A new e-mail address waiting for its confirmation link (`POST /v1/me/email`).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct EmailChangeView {
    /// The new address, lower-case: the link was sent there. The address signed in with stays
    /// the old one until the link is opened.
    pub email: String,
    /// When the link stops working.
    pub expires_at: Timestamp,
    /// False when the platform has no SMTP server: nothing was sent.
    pub mailed: bool,
}

impl From<&proto::EmailChangeRequested> for EmailChangeView {
    fn from(change: &proto::EmailChangeRequested) -> Self {
        Self {
            email: change.email.clone(),
            expires_at: Timestamp::from_ms(change.expires_at_ms),
            mailed: change.mailed,
        }
    }
}

/// A confirmed e-mail change (`POST /v1/auth/confirm-email`).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct EmailConfirmedView {
    /// The address the person signs in with from now on.
    pub email: String,
}
