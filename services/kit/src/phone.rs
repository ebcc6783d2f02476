//! Phone numbers in E.164, read with the `phonenumber` crate (a port of Google's libphonenumber
//! and its metadata), not a pattern: `+1 (415) 555-2671`, `tel:+1-415-555-2671` and, in the
//! default region US, `(415) 555-2671` are all `+14155552671`.

use std::str::FromStr;

use phonenumber::country;
use phonenumber::{Mode, PhoneNumber};

/// The variable naming the region of numbers written without a country code.
pub const REGION_VARIABLE: &str = "SWITCHBOARD_DEFAULT_PHONE_REGION";

/// How numbers are read: where a number without `+` and country code is assumed to be.
#[derive(Debug, Clone, Copy)]
pub struct PhoneRules {
    region: country::Id,
}

impl Default for PhoneRules {
    fn default() -> Self {
        Self { region: country::Id::US }
    }
}

impl PhoneRules {
    /// From `SWITCHBOARD_DEFAULT_PHONE_REGION` (an ISO 3166 code such as `US`, `GB`, `DE`).
    pub fn from_env() -> anyhow::Result<Self> {
        match std::env::var(REGION_VARIABLE).ok().filter(|value| !value.trim().is_empty()) {
            None => Ok(Self::default()),
            Some(region) => Self::for_region(&region),
        }
    }

    pub fn for_region(region: &str) -> anyhow::Result<Self> {
        let region = country::Id::from_str(&region.trim().to_ascii_uppercase())
            .map_err(|_| anyhow::anyhow!("{REGION_VARIABLE}={region}: not an ISO 3166 region code"))?;
        Ok(Self { region })
    }

    /// The number in E.164, or why it is not a phone number.
    pub fn normalise(&self, text: &str) -> Result<String, &'static str> {
        let text = text.trim();
        if text.is_empty() || text.chars().count() > 64 {
            return Err("must be a phone number");
        }
        let number: PhoneNumber = phonenumber::parse(Some(self.region), text).map_err(|_| "must be a phone number")?;
        if !number.is_valid() {
            return Err("must be a valid phone number");
        }
        Ok(number.format().mode(Mode::E164).to_string())
    }
}

/// A search typed as part of a phone number (`555-2671`, `(415) 555`, `+1 415`): its digits,
/// after a `+` if it starts with one, as they appear in a stored E.164 number. `None` for any
/// other text, and for fewer than 3 digits.
pub fn fragment(query: &str) -> Option<String> {
    let query = query.trim();
    let digits: String = query.chars().filter(char::is_ascii_digit).collect();
    let phone_like =
        query.chars().all(|c| c.is_ascii_digit() || " -.()/+".contains(c)) && query.chars().skip(1).all(|c| c != '+');
    if digits.len() < 3 || !phone_like {
        return None;
    }
    let plus = if query.starts_with('+') { "+" } else { "" };
    Some(format!("{plus}{digits}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phone_fragments_keep_their_digits() {
        assert_eq!(fragment("555-2671").as_deref(), Some("5552671"));
        assert_eq!(fragment(" (415) 555.2671 ").as_deref(), Some("4155552671"));
        assert_eq!(fragment("+1 415").as_deref(), Some("+1415"));
        assert_eq!(fragment("5552671").as_deref(), Some("5552671"));
        assert_eq!(fragment("12"), None);
        assert_eq!(fragment("1+2345"), None);
        assert_eq!(fragment("grace 555"), None);
    }

    #[test]
    fn spellings_of_one_number_are_one_e164() {
        let us = PhoneRules::default();
        for spelling in ["+1 (415) 555-2671", "(415) 555-2671", "415.555.2671", "tel:+1-415-555-2671", "+14155552671"] {
            assert_eq!(us.normalise(spelling).as_deref(), Ok("+14155552671"), "{spelling}");
        }
        let gb = PhoneRules::for_region("gb").unwrap();
        assert_eq!(gb.normalise("020 7946 0018").as_deref(), Ok("+442079460018"));
        assert_eq!(gb.normalise("+1 415 555 2671").as_deref(), Ok("+14155552671"));
    }

    #[test]
    fn what_is_not_a_number_is_refused() {
        let us = PhoneRules::default();
        for text in ["", "hello", "123", "+1 000 000 0000", &"9".repeat(80)] {
            assert!(us.normalise(text).is_err(), "{text}");
        }
        assert!(PhoneRules::for_region("XX").is_err());
    }
}
