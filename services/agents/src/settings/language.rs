//! BCP 47 language tags (RFC 5646 section 2.1), checked for their syntax only: the subtag
//! registry changes and a runtime's speech provider decides what it supports, so a
//! well-formed tag such as `en-US`, `zh-Hant-TW` or `de-CH-1996` is accepted.

/// Whether `tag` is a well-formed language tag (case-insensitive, `-` separated).
pub fn is_language_tag(tag: &str) -> bool {
    let subtags: Vec<&str> = tag.split('-').collect();
    if subtags.iter().any(|s| s.is_empty() || s.len() > 8 || !s.chars().all(|c| c.is_ascii_alphanumeric())) {
        return false;
    }
    if subtags[0].eq_ignore_ascii_case("x") {
        return private_use(&subtags[1..]);
    }
    let mut rest = &subtags[..];
    // language: 2-3 letters (then up to three 3-letter extlangs), or 4 to 8 letters.
    let Some((language, tail)) = rest.split_first() else {
        return false;
    };
    if !alpha(language, 2, 8) {
        return false;
    }
    rest = tail;
    if language.len() <= 3 {
        let extlangs = rest.iter().take(3).take_while(|s| alpha(s, 3, 3)).count();
        rest = &rest[extlangs..];
    }
    if rest.first().is_some_and(|s| alpha(s, 4, 4)) {
        rest = &rest[1..];
    }
    if rest.first().is_some_and(|s| alpha(s, 2, 2) || (s.len() == 3 && s.chars().all(|c| c.is_ascii_digit()))) {
        rest = &rest[1..];
    }
    while rest.first().is_some_and(|s| is_variant(s)) {
        rest = &rest[1..];
    }
    let mut singletons = Vec::new();
    while let Some((singleton, tail)) = rest.split_first() {
        if singleton.eq_ignore_ascii_case("x") {
            return private_use(tail);
        }
        let singleton = singleton.to_ascii_lowercase();
        if singleton.len() != 1 || singletons.contains(&singleton) {
            return false;
        }
        let extension = tail.iter().take_while(|s| s.len() >= 2).count();
        if extension == 0 {
            return false;
        }
        singletons.push(singleton);
        rest = &tail[extension..];
    }
    true
}

fn alpha(subtag: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&subtag.len()) && subtag.chars().all(|c| c.is_ascii_alphabetic())
}

/// 5 to 8 letters or digits, or a digit and three more.
fn is_variant(subtag: &str) -> bool {
    subtag.len() >= 5 || (subtag.len() == 4 && subtag.starts_with(|c: char| c.is_ascii_digit()))
}

fn private_use(subtags: &[&str]) -> bool {
    !subtags.is_empty()
}

#[cfg(test)]
mod tests {
    use super::is_language_tag;

    #[test]
    fn well_formed_tags_pass() {
        for tag in ["en", "en-US", "zh-Hant-TW", "de-CH-1996", "es-419", "sr-Latn-RS", "en-US-x-twain", "x-klingon"] {
            assert!(is_language_tag(tag), "{tag}");
        }
    }

    #[test]
    fn malformed_tags_fail() {
        for tag in ["", "e", "en_US", "en-", "-en", "en--US", "en-US-a", "en-a-bb-a-cc", "12", "en-toolongsubtag"] {
            assert!(!is_language_tag(tag), "{tag}");
        }
    }
}
