//! What a handler receives (the authenticated, scoped request) and what it returns.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use parking_lot::Mutex;
use serde_json::Value;
use switchboard_api::identity::Me;
use switchboard_kit::ServiceError;
use switchboard_proto::v1::{Actor, ApiKey, Identity, KeyAccess, Session, Team};

use crate::endpoint::errors::{Code, ErrorBody, FieldError};
use crate::endpoint::{Data, Rendered};
use crate::services::Services;

/// Who is behind a request, and their own team.
#[derive(Debug)]
pub struct Principal {
    /// Shared with the calls it makes: a request acting on the key's own team clones no team.
    pub team: Arc<Team>,
    pub credential: Credential,
    /// For a session: the version of its team (`switchboard_kit::team_versions`) under which it
    /// was last found live, [`UNSEEN`] before a request read one. The identity service gives
    /// the team a new version when a session of it ends or changes, so that every gateway
    /// looks the session up again on its next request.
    pub seen_version: AtomicI64,
    /// The `/me` answer last rendered for this principal.
    pub me: KeptMe,
}

pub const UNSEEN: i64 = i64::MIN;

impl Principal {
    pub fn new(team: Team, credential: Credential) -> Self {
        Self { team: Arc::new(team), credential, seen_version: AtomicI64::new(UNSEEN), me: KeptMe::default() }
    }
}

/// A `/me` answer and the identity it was rendered from. The answer depends only on that
/// identity and on the principal (its key or session user), so while the identity service's
/// cache hands out the very same identity, the bytes are the same: rendering them again is
/// what most of `/me`'s time went to.
#[derive(Default)]
pub struct KeptMe(Mutex<Option<(Arc<Identity>, MeAnswer)>>);

type MeAnswer = Rendered<Data<Me>>;

impl KeptMe {
    /// The answer rendered from `identity`, if that is the one kept.
    pub fn get(&self, identity: &Arc<Identity>) -> Option<MeAnswer> {
        let kept = self.0.lock();
        kept.as_ref().filter(|(from, _)| Arc::ptr_eq(from, identity)).map(|(_, answer)| answer.clone())
    }

    pub fn keep(&self, identity: Arc<Identity>, answer: MeAnswer) {
        *self.0.lock() = Some((identity, answer));
    }
}

impl std::fmt::Debug for KeptMe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptMe").finish_non_exhaustive()
    }
}

/// How a request proved who it is.
#[derive(Debug)]
pub enum Credential {
    /// `X-API-Key`.
    Key(ApiKey),
    /// The session cookie of a signed-in person.
    Session(Session),
    /// Nothing: the operations that come before signing in (`/v1/auth/sign-in`, ...).
    Visitor,
}

/// What a principal may do in its team: a role, or an API key's access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Owner,
    Admin,
    Member,
    Viewer,
    FullKey,
    ReadOnlyKey,
    Visitor,
}

impl Standing {
    /// May change data.
    pub fn writes(self) -> bool {
        !matches!(self, Standing::Viewer | Standing::ReadOnlyKey | Standing::Visitor)
    }

    /// May manage the team: keys, members, webhooks, the audit log.
    pub fn administers(self) -> bool {
        matches!(self, Standing::Owner | Standing::Admin | Standing::FullKey | Standing::ReadOnlyKey)
    }

    /// The role the identity service is told the caller has ("key" for an API key).
    pub fn caller_role(self) -> &'static str {
        match self {
            Standing::Owner => "owner",
            Standing::Admin => "admin",
            Standing::Member => "member",
            Standing::Viewer => "viewer",
            Standing::FullKey | Standing::ReadOnlyKey => "key",
            Standing::Visitor => "",
        }
    }
}

impl Principal {
    /// The calling key, when the request carries one.
    pub fn key(&self) -> Option<&ApiKey> {
        match &self.credential {
            Credential::Key(key) => Some(key),
            _ => None,
        }
    }

    pub fn session(&self) -> Option<&Session> {
        match &self.credential {
            Credential::Session(session) => Some(session),
            _ => None,
        }
    }

    pub fn standing(&self) -> Standing {
        match &self.credential {
            Credential::Key(key) if key.access() == KeyAccess::ReadOnly => Standing::ReadOnlyKey,
            Credential::Key(_) => Standing::FullKey,
            Credential::Session(session) => match session.user.as_ref().map_or("", |user| user.role.as_str()) {
                "owner" => Standing::Owner,
                "admin" => Standing::Admin,
                "member" => Standing::Member,
                _ => Standing::Viewer,
            },
            Credential::Visitor => Standing::Visitor,
        }
    }

    /// Who the caller is within its team, for what is kept per caller (idempotency keys): the
    /// key's id, or the signed-in person's.
    pub fn caller_id(&self) -> String {
        match &self.credential {
            Credential::Key(key) => format!("key:{}", key.id),
            Credential::Session(session) => format!("user:{}", session.user.as_ref().map_or("", |user| &user.id)),
            Credential::Visitor => "visitor".to_owned(),
        }
    }

    /// Who the audit log and `createdBy` say did it.
    pub fn actor(&self) -> Actor {
        match &self.credential {
            Credential::Key(key) => Actor { r#type: "key".to_owned(), id: key.id.clone(), name: key.name.clone() },
            Credential::Session(session) => {
                let user = session.user.clone().unwrap_or_default();
                let name = format!("{} {}", user.first_name, user.last_name).trim().to_owned();
                Actor { r#type: "user".to_owned(), id: user.id, name }
            }
            Credential::Visitor => Actor { r#type: "visitor".to_owned(), ..Actor::default() },
        }
    }
}

/// Where a request came from: the client's address and `User-Agent` (`crate::origin`), and
/// whether it reached the platform over https (cookies are then `Secure`).
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub ip: String,
    pub user_agent: String,
    pub https: bool,
}

impl From<&Client> for switchboard_proto::v1::Client {
    fn from(client: &Client) -> Self {
        Self { ip: client.ip.clone(), user_agent: client.user_agent.clone() }
    }
}

pub struct Call {
    pub services: Arc<Services>,
    pub principal: Arc<Principal>,
    /// The team the request acts on: the key's own, or a client subteam chosen by `teamId`.
    pub team: Arc<Team>,
    pub max_upload_bytes: usize,
    /// Scheme and host of links in answers: the configured public URL, never a client's header.
    pub public_base: String,
    /// Signs the links to recordings.
    pub url_key: crate::playback::UrlKey,
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

/// What the gateway keeps across requests that the sign-in operations need.
#[derive(Clone)]
pub struct Gate {
    pub sessions: Arc<crate::sessions::SessionAuthenticator>,
    pub throttle: Arc<crate::throttle::SignInThrottle>,
}

impl Call {
    pub fn team_id(&self) -> &str {
        &self.team.id
    }
}

/// A body sent as it is read, e.g. a recording.
pub type BodyStream = futures::stream::BoxStream<'static, Result<bytes::Bytes, ServiceError>>;

pub struct Streamed {
    pub content_type: String,
    pub length: u64,
    pub body: BodyStream,
}

/// An answer: status, body and any headers beyond the ones every response gets.
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub headers: Vec<(Cow<'static, str>, String)>,
    /// Bytes sent as they are, with their content type, instead of `body`.
    pub raw: Option<(Cow<'static, str>, bytes::Bytes)>,
    /// A body sent as it is read, instead of `body`.
    pub streamed: Option<Streamed>,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reply").field("status", &self.status).field("body", &self.body).finish_non_exhaustive()
    }
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Self {
        Self { status, body, headers: Vec::new(), raw: None, streamed: None }
    }

    /// `length` bytes of `content_type`, sent as `body` yields them.
    pub fn stream(status: u16, content_type: String, length: u64, body: BodyStream) -> Self {
        Self { streamed: Some(Streamed { content_type, length, body }), ..Self::json(status, Value::Null) }
    }

    /// A status without a body, e.g. 202 for an MCP notification.
    pub fn empty(status: u16) -> Self {
        Self::raw(status, "application/json", bytes::Bytes::new())
    }

    /// Bytes sent as they are, with their content type.
    pub fn raw(status: u16, content_type: impl Into<Cow<'static, str>>, bytes: bytes::Bytes) -> Self {
        Self { raw: Some((content_type.into(), bytes)), ..Self::json(status, Value::Null) }
    }

    /// The JSON body, whether built as a value or already serialized (`None` for other
    /// content, such as a recording).
    pub fn json_body(self) -> Option<Value> {
        if self.streamed.is_some() {
            return None;
        }
        match self.raw {
            None => Some(self.body),
            Some((content_type, bytes)) if content_type.starts_with("application/json") => {
                serde_json::from_slice(&bytes).ok()
            }
            Some(_) => None,
        }
    }

    /// A document that is not built per request: the OpenAPI description, the skill file.
    pub fn document(content_type: &'static str, bytes: bytes::Bytes) -> Self {
        Self::raw(200, content_type, bytes).with_header("Cache-Control", "public, max-age=300".to_owned())
    }

    pub fn with_header(mut self, name: impl Into<Cow<'static, str>>, value: String) -> Self {
        self.headers.push((name.into(), value));
        self
    }

    /// The public error envelope: `{error, code, hint?, details?}`, and when a per-resource
    /// rule allows the action again later, `retryAfter`, `resetAt` and `nextAvailableAt`.
    pub fn error(error: &ServiceError) -> Self {
        if let Some(source) = &error.source {
            tracing::error!(error = format!("{source:#}"), "internal error");
        }
        let details = (!error.details.is_empty()).then(|| error.details.iter().map(FieldError::from).collect());
        let retry = error.retry_at_ms.map(|retry_at_ms| {
            let seconds = ((retry_at_ms - switchboard_kit::time::now_ms()).max(0) + 999) / 1000;
            (seconds, switchboard_kit::time::iso_ms(retry_at_ms))
        });
        let body = ErrorBody {
            error: error.message.clone(),
            code: Code(error.kind.code()),
            hint: error.hint.clone(),
            details,
            retry_after: retry.as_ref().map(|(seconds, _)| *seconds),
            // `resetAt` as on every 429; `nextAvailableAt` is the spec's name for this one.
            reset_at: retry.as_ref().map(|(_, at)| at.clone()),
            next_available_at: retry.as_ref().map(|(_, at)| at.clone()),
        };
        let reply = Self::json(error.kind.http_status(), serde_json::to_value(&body).unwrap_or(Value::Null));
        match retry {
            Some((seconds, _)) => reply.with_header("Retry-After", seconds.to_string()),
            None => reply,
        }
    }
}

pub type HandlerResult = Result<Reply, ServiceError>;

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(identity: &Identity) -> Rendered<Data<Me>> {
        Rendered::new(&Data::new(Me::new(identity, None, None))).unwrap()
    }

    fn bytes(answer: Rendered<Data<Me>>) -> bytes::Bytes {
        use crate::endpoint::Answer;
        answer.into_reply().raw.expect("a rendered answer is sent as bytes").1
    }

    #[test]
    fn a_kept_me_answer_is_sent_only_for_the_identity_it_was_rendered_from() {
        let kept = KeptMe::default();
        let team = Team { id: "t1".into(), name: "First".into(), ..Default::default() };
        let identity = Arc::new(Identity { team: Some(team), credit_balance: 5, ..Default::default() });
        assert!(kept.get(&identity).is_none(), "nothing kept yet");

        kept.keep(identity.clone(), rendered(&identity));
        let sent = kept.get(&identity).expect("kept for the same identity");
        assert_eq!(bytes(sent), bytes(rendered(&identity)));

        let read_again = Arc::new(Identity { credit_balance: 4, ..(*identity).clone() });
        assert!(kept.get(&read_again).is_none(), "another identity, even of the same team, is rendered again");
        kept.keep(read_again.clone(), rendered(&read_again));
        let sent = bytes(kept.get(&read_again).expect("the newer one is kept"));
        assert!(String::from_utf8_lossy(&sent).contains(r#""balance":4"#), "{sent:?}");
        assert!(kept.get(&identity).is_none(), "the older one is no longer kept");
    }
}
