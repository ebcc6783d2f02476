//! Second factors: TOTP codes (RFC 6238: HMAC-SHA-1, 6 digits, 30-second steps, one step of
//! clock skew either way, each step accepted once) and single-use recovery codes, and the
//! `AccountService` calls that set them up and check them at sign-in.
//!
//! A sign-in whose user has a second factor does not begin a session: it answers a challenge
//! (`store::second_factor`), which `VerifySecondFactor` turns into a session with a code. A
//! team can require a second factor; its people without one then get sessions that may only
//! set one up (`Session.second_factor_needed`, enforced by the gateway).

use rand::RngCore;
use switchboard_kit::apikey::hash_key;
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::{
    Client, ConfirmTotpRequest, RecoveryCodes, SecondFactorChallenge, SecondFactors, SecurityPolicy,
    SetSecurityPolicyRequest, SignedIn, TotpEnrolment, User, VerifySecondFactorRequest,
};

use crate::grpc::accounts::{AccountsApi, user_actor};
use crate::store::members::is_owner;
use crate::store::second_factor::Purpose;

const STEP_SECONDS: u64 = 30;
const DIGITS: usize = 6;
/// 160 bits, as RFC 4226 recommends.
const SECRET_BYTES: usize = 20;
const RECOVERY_CODES: usize = 10;
/// Shown in authenticator apps beside the account.
const ISSUER: &str = "Switchboard";
pub const TOTP: &str = "totp";
pub const RECOVERY_CODE: &str = "recovery_code";
pub const PASSKEY: &str = "passkey";

/// A new TOTP secret, base32 without padding (what apps take).
fn new_secret() -> String {
    let mut secret = [0u8; SECRET_BYTES];
    rand::rng().fill_bytes(&mut secret);
    base32(&secret)
}

/// RFC 4648 base32, upper case, without padding.
fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for byte in bytes {
        buffer = (buffer << 8) | u32::from(*byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((buffer >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((buffer << (5 - bits)) & 31) as usize]));
    }
    out
}

fn decode_base32(text: &str) -> Option<Vec<u8>> {
    let (mut buffer, mut bits, mut out) = (0u32, 0u32, Vec::new());
    for c in text.bytes() {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'2'..=b'7' => c - b'2' + 26,
            _ => return None,
        };
        buffer = (buffer << 5) | u32::from(value);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push(((buffer >> bits) & 0xff) as u8);
        }
    }
    Some(out)
}

/// The `otpauth://` URI authenticator apps read from a QR code.
fn otpauth_uri(secret: &str, account: &str) -> String {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    let label = utf8_percent_encode(&format!("{ISSUER}:{account}"), NON_ALPHANUMERIC).to_string();
    format!(
        "otpauth://totp/{label}?secret={secret}&issuer={ISSUER}&algorithm=SHA1&digits={DIGITS}&period={STEP_SECONDS}"
    )
}

/// The time step `code` was made for, within one step of `now_seconds`, if it is one.
fn matching_step(secret: &str, code: &str, now_seconds: u64) -> Option<i64> {
    let key = decode_base32(secret)?;
    let totp = totp_rs::TOTP::new_unchecked(totp_rs::Algorithm::SHA1, DIGITS, 1, STEP_SECONDS, key);
    let now_step = now_seconds / STEP_SECONDS;
    // Every candidate is compared, so that the time does not tell which matched.
    let mut found = None;
    for step in [now_step.saturating_sub(1), now_step, now_step + 1] {
        let expected = totp.generate(step * STEP_SECONDS);
        let same = expected.len() == code.len()
            && expected.bytes().zip(code.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
        if same {
            found = i64::try_from(step).ok();
        }
    }
    found
}

/// Ten recovery codes of 24 base32 characters (120 bits each), shown as
/// `xxxxxx-xxxxxx-xxxxxx-xxxxxx`. Each is as hard to guess as a key, so that its unsalted
/// SHA-256 at rest gives nothing away (ASVS 2.6.2 asks for 112 bits at least).
fn new_recovery_codes() -> Vec<String> {
    (0..RECOVERY_CODES)
        .map(|_| {
            let mut bytes = [0u8; 15];
            rand::rng().fill_bytes(&mut bytes);
            let text = base32(&bytes).to_lowercase();
            let groups: Vec<&str> = (0..4).map(|group| &text[group * 6..group * 6 + 6]).collect();
            groups.join("-")
        })
        .collect()
}

/// A code as typed: spaces and dashes dropped, recovery codes compared in lower case.
fn normalized(code: &str) -> String {
    code.chars().filter(|c| !c.is_whitespace() && *c != '-').collect::<String>().to_lowercase()
}

fn recovery_hash(code: &str) -> String {
    hash_key(&normalized(code))
}

fn wrong_code() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, "Invalid code")
        .with_hint("Enter the current 6-digit code of your authenticator app, or one of your recovery codes.")
}

/// Issue 55: a person who typed the code they had just used was told only "Invalid code".
fn reused_code() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, "This code was already used").with_hint(REUSED_HINT)
}

const REUSED_HINT: &str = "Each code of your authenticator app works once: wait for the app to show the next one \
                           (a new code every 30 seconds), or use a recovery code.";

/// What a typed code proved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CodeVerdict {
    Accepted,
    /// The authenticator app's code of a time step already used (ASVS 2.8.4: each once).
    Reused,
    Refused,
}

impl CodeVerdict {
    fn of(accepted: bool) -> Self {
        if accepted { CodeVerdict::Accepted } else { CodeVerdict::Refused }
    }
}

fn now_seconds() -> u64 {
    u64::try_from(now_ms() / 1000).unwrap_or_default()
}

impl AccountsApi {
    /// What `SignIn` answers for a user whose password was right (and `ResetPassword` for a
    /// user who set a new one): a session, or a challenge when they have a second factor.
    pub(crate) async fn signed_in_or_challenged(
        &self,
        user: &User,
        client: &Client,
        purpose: Purpose,
    ) -> ServiceResult<SignedIn> {
        if !self.store.has_second_factor(&user.id).await? {
            let signed_in = self.store.begin_session(user, client, self.settings.sessions).await?;
            self.audit_signed_in(AuditAction::AuthSignedIn, &signed_in, Some(client)).await;
            return Ok(signed_in);
        }
        let (token, expires_at_ms) = self.store.create_challenge(user, client, purpose).await?;
        let factors = self.store.second_factors(user).await?;
        let mut methods = Vec::new();
        if factors.totp {
            methods.push(TOTP.to_owned());
        }
        if !factors.passkeys.is_empty() {
            methods.push(PASSKEY.to_owned());
        }
        methods.push(RECOVERY_CODE.to_owned());
        Ok(SignedIn { challenge: Some(SecondFactorChallenge { token, expires_at_ms, methods }), ..SignedIn::default() })
    }

    pub(crate) async fn verify_second_factor(&self, request: VerifySecondFactorRequest) -> ServiceResult<SignedIn> {
        let challenge = self.store.challenge(&request.challenge).await?;
        let user = challenge.user;
        let client = request.client.unwrap_or_default();
        let verdict = if !request.passkey_ceremony.is_empty() {
            let assertion =
                (request.passkey_ceremony.as_str(), request.passkey_credential.as_str(), request.origin.as_str());
            CodeVerdict::of(self.passkey_second_factor(&user, &challenge.id, assertion).await?)
        } else {
            self.check_code(&user, &request.code, &client).await?
        };
        // A re-authentication's challenge never leaves the service; a token of one is no sign-in.
        if verdict != CodeVerdict::Accepted || challenge.purpose == Purpose::Reauth {
            self.audit(
                &user.team_id,
                AuditAction::AuthSecondFactorFailed,
                user_actor(&user),
                &user.email,
                Some(&client),
            )
            .await;
            let reused = verdict == CodeVerdict::Reused && challenge.purpose != Purpose::Reauth;
            return Err(if reused { reused_code() } else { wrong_code() });
        }
        self.store.finish_challenge(&challenge.id).await?;
        let mut signed_in = self.store.begin_session(&user, &client, self.settings.sessions).await?;
        if challenge.purpose == Purpose::Reset {
            signed_in.passkeys = self.store.passkey_infos(&user.id).await?;
        }
        self.audit_signed_in(AuditAction::AuthSignedIn, &signed_in, Some(&client)).await;
        Ok(signed_in)
    }

    /// Whether `code` is the user's current TOTP code (each time step once: the code of a step
    /// already used is `Reused`) or one of their unused recovery codes (used up by this); a
    /// recovery code used is audited.
    pub(crate) async fn check_code(&self, user: &User, code: &str, client: &Client) -> ServiceResult<CodeVerdict> {
        let code = normalized(code);
        if code.len() == DIGITS && code.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(match self.store.totp_factor(&user.id).await? {
                Some(factor) if factor.confirmed => match matching_step(&factor.secret, &code, now_seconds()) {
                    Some(step) if step > factor.last_step => {
                        CodeVerdict::of(self.store.accept_totp_step(&user.id, step, None).await?)
                    }
                    Some(_) => CodeVerdict::Reused,
                    None => CodeVerdict::Refused,
                },
                _ => CodeVerdict::Refused,
            });
        }
        let used = self.store.use_recovery_code(&user.id, &recovery_hash(&code)).await?;
        if used {
            self.audit(&user.team_id, AuditAction::AuthRecoveryCodeUsed, user_actor(user), &user.email, Some(client))
                .await;
        }
        Ok(CodeVerdict::of(used))
    }

    /// The user of a session, for the calls a person makes about their own second factors.
    pub(crate) async fn user_of_session(&self, token_hash: &str) -> ServiceResult<User> {
        let session = self.store.session(token_hash, self.settings.sessions).await?;
        session.user.ok_or_else(|| ServiceError::new(ErrorKind::Unauthorized, "Not signed in"))
    }

    pub(crate) async fn second_factors_of(&self, token_hash: &str) -> ServiceResult<SecondFactors> {
        let user = self.user_of_session(token_hash).await?;
        self.store.second_factors(&user).await
    }

    pub(crate) async fn begin_totp(&self, token_hash: &str) -> ServiceResult<TotpEnrolment> {
        let user = self.user_of_session(token_hash).await?;
        let secret = new_secret();
        self.store.begin_totp(&user.id, &secret).await?;
        Ok(TotpEnrolment { uri: otpauth_uri(&secret, &user.email), secret })
    }

    pub(crate) async fn confirm_totp(&self, request: ConfirmTotpRequest) -> ServiceResult<RecoveryCodes> {
        let user = self.user_of_session(&request.token_hash).await?;
        let pending = self.store.totp_factor(&user.id).await?.filter(|factor| !factor.confirmed);
        let pending = pending.ok_or_else(|| {
            ServiceError::conflict("No authenticator app is being set up")
                .with_hint("Start with POST /v1/auth/second-factors/totp.")
        })?;
        let step = matching_step(&pending.secret, &normalized(&request.code), now_seconds())
            .ok_or_else(|| ServiceError::invalid_field("code", "is not the app's current code"))?;
        let codes = new_recovery_codes();
        let hashes: Vec<String> = codes.iter().map(|code| recovery_hash(code)).collect();
        if !self.store.accept_totp_step(&user.id, step, Some(&hashes)).await? {
            return Err(ServiceError::invalid_field("code", "is not the app's current code"));
        }
        let client = request.client.as_ref();
        self.audit(&user.team_id, AuditAction::AuthSecondFactorEnabled, user_actor(&user), &user.email, client).await;
        // A session opened before the factor existed (or stolen) does not outlive it; the
        // session that set it up, limited to doing so until now, is a whole one.
        self.store.end_other_sessions(&user.id, &request.token_hash).await?;
        self.sessions_changed(&user.team_id).await;
        Ok(RecoveryCodes { codes })
    }

    pub(crate) async fn remove_totp(&self, token_hash: &str, client: Option<&Client>) -> ServiceResult<SecondFactors> {
        let user = self.user_of_session(token_hash).await?;
        self.store.remove_totp(&user).await?;
        self.audit(&user.team_id, AuditAction::AuthSecondFactorRemoved, user_actor(&user), &user.email, client).await;
        self.store.end_other_sessions(&user.id, token_hash).await?;
        self.sessions_changed(&user.team_id).await;
        self.store.second_factors(&user).await
    }

    pub(crate) async fn renew_recovery_codes(
        &self,
        token_hash: &str,
        client: Option<&Client>,
    ) -> ServiceResult<RecoveryCodes> {
        let user = self.user_of_session(token_hash).await?;
        let codes = new_recovery_codes();
        let hashes: Vec<String> = codes.iter().map(|code| recovery_hash(code)).collect();
        self.store.renew_recovery_codes(&user.id, &hashes).await?;
        self.audit(&user.team_id, AuditAction::AuthRecoveryCodesRenewed, user_actor(&user), &user.email, client).await;
        Ok(RecoveryCodes { codes })
    }

    pub(crate) async fn set_security_policy(&self, request: SetSecurityPolicyRequest) -> ServiceResult<SecurityPolicy> {
        if !is_owner(&request.caller_role) {
            return Err(ServiceError::forbidden("Only an owner can change the team's sign-in requirements"));
        }
        // An owner who turns it on has a second factor: they do not lock themselves to set-up.
        if request.require_second_factor
            && let Some(actor) = request.actor.as_ref().filter(|actor| actor.r#type == "user")
            && !self.store.has_second_factor(&actor.id).await?
        {
            return Err(ServiceError::conflict("Set up your own second factor before requiring one")
                .with_hint("Add an authenticator app at /settings/security."));
        }
        self.store.set_requires_second_factor(&request.team_id, request.require_second_factor).await?;
        // The gateway writes `team.security_changed` (the operation is audited there).
        // Every session of the team is looked up again: some are now limited to set-up.
        self.sessions_changed(&request.team_id).await;
        Ok(SecurityPolicy { require_second_factor: request.require_second_factor })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base32_round_trips_and_matches_rfc_4648() {
        assert_eq!(base32(b"foobar"), "MZXW6YTBOI");
        assert_eq!(decode_base32("MZXW6YTBOI").as_deref(), Some(&b"foobar"[..]));
        assert_eq!(new_secret().len(), 32);
        assert!(decode_base32("not base32!").is_none());
    }

    #[test]
    fn codes_match_the_rfc_6238_vectors() {
        // RFC 6238 appendix B, SHA-1 seed "12345678901234567890", 8 digits shown; the 6 low ones.
        let secret = base32(b"12345678901234567890");
        assert_eq!(matching_step(&secret, "287082", 59), Some(1));
        assert_eq!(matching_step(&secret, "081804", 1_111_111_109), Some(1_111_111_109 / 30));
        assert_eq!(matching_step(&secret, "081804", 1_111_111_109 + 30), Some(1_111_111_109 / 30), "one step late");
        assert_eq!(matching_step(&secret, "081804", 1_111_111_109 + 61), None, "two steps late");
        assert_eq!(matching_step(&secret, "000000", 59), None);
    }

    #[test]
    fn recovery_codes_are_ten_distinct_and_typed_loosely() {
        let codes = new_recovery_codes();
        assert_eq!(codes.len(), 10);
        // 4 groups of 6 base32 characters: 24 x 5 = 120 bits each.
        assert!(codes.iter().all(|code| {
            let groups: Vec<&str> = code.split('-').collect();
            groups.len() == 4 && groups.iter().all(|group| group.len() == 6)
        }));
        assert!(
            codes
                .iter()
                .all(|code| code.bytes().all(|b| b == b'-' || b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b)))
        );
        let mut unique = codes.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 10);
        assert_eq!(recovery_hash(&codes[0]), recovery_hash(&codes[0].to_uppercase().replace('-', " ")));
    }

    #[test]
    fn the_uri_names_the_issuer_and_account() {
        let uri = otpauth_uri("ABC", "ada@example.com");
        assert_eq!(
            uri,
            "otpauth://totp/Switchboard%3Aada%40example%2Ecom?secret=ABC&issuer=Switchboard&algorithm=SHA1&digits=6&period=30"
        );
    }
}
