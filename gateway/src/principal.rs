//! Who is behind a request: the credential it proved itself with, the team that credential
//! belongs to, and what that lets it do there.

use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use bytes::Bytes;
use parking_lot::Mutex;
use switchboard_api::role::Role;
use switchboard_proto::v1::{Actor, ApiKey, Identity, KeyAccess, Session, Team};

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

/// A `/me` answer (its JSON bytes) and the identity it was rendered from. The answer depends
/// only on that identity and on the principal (its key or session user), so while the identity
/// service's cache hands out the very same identity, the bytes are the same: rendering them
/// again is what most of `/me`'s time went to.
#[derive(Default)]
pub struct KeptMe(Mutex<Option<(Arc<Identity>, Bytes)>>);

impl KeptMe {
    /// The answer rendered from `identity`, if that is the one kept.
    pub fn get(&self, identity: &Arc<Identity>) -> Option<Bytes> {
        let kept = self.0.lock();
        kept.as_ref().filter(|(from, _)| Arc::ptr_eq(from, identity)).map(|(_, answer)| answer.clone())
    }

    pub fn keep(&self, identity: Arc<Identity>, answer: Bytes) {
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

/// What a principal may do in its team: a person's role, or an API key's access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Person(Role),
    FullKey,
    ReadOnlyKey,
    Visitor,
}

impl Standing {
    /// May change data.
    pub fn writes(self) -> bool {
        match self {
            Standing::Person(role) => role.writes(),
            Standing::FullKey => true,
            Standing::ReadOnlyKey | Standing::Visitor => false,
        }
    }

    /// May manage the team: keys, members, webhooks, the audit log.
    pub fn administers(self) -> bool {
        match self {
            Standing::Person(role) => role.manages(),
            Standing::FullKey | Standing::ReadOnlyKey => true,
            Standing::Visitor => false,
        }
    }

    /// The role the identity service is told the caller has ("key" for an API key).
    pub fn caller_role(self) -> &'static str {
        match self {
            Standing::Person(role) => role.as_str(),
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
            Credential::Session(session) => {
                Standing::Person(Role::of_stored(session.user.as_ref().map_or("", |user| user.role.as_str())))
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_me_answer_is_sent_only_for_the_identity_it_was_rendered_from() {
        let kept = KeptMe::default();
        let team = Team { id: "t1".into(), name: "First".into(), ..Default::default() };
        let identity = Arc::new(Identity { team: Some(team), credit_balance: 5, ..Default::default() });
        assert!(kept.get(&identity).is_none(), "nothing kept yet");

        kept.keep(identity.clone(), Bytes::from_static(b"first"));
        assert_eq!(kept.get(&identity).expect("kept for the same identity"), "first");

        let read_again = Arc::new(Identity { credit_balance: 4, ..(*identity).clone() });
        assert!(kept.get(&read_again).is_none(), "another identity, even of the same team, is rendered again");
        kept.keep(read_again.clone(), Bytes::from_static(b"second"));
        assert_eq!(kept.get(&read_again).expect("the newer one is kept"), "second");
        assert!(kept.get(&identity).is_none(), "the older one is no longer kept");
    }
}
