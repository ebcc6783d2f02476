//! Cells of the CSV files the platform writes, made safe to open in a spreadsheet (OWASP, "CSV
//! Injection"). Excel, LibreOffice and Google Sheets run a cell that begins with `=`, `+`, `-` or
//! `@` as a formula (and tab or carriage return can hide such a beginning), so a caller who
//! steers a call's summary, or anyone who names an agent, could put `=HYPERLINK(...)` or a DDE
//! command before an analyst. Such a cell gets a leading `'`, which spreadsheets read as "this
//! is text". Numbers and E.164 phone numbers are left as they are: a spreadsheet reads them as
//! the number they are, and no formula fits in digits.

/// `text` as a cell no spreadsheet runs.
pub fn cell(text: String) -> String {
    let triggers = ['=', '+', '-', '@', '\t', '\r'];
    if !text.starts_with(triggers) || is_number(&text) || is_e164(&text) {
        return text;
    }
    format!("'{text}")
}

/// A plain decimal number, as the export writes them (`-12`, `0.5`, `1e-3`).
fn is_number(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && digits.starts_with(|c: char| c.is_ascii_digit())
        && digits.parse::<f64>().is_ok_and(f64::is_finite)
}

/// `+` and 1 to 15 digits.
fn is_e164(text: &str) -> bool {
    text.strip_prefix('+')
        .is_some_and(|digits| (1..=15).contains(&digits.len()) && digits.bytes().all(|byte| byte.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn formulas_become_text() {
        for formula in [
            "=HYPERLINK(\"https://evil.example\",\"Click\")",
            "+cmd|' /C calc'!A0",
            "-2+3+cmd|' /C calc'!A0",
            "@SUM(1+1)*cmd|' /C calc'!A0",
            "\t=1+1",
            "\r=1+1",
            "=",
            "-",
            "+1 (415) 555-2671",
            "-inf",
            "-NaN",
        ] {
            assert_eq!(cell(formula.to_owned()), format!("'{formula}"));
        }
    }

    #[test]
    fn text_numbers_and_phone_numbers_stay() {
        for plain in ["", "Front desk", "a=b", "2026-03-01T10:00:00.000Z", "42", "-12", "-0.5", "1e-3", "+14155552671"]
        {
            assert_eq!(cell(plain.to_owned()), plain);
        }
        assert_eq!(cell("+1234567890123456".to_owned()), "'+1234567890123456", "16 digits is no E.164 number");
    }
}
