//! What a handler receives: the authenticated, scoped request.

use std::sync::Arc;

use switchboard_proto::v1::Team;

use crate::config::UrlKey;
use crate::origin::Client;
use crate::principal::Principal;
use crate::services::Services;
use crate::sessions::Gate;

pub struct Call {
    pub services: Arc<Services>,
    pub principal: Arc<Principal>,
    /// The team the request acts on: the key's own, or a client subteam chosen by `teamId`.
    pub team: Arc<Team>,
    pub max_upload_bytes: usize,
    /// Scheme and host of links in answers: the configured public URL, never a client's header.
    pub public_base: String,
    /// Signs the links to recordings.
    pub url_key: UrlKey,
    /// The version of the team acted on (`switchboard_kit::team_versions`), read with this
    /// request's rate-limit token: only when Redis decided and the team is the key's own
    /// (whose bucket it is).
    pub team_version: Option<i64>,
    pub client: Client,
    /// The session cookie's token, when the request carries one (sign-out ends it).
    pub session_token: Option<String>,
    /// The single sign-on binding cookie, on `/v1/auth/sso/*`.
    pub sso_binding: Option<String>,
    pub gate: Gate,
}

impl Call {
    pub fn team_id(&self) -> &str {
        &self.team.id
    }
}
