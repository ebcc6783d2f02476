//! The answer of every way to sign in (password, second factor, passkey, SSO): the session
//! view, with the cookie that carries the session. Cookies are `Secure` whenever the platform
//! is reached over https: its public URL says so, or a trusted proxy does (`crate::origin`),
//! never a client's own header.

use switchboard_api::accounts::SessionView;
use switchboard_kit::time::now_ms;
use switchboard_proto::v1::SignedIn;

use crate::call::Call;
use crate::endpoint::{Data, WithCookie};
use crate::sessions;

/// The session view of a session just begun, with the cookie that carries it, and the
/// passkeys that still sign in when the identity service listed them (after a password reset).
pub fn begun(call: &Call, signed_in: SignedIn) -> WithCookie<SessionView> {
    let session = signed_in.session.unwrap_or_default();
    let max_age = ((session.expires_at_ms - now_ms()) / 1000).max(0);
    let cookie = sessions::set_cookie(&signed_in.token, max_age, call.client.https);
    let mut view = SessionView::new(&session, sessions::csrf_token(&signed_in.token));
    if !signed_in.passkeys.is_empty() {
        view = view.with_passkeys(&signed_in.passkeys);
    }
    WithCookie { answer: view, cookie }
}

pub fn data<T>(begun: WithCookie<T>) -> WithCookie<Data<T>> {
    WithCookie { answer: Data::new(begun.answer), cookie: begun.cookie }
}
