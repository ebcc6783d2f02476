//! API key secrets: `ew_` followed by 43 characters drawn uniformly from the 62 ASCII
//! letters and digits (256 bits of randomness) by the thread-local CSPRNG.

use rand::Rng;
use rand::distr::Alphanumeric;
use switchboard_kit::apikey::KEY_PREFIX;

const RANDOM_CHARS: usize = 43;

pub fn generate_secret() -> String {
    let random: String = rand::rng().sample_iter(&Alphanumeric).take(RANDOM_CHARS).map(char::from).collect();
    format!("{KEY_PREFIX}{random}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_have_the_hosted_format_and_enough_entropy() {
        let secret = generate_secret();
        assert!(secret.starts_with("ew_"));
        assert_eq!(secret.len(), 3 + RANDOM_CHARS);
        assert!(secret[3..].chars().all(|c| c.is_ascii_alphanumeric()));
        // 43 symbols of log2(62) bits each.
        assert!(RANDOM_CHARS as f64 * 62f64.log2() >= 160.0);
        assert_ne!(generate_secret(), secret);
    }
}
