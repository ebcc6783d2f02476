//! Passwords: the rules a new one must meet, and Argon2id hashing.
//!
//! Parameters (RFC 9106 Argon2id, version 0x13): 64 MiB of memory, 2 passes, 1 lane. A whole
//! sign-in over HTTP costs 86 ms of one core in the release build here (BENCHMARKS.md, "People
//! and the portal"; the hash is nearly all of it), inside the 50-250 ms aimed for: slow enough
//! that a stolen database is expensive to guess through, fast enough that a sign-in feels
//! instant. Hashes run on the blocking pool,
//! at most [`MOST_AT_ONCE`] at a time, so that a burst of sign-ins holds at most 256 MiB and
//! never stalls the service's other requests. The parameters travel inside each PHC string, so
//! raising them later still verifies the hashes made before.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::RngCore;
use switchboard_kit::{ErrorKind, FieldViolation, ServiceError, ServiceResult};
use tokio::sync::Semaphore;

pub const MIN_LEN: usize = 10;
pub const MAX_LEN: usize = 256;
const MEMORY_KIB: u32 = 64 * 1024;
const PASSES: u32 = 2;
const MOST_AT_ONCE: usize = 4;

/// Hashes waiting for a permit beyond which a new one is refused (503 with `Retry-After`): a
/// queue without end would let a burst of unauthenticated requests hold memory and make every
/// later sign-in wait behind it.
const MOST_WAITING: usize = 64;

static HASHING: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(MOST_AT_ONCE)));
/// Hashes admitted (running or waiting for a permit).
static ADMITTED: AtomicUsize = AtomicUsize::new(0);

/// Verified against when the e-mail matches no account, so that an unknown address costs what
/// a wrong password costs and the answer's time tells nothing.
static DECOY: LazyLock<Option<String>> = LazyLock::new(|| hash_now("decoy password, never anyone's").ok());

/// The least zxcvbn score a new password needs: 3 means more than 10^8 guesses, beyond an
/// online attack and slow enough against a stolen Argon2id hash.
pub const MIN_SCORE: u8 = 3;

/// What is wrong with a new password, if anything. `about_user` are the person's e-mail, names
/// and team: a password made of them is guessed first.
pub fn check_new(field: &str, password: &str, about_user: &[&str]) -> Option<FieldViolation> {
    let length = password.chars().count();
    if length < MIN_LEN {
        return Some(FieldViolation::new(field, format!("must be at least {MIN_LEN} characters")));
    }
    if length > MAX_LEN {
        return Some(FieldViolation::new(field, format!("must be at most {MAX_LEN} characters")));
    }
    // The e-mail's parts count too: `ada.lovelace@acme.example` hints at ada, lovelace, acme.
    let mut inputs: Vec<&str> = about_user.iter().copied().filter(|text| !text.is_empty()).collect();
    let parts: Vec<&str> = about_user
        .iter()
        .flat_map(|text| text.split(|c: char| !c.is_alphanumeric()))
        .filter(|part| part.len() >= 3)
        .collect();
    inputs.extend(parts);
    let estimate = zxcvbn::zxcvbn(password, &inputs);
    if u8::from(estimate.score()) >= MIN_SCORE {
        return None;
    }
    let advice = estimate.feedback().map(ToString::to_string).map(|text| text.trim().to_owned());
    let hint = advice.filter(|text| !text.is_empty()).unwrap_or_else(|| "Add another word or two.".to_owned());
    Some(FieldViolation::new(field, "is too easy to guess").with_hint(hint))
}

fn argon2() -> Argon2<'static> {
    // The parameters are constants within Argon2's bounds.
    let params = Params::new(MEMORY_KIB, PASSES, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

fn hash_now(password: &str) -> anyhow::Result<String> {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| anyhow::anyhow!("encoding a salt: {e}"))?;
    let hash = argon2().hash_password(password.as_bytes(), &salt).map_err(|e| anyhow::anyhow!("hashing: {e}"))?;
    Ok(hash.to_string())
}

fn verify_now(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| argon2().verify_password(password.as_bytes(), &parsed).is_ok())
}

/// Counts a hash as admitted for as long as it lives.
struct Admitted;

impl Admitted {
    fn enter() -> ServiceResult<Admitted> {
        if ADMITTED.fetch_add(1, Ordering::AcqRel) >= MOST_AT_ONCE + MOST_WAITING {
            ADMITTED.fetch_sub(1, Ordering::AcqRel);
            let mut busy = ServiceError::new(ErrorKind::Unavailable, "Too many password checks at once; try again")
                .with_hint("Retry after the number of seconds in Retry-After.");
            busy.retry_at_ms = Some(switchboard_kit::time::now_ms() + 1000);
            return Err(busy);
        }
        Ok(Admitted)
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        ADMITTED.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs `work` on the blocking pool, at most [`MOST_AT_ONCE`] at a time and [`MOST_WAITING`]
/// waiting; past that, refused at once (503).
async fn bounded<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> ServiceResult<T> {
    let admitted = Admitted::enter()?;
    let permit = HASHING.clone().acquire_owned().await.map_err(ServiceError::internal)?;
    let outcome = tokio::task::spawn_blocking(move || {
        let _held = (permit, admitted);
        work()
    })
    .await;
    outcome.map_err(ServiceError::internal)
}

/// The PHC string of a new password.
pub async fn hash(password: &str) -> ServiceResult<String> {
    let password = password.to_owned();
    bounded(move || hash_now(&password)).await?.map_err(ServiceError::internal)
}

/// Whether `password` is the one `hash` was made of; with no hash (no such account) the decoy
/// is verified instead, and the answer is false.
pub async fn verify(hash: Option<String>, password: &str) -> ServiceResult<bool> {
    let password = password.to_owned();
    bounded(move || match hash {
        Some(hash) => verify_now(&hash, &password),
        None => {
            if let Some(decoy) = DECOY.as_deref() {
                verify_now(decoy, &password);
            }
            false
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_past_the_queue_are_refused_with_a_retry() {
        let held: Vec<Admitted> = (0..MOST_AT_ONCE + MOST_WAITING).map(|_| Admitted::enter().expect("room")).collect();
        let refused = Admitted::enter().err().expect("the queue is full");
        assert_eq!(refused.kind, ErrorKind::Unavailable);
        assert!(refused.retry_at_ms.is_some());
        drop(held);
        Admitted::enter().expect("room again");
    }

    #[test]
    fn new_passwords_are_long_enough_and_hard_to_guess() {
        assert!(check_new("password", "short", &[]).is_some());
        assert!(check_new("password", &"x".repeat(MAX_LEN + 1), &[]).is_some());
        for weak in ["Password123", "qwertyuiop1", "1234567890", "iloveyou2024", "aaaaaaaaaaaa"] {
            let refused = check_new("password", weak, &[]).unwrap_or_else(|| panic!("{weak} passed"));
            assert_eq!(refused.message, "is too easy to guess");
            assert!(refused.hint.as_deref().is_some_and(|hint| !hint.is_empty()), "{weak}: no advice");
        }
        assert!(check_new("password", "correct horse battery", &[]).is_none());
        assert!(check_new("password", "violet-tugboat-42-marmalade", &[]).is_none());
    }

    #[test]
    fn a_password_made_of_the_persons_own_details_is_refused() {
        let about = ["qzorblat.vexmund@brightwater.example", "Qzorblat", "Vexmund", "Brightwater"];
        assert!(check_new("password", "QzorblatVexmund", &about).is_some());
        assert!(check_new("password", "QzorblatVexmund", &[]).is_none(), "without the details it would pass");
    }

    #[test]
    fn a_hash_verifies_its_password_only() {
        let hash = hash_now("correct horse battery").expect("hashed");
        assert!(hash.starts_with("$argon2id$v=19$m=65536,t=2,p=1$"), "{hash}");
        assert!(verify_now(&hash, "correct horse battery"));
        assert!(!verify_now(&hash, "correct horse battery!"));
        assert!(!verify_now("not a hash", "anything"));
    }
}
