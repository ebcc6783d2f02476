//! The portal pages that single-use links open, on the origin the platform is reached at.

/// The page that accepts an invitation with this token.
pub fn invite_url(public_base: &str, token: &str) -> String {
    format!("{}/invite/{token}", public_base.trim_end_matches('/'))
}

/// The page that sets a new password with this reset token.
pub fn reset_url(public_base: &str, token: &str) -> String {
    format!("{}/reset/{token}", public_base.trim_end_matches('/'))
}

/// The page that confirms a new e-mail address with this token.
pub fn confirm_email_url(public_base: &str, token: &str) -> String {
    format!("{}/confirm-email/{token}", public_base.trim_end_matches('/'))
}
