//! API keys are stored only as the SHA-256 of the secret. The gateway hashes what a client
//! sends and the identity service looks the hash up; neither logs nor returns the secret.
//! A plain hash is enough because keys carry 256 bits of randomness: there is nothing to
//! guess that a slow hash would protect.

use sha2::{Digest, Sha256};

pub const KEY_PREFIX: &str = "ew_";
/// Characters of the secret that may be shown to identify a key (`ew_` plus six).
pub const DISPLAY_PREFIX_LEN: usize = 9;

pub fn hash_key(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

pub fn display_prefix(secret: &str) -> String {
    secret.chars().take(DISPLAY_PREFIX_LEN).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_hex_sha256() {
        assert_eq!(hash_key("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn prefix_never_reveals_more_than_its_length() {
        assert_eq!(display_prefix("ew_abcdefghijklmnop"), "ew_abcdef");
        assert_eq!(display_prefix("ew_"), "ew_");
    }
}
