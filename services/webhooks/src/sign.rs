//! Signatures of the Standard Webhooks specification (standardwebhooks.com): the secret is
//! `whsec_` and base64 key bytes; a message is signed as HMAC-SHA256 over
//! `{webhook-id}.{webhook-timestamp}.{body}` and sent as `webhook-signature: v1,<base64>`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

const PREFIX: &str = "whsec_";

/// A new secret: 32 random bytes.
pub fn new_secret() -> String {
    let mut key = [0u8; 32];
    rand::rng().fill_bytes(&mut key);
    format!("{PREFIX}{}", BASE64.encode(key))
}

/// The `webhook-signature` header of one message.
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &str) -> anyhow::Result<String> {
    let key = BASE64.decode(secret.strip_prefix(PREFIX).unwrap_or(secret))?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key)?;
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    Ok(format!("v1,{}", BASE64.encode(mac.finalize().into_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_the_specification_example() {
        // The example of the Standard Webhooks specification.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = r#"{"test": 2432232314}"#;
        let signed = signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).unwrap();
        assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn secrets_are_prefixed_32_byte_keys() {
        let secret = new_secret();
        let key = BASE64.decode(secret.strip_prefix(PREFIX).unwrap()).unwrap();
        assert_eq!(key.len(), 32);
        assert_ne!(secret, new_secret());
    }
}
