//! Phone numbers in E.164, read as Google's libphonenumber reads them, not with a pattern:
//! `+1 (415) 555-2671`, `tel:+1-415-555-2671` and, in the default region US, `(415) 555-2671`
//! are all `+14155552671`; `+44 121 234 5678` is `+441212345678` whatever the default region.
//!
//! The metadata (country codes, national prefixes, number patterns) is the `phonenumber`
//! crate's, a port of libphonenumber's. Its parser and validator depart from libphonenumber
//! though, so a number written as digits (the usual case) is read here with libphonenumber's
//! own steps over that metadata; only other spellings (`tel:` URIs, letters, extensions) go
//! through the crate's parser, and every number is then checked with libphonenumber's rule.
//! Where the crate departs, as of 0.3.10 (metadata 9.0.33):
//! - given a default region, it strips that region's national prefix even from a number that
//!   names its own country, so with US every `+44 121 ...` and `+33 1 ...` lost its leading 1;
//! - it strips a national prefix even when the digits as written are a viable number and what
//!   remains is not (`+7 800 ...`, Russian toll-free, became `+7 00 ...`), and then strips it
//!   a second time;
//! - it does not derive a country's possible lengths from its number types, so its length
//!   checks pass everything (`250 123 456` in Rwanda was read as `+250` `123456`);
//! - it matches number patterns as prefixes, not whole numbers, so `+48 1234567895` (a valid
//!   Polish number with a digit too many) was valid.
//!
//! The reference is libphonenumber's own example numbers (fixed line, mobile and toll-free of
//! every region), with near misses around them, in `tests/data/phone_examples.tsv` and
//! `tests/data/phone_near_misses.tsv`, checked by `tests/phone_examples.rs`. Both files are
//! written by `tests/data/generate_phone_examples.py` with Python's `phonenumbers`; run it
//! again (its docstring says how) after a change of that version or of the crate's metadata.

use std::str::FromStr;

use phonenumber::Mode;
use phonenumber::country;
use phonenumber::metadata::{DATABASE, Descriptor, Metadata};

/// The variable naming the region of numbers written without a country code.
pub const REGION_VARIABLE: &str = "SWITCHBOARD_DEFAULT_PHONE_REGION";

const NOT_A_NUMBER: &str = "must be a phone number";
const NOT_VALID: &str = "must be a valid phone number";

// libphonenumber's bounds on a national significant number and on a country code.
const MIN_NATIONAL_LENGTH: usize = 2;
const MAX_NATIONAL_LENGTH: usize = 17;
const MAX_COUNTRY_CODE_LENGTH: usize = 3;

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
        let id = country::Id::from_str(&region.trim().to_ascii_uppercase())
            .ok()
            .filter(|id| DATABASE.by_id(id.as_ref()).is_some())
            .ok_or_else(|| anyhow::anyhow!("{REGION_VARIABLE}={region}: not an ISO 3166 region code"))?;
        Ok(Self { region: id })
    }

    /// The number in E.164, or why it is not a phone number.
    pub fn normalise(&self, text: &str) -> Result<String, &'static str> {
        let text = text.trim();
        if text.is_empty() || text.chars().count() > 64 {
            return Err(NOT_A_NUMBER);
        }
        let region = DATABASE.by_id(self.region.as_ref()).ok_or(NOT_A_NUMBER)?;
        match plain_digits(text) {
            Some((plus, digits)) => read(region, plus, &digits),
            None => self.read_with_crate(text),
        }
    }

    fn read_with_crate(&self, text: &str) -> Result<String, &'static str> {
        // libphonenumber ignores the default region for a number that names its country; the
        // crate would strip that region's national prefix from it.
        let region = (!names_its_country(text)).then_some(self.region);
        let number = phonenumber::parse(region, text).map_err(|_| NOT_A_NUMBER)?;
        let code = number.code().value();
        let e164 = number.format().mode(Mode::E164).to_string();
        let national = e164.strip_prefix(&format!("+{code}")).ok_or(NOT_A_NUMBER)?;
        if is_valid(code, national) { Ok(e164) } else { Err(NOT_VALID) }
    }
}

/// A number written with digits and separators only, after an optional `+`: whether it had
/// the `+`, and its digits. `None` for any other spelling.
fn plain_digits(text: &str) -> Option<(bool, String)> {
    let (plus, rest) = match text.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let plain = rest.chars().all(|c| c.is_ascii_digit() || c.is_whitespace() || "-./()[]~".contains(c));
    plain.then(|| (plus, rest.chars().filter(char::is_ascii_digit).collect()))
}

fn names_its_country(text: &str) -> bool {
    let number = match text.get(..4) {
        Some(scheme) if scheme.eq_ignore_ascii_case("tel:") => &text[4..],
        _ => text,
    };
    number.trim_start().starts_with(['+', '\u{FF0B}'])
}

/// libphonenumber's `parse` of a number's digits (`+` stripped) followed by its
/// `isValidNumber`, with `region` the default region.
fn read(region: &Metadata, plus: bool, digits: &str) -> Result<String, &'static str> {
    if digits.len() < MIN_NATIONAL_LENGTH {
        return Err(NOT_A_NUMBER);
    }
    // A number dialled from the default region to another country starts with that region's
    // international prefix (011 in the US, 00 in most of Europe) instead of `+`.
    let after_idd = || {
        let idd = region.international_prefix()?.find(digits).filter(|found| found.start() == 0)?;
        // Country codes never start with 0, so a 0 there means this was no prefix.
        Some(&digits[idd.end()..]).filter(|rest| !rest.starts_with('0'))
    };
    let international = if plus { Some(digits) } else { after_idd() };
    let (code, national, metadata) = match international {
        Some(international) => {
            if international.len() <= MIN_NATIONAL_LENGTH {
                return Err(NOT_A_NUMBER);
            }
            let (code, national) = split_country_code(international).ok_or(NOT_A_NUMBER)?;
            (code, national.to_owned(), main_metadata(code).ok_or(NOT_A_NUMBER)?)
        }
        None => national_in_region(region, digits),
    };
    if national.len() < MIN_NATIONAL_LENGTH {
        return Err(NOT_A_NUMBER);
    }
    // The national prefix (a trunk 0, or 8 in Russia) is kept where dropping it leaves too few
    // digits for the country, or a length that only dials locally.
    let national = match strip_national_prefix(metadata, &national) {
        Some(stripped)
            if !matches!(length(metadata, &stripped), Length::TooShort | Length::LocalOnly | Length::Invalid) =>
        {
            stripped
        }
        _ => national,
    };
    if !(MIN_NATIONAL_LENGTH..=MAX_NATIONAL_LENGTH).contains(&national.len()) {
        return Err(NOT_A_NUMBER);
    }
    if is_valid(code, &national) { Ok(format!("+{code}{national}")) } else { Err(NOT_VALID) }
}

/// libphonenumber's `extractCountryCode`: the shortest leading digits that are a country code
/// (no country code is a prefix of another).
fn split_country_code(digits: &str) -> Option<(u16, &str)> {
    if digits.starts_with('0') {
        return None;
    }
    (1..=MAX_COUNTRY_CODE_LENGTH.min(digits.len())).find_map(|length| {
        let code: u16 = digits[..length].parse().ok()?;
        DATABASE.by_code(&code).map(|_| (code, &digits[length..]))
    })
}

/// The metadata libphonenumber reads a country code's numbers with: its main region's (the
/// US for +1, the UK for +44), or the non-geographic entity's for codes such as +800.
fn main_metadata(code: u16) -> Option<&'static Metadata> {
    DATABASE.by_code(&code)?.first().copied()
}

/// The country code branch of libphonenumber's `maybeExtractCountryCode` for a number written
/// without `+` or international prefix: the default region's, unless the digits start with it
/// and are only a number once it is removed (or are too long to be one with it).
fn national_in_region<'a>(region: &'a Metadata, digits: &str) -> (u16, String, &'a Metadata) {
    let code = region.country_code();
    if let Some(rest) = digits.strip_prefix(&code.to_string()) {
        let rest = strip_national_prefix(region, rest).unwrap_or_else(|| rest.to_owned());
        if (!viable(region, digits) && viable(region, &rest)) || length(region, digits) == Length::TooLong {
            // A country code read from the digits is then read like one after `+`.
            return (code, rest, main_metadata(code).unwrap_or(region));
        }
    }
    (code, digits.to_owned(), region)
}

/// libphonenumber's `maybeStripNationalPrefixAndCarrierCode`: the number without its national
/// prefix (transformed where the country has a rule for it), or `None` to keep it as it is.
fn strip_national_prefix(metadata: &Metadata, number: &str) -> Option<String> {
    if number.is_empty() {
        return None;
    }
    let viable_as_written = viable(metadata, number);
    let kept_viable = |stripped: String| (!viable_as_written || viable(metadata, &stripped)).then_some(stripped);
    let Some(pattern) = metadata.national_prefix_for_parsing() else {
        // libphonenumber parses with the plain national prefix where no pattern is given.
        let prefix = metadata.national_prefix().filter(|prefix| !prefix.is_empty())?;
        return kept_viable(number.strip_prefix(prefix)?.to_owned());
    };
    let captures = pattern.captures(number).filter(|captures| captures.get(0).is_some_and(|all| all.start() == 0))?;
    let last_group = captures.len() - 1;
    match metadata.national_prefix_transform_rule().filter(|rule| !rule.is_empty()) {
        Some(rule) if captures.get(last_group).is_some() => kept_viable(pattern.replace(number, rule).into_owned()),
        _ => kept_viable(number[captures.get(0)?.end()..].to_owned()),
    }
}

/// Whether the digits fit the country's general pattern at all (libphonenumber's test before
/// and after dropping a prefix).
fn viable(metadata: &Metadata, national: &str) -> bool {
    whole_match(metadata.descriptors().general(), national)
}

#[derive(Debug, PartialEq)]
enum Length {
    Possible,
    LocalOnly,
    TooShort,
    TooLong,
    Invalid,
}

/// The number types libphonenumber checks, in its order.
fn number_types(metadata: &Metadata) -> impl Iterator<Item = &Descriptor> {
    let types = metadata.descriptors();
    [
        types.premium_rate(),
        types.toll_free(),
        types.shared_cost(),
        types.voip(),
        types.personal_number(),
        types.pager(),
        types.uan(),
        types.voicemail(),
        types.fixed_line(),
        types.mobile(),
    ]
    .into_iter()
    .flatten()
}

/// libphonenumber's `testNumberLength` for an unknown type. Its general possible lengths are
/// those of all number types, which libphonenumber's metadata build derives and the crate's
/// does not, so they are derived here.
fn length(metadata: &Metadata, national: &str) -> Length {
    let mut possible: Vec<u16> =
        number_types(metadata).flat_map(|kind| kind.possible_length().iter().copied()).collect();
    possible.sort_unstable();
    possible.dedup();
    let Ok(length) = u16::try_from(national.len()) else {
        return Length::TooLong;
    };
    let local_only = !possible.contains(&length)
        && number_types(metadata).any(|kind| kind.possible_local_length().contains(&length));
    match (possible.first(), possible.last()) {
        _ if local_only => Length::LocalOnly,
        (Some(&shortest), _) if length < shortest => Length::TooShort,
        (_, Some(&longest)) if length > longest => Length::TooLong,
        _ if possible.contains(&length) => Length::Possible,
        _ => Length::Invalid,
    }
}

/// libphonenumber's `isValidNumber`: the number is of a known type in the region its country
/// code and leading digits point to.
fn is_valid(code: u16, national: &str) -> bool {
    let Some(regions) = DATABASE.by_code(&code) else {
        return false;
    };
    let region = match regions.as_slice() {
        [only] => Some(*only),
        // Countries sharing a code (NANP, +44, +7, ...), main country first.
        _ => regions.iter().copied().find(|region| match region.leading_digits() {
            Some(leading) => leading.find(national).is_some_and(|found| found.start() == 0),
            None => has_known_type(region, national),
        }),
    };
    region.is_some_and(|region| has_known_type(region, national))
}

fn has_known_type(metadata: &Metadata, national: &str) -> bool {
    viable(metadata, national) && number_types(metadata).any(|kind| whole_match(kind, national))
}

/// Whether the pattern matches the whole number, as Java's `matches()` in libphonenumber: the
/// crate's own `Descriptor::is_match` accepts a match of the number's first digits.
fn whole_match(descriptor: &Descriptor, national: &str) -> bool {
    let lengths = descriptor.possible_length();
    if !lengths.is_empty() && !u16::try_from(national.len()).is_ok_and(|length| lengths.contains(&length)) {
        return false;
    }
    let anchored = format!("^(?:{})$", descriptor.national_number().as_str());
    let cache = DATABASE.cache();
    // A poisoned cache only means another thread panicked mid-compile; its entries stay sound.
    let mut cache = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // The metadata's patterns are laid out over several lines, as the crate compiles them.
    cache
        .configure(&anchored, |builder| builder.ignore_whitespace(true))
        .is_ok_and(|pattern| pattern.is_match(national))
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
    fn a_number_naming_its_country_ignores_the_default_region() {
        let us = PhoneRules::default();
        for spelling in ["+44 121 234 5678", "011 44 121 234 5678", "tel:+44-121-234-5678", "+441212345678"] {
            assert_eq!(us.normalise(spelling).as_deref(), Ok("+441212345678"), "{spelling}");
        }
        assert_eq!(us.normalise("+33 1 23 45 67 89").as_deref(), Ok("+33123456789"));
        let de = PhoneRules::for_region("DE").unwrap();
        assert_eq!(de.normalise("00 33 1 23 45 67 89").as_deref(), Ok("+33123456789"));
    }

    #[test]
    fn a_national_prefix_is_dropped_only_where_libphonenumber_drops_it() {
        let us = PhoneRules::default();
        let ru = PhoneRules::for_region("RU").unwrap();
        // Russian toll-free numbers start with 8, Russia's national prefix.
        assert_eq!(us.normalise("+7 800 123-45-67").as_deref(), Ok("+78001234567"));
        assert_eq!(ru.normalise("8 (800) 123-45-67").as_deref(), Ok("+78001234567"));
        assert_eq!(ru.normalise("8 (812) 123-45-67").as_deref(), Ok("+78121234567"));
        // Rwanda's code is 250, and so are the first digits of its fixed lines.
        let rw = PhoneRules::for_region("RW").unwrap();
        assert_eq!(rw.normalise("250 123 456").as_deref(), Ok("+250250123456"));
        assert_eq!(rw.normalise("0720 123 456").as_deref(), Ok("+250720123456"));
    }

    #[test]
    fn a_valid_number_with_a_digit_too_many_is_refused() {
        let us = PhoneRules::default();
        assert_eq!(us.normalise("+48 123 456 789").as_deref(), Ok("+48123456789"));
        assert_eq!(us.normalise("+48 123 456 7895"), Err(NOT_VALID));
        assert_eq!(us.normalise("(415) 555-26710"), Err(NOT_VALID));
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
