//! Secrets the identity service must read back, sealed at rest: the TOTP secrets of
//! authenticator apps. Whoever reads the database (a backup, a replica, a leaked dump) could
//! otherwise make every person's codes. Each is sealed with AES-256-GCM under a key from
//! configuration (`SWITCHBOARD_ENCRYPTION_KEYS`, from the deployment's Secret), bound to its
//! row (the associated data names the user), and stored as `sealed:<key id>:<base64url of
//! nonce and ciphertext>`.
//!
//! The keys are a list, `id:base64-of-32-bytes`, comma-separated: the first seals, every one
//! opens. To rotate, put a new key first and keep the old one after it; at start the service
//! seals again what an older key (or none, before sealing existed) sealed, and the old key can
//! then go.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rand::RngCore;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use switchboard_kit::{ServiceError, ServiceResult};

/// The variable the keys come from.
pub const KEYS_VARIABLE: &str = "SWITCHBOARD_ENCRYPTION_KEYS";
const PREFIX: &str = "sealed:";
const KEY_BYTES: usize = 32;

/// The keys that seal and open stored secrets; the first seals.
pub struct Sealer {
    keys: Vec<(String, LessSafeKey)>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("Sealer").field("key_ids", &ids).finish_non_exhaustive()
    }
}

fn sealing_failed(what: &str) -> ServiceError {
    ServiceError::internal(anyhow::anyhow!("{what}"))
}

impl Sealer {
    /// From `id:base64,id:base64,...` (the first seals).
    pub fn parse(text: &str) -> anyhow::Result<Sealer> {
        let mut keys: Vec<(String, LessSafeKey)> = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|entry| !entry.is_empty()) {
            let (id, encoded) = entry
                .split_once(':')
                .ok_or_else(|| anyhow::anyhow!("{KEYS_VARIABLE}: expected id:base64-key, got an entry without ':'"))?;
            anyhow::ensure!(
                !id.is_empty()
                    && id.len() <= 32
                    && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{KEYS_VARIABLE}: a key id is 1 to 32 letters, digits, '-' or '_'"
            );
            anyhow::ensure!(
                keys.iter().all(|(known, _)| known != id),
                "{KEYS_VARIABLE}: the key id {id} is named twice"
            );
            let bytes = STANDARD
                .decode(encoded.trim())
                .map_err(|_| anyhow::anyhow!("{KEYS_VARIABLE}: the key {id} is not base64"))?;
            anyhow::ensure!(bytes.len() == KEY_BYTES, "{KEYS_VARIABLE}: the key {id} must be {KEY_BYTES} bytes");
            let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| anyhow::anyhow!("{KEYS_VARIABLE}: bad key"))?;
            keys.push((id.to_owned(), LessSafeKey::new(key)));
        }
        anyhow::ensure!(!keys.is_empty(), "{KEYS_VARIABLE} names no key");
        Ok(Sealer { keys })
    }

    /// From the environment, when set.
    pub fn from_env() -> anyhow::Result<Option<Sealer>> {
        std::env::var(KEYS_VARIABLE)
            .ok()
            .filter(|text| !text.trim().is_empty())
            .map(|text| Sealer::parse(&text))
            .transpose()
    }

    /// A new key entry, `id:base64`, for `id`.
    pub fn new_key(id: &str) -> String {
        let mut bytes = [0u8; KEY_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        format!("{id}:{}", STANDARD.encode(bytes))
    }

    fn current(&self) -> &(String, LessSafeKey) {
        &self.keys[0]
    }

    /// `secret` sealed under the current key, bound to `context` (what it belongs to).
    pub fn seal(&self, secret: &str, context: &str) -> ServiceResult<String> {
        let (id, key) = self.current();
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let mut sealed = secret.as_bytes().to_vec();
        key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(context.as_bytes()), &mut sealed)
            .map_err(|_| sealing_failed("sealing a secret failed"))?;
        let mut stored = nonce.to_vec();
        stored.extend_from_slice(&sealed);
        Ok(format!("{PREFIX}{id}:{}", URL_SAFE_NO_PAD.encode(stored)))
    }

    /// The secret in `stored`, which was sealed for `context`. Text stored before sealing
    /// existed is answered as it is (and sealed again at start, [`Sealer::is_current`]).
    pub fn open(&self, stored: &str, context: &str) -> ServiceResult<String> {
        let Some(rest) = stored.strip_prefix(PREFIX) else { return Ok(stored.to_owned()) };
        let (id, encoded) = rest.split_once(':').ok_or_else(|| sealing_failed("a sealed secret has no key id"))?;
        let (_, key) =
            self.keys.iter().find(|(known, _)| known == id).ok_or_else(|| {
                sealing_failed(&format!("a secret is sealed with the key {id}, which is not configured"))
            })?;
        let mut bytes = URL_SAFE_NO_PAD.decode(encoded).map_err(|_| sealing_failed("a sealed secret is not base64"))?;
        if bytes.len() < NONCE_LEN {
            return Err(sealing_failed("a sealed secret is too short"));
        }
        let sealed = bytes.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&bytes).map_err(|_| sealing_failed("a bad nonce"))?;
        let mut sealed = sealed;
        let opened = key
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut sealed)
            .map_err(|_| sealing_failed("a sealed secret does not open (another row's, or altered)"))?;
        String::from_utf8(opened.to_vec()).map_err(|_| sealing_failed("a sealed secret is not text"))
    }

    /// Whether `stored` is sealed under the current key (else it is sealed again).
    pub fn is_current(&self, stored: &str) -> bool {
        stored.strip_prefix(PREFIX).and_then(|rest| rest.split_once(':')).is_some_and(|(id, _)| id == self.current().0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer(keys: &str) -> Sealer {
        Sealer::parse(keys).unwrap()
    }

    #[test]
    fn a_secret_opens_for_its_row_only() {
        let one = Sealer::new_key("k1");
        let sealer = sealer(&one);
        let stored = sealer.seal("JBSWY3DPEHPK3PXP", "totp:ada").unwrap();
        assert!(stored.starts_with("sealed:k1:"), "{stored}");
        assert!(!stored.contains("JBSWY3DPEHPK3PXP"));
        assert_ne!(stored, sealer.seal("JBSWY3DPEHPK3PXP", "totp:ada").unwrap(), "a nonce of its own each time");
        assert_eq!(sealer.open(&stored, "totp:ada").unwrap(), "JBSWY3DPEHPK3PXP");
        assert!(sealer.open(&stored, "totp:eve").is_err(), "moved to another row");
        let mut altered = stored.clone();
        altered.pop();
        altered.push(if stored.ends_with('A') { 'B' } else { 'A' });
        assert!(sealer.open(&altered, "totp:ada").is_err());
        assert_eq!(sealer.open("PLAINTEXT", "totp:ada").unwrap(), "PLAINTEXT", "stored before sealing");
    }

    #[test]
    fn keys_rotate_new_first_old_after() {
        let (old, new) = (Sealer::new_key("k1"), Sealer::new_key("k2"));
        let stored = sealer(&old).seal("SECRET", "c").unwrap();
        let rotated = sealer(&format!("{new},{old}"));
        assert_eq!(rotated.open(&stored, "c").unwrap(), "SECRET");
        assert!(!rotated.is_current(&stored));
        assert!(rotated.is_current(&rotated.seal("SECRET", "c").unwrap()));
        assert!(sealer(&new).open(&stored, "c").is_err(), "the old key gone: k1 is not configured");
    }

    #[test]
    fn bad_configurations_are_refused() {
        for bad in ["", "k1", "k1:short", ":AAAA", "k 1:AAAA", &format!("{0},{0}", Sealer::new_key("k1"))] {
            assert!(Sealer::parse(bad).is_err(), "{bad}");
        }
    }
}
