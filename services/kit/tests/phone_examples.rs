//! `PhoneRules::normalise` against libphonenumber, over the lists that
//! `tests/data/generate_phone_examples.py` writes with Python's `phonenumbers`. Each test
//! reports every disagreement, not only the first.

use switchboard_kit::phone::PhoneRules;

/// The rows of a generated list, without its `#` comments, split at tabs.
fn rows(name: &str) -> Vec<Vec<String>> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| line.split('\t').map(str::to_owned).collect())
        .collect()
}

fn report(list: &str, checked: usize, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} of {checked} readings of {list} disagree with libphonenumber:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn libphonenumber_example_numbers_are_read_as_libphonenumber_reads_them() {
    let rows = rows("phone_examples.tsv");
    // Fixed line, mobile and toll-free examples of the 245 regions of phonenumbers 9.0.
    assert!(rows.len() > 600, "only {} example numbers", rows.len());
    let us = PhoneRules::default();
    let mut failures = Vec::new();
    let mut checked = 0;
    for row in &rows {
        let [region, kind, e164, international, national] = row.as_slice() else {
            panic!("not 5 columns: {row:?}");
        };
        let mut check = |rules: &PhoneRules, region_name: &str, text: &str| {
            checked += 1;
            let read = rules.normalise(text);
            if read.as_deref() != Ok(e164.as_str()) {
                failures.push(format!("{region} {kind}: {text:?} in {region_name} is {read:?}, not {e164}"));
            }
        };
        check(&us, "US", international);
        check(&us, "US", e164);
        match PhoneRules::for_region(region) {
            Ok(rules) => check(&rules, region, national),
            Err(error) => {
                checked += 1;
                failures.push(format!("{region} {kind}: {national:?} not read: {error}"));
            }
        }
    }
    report("phone_examples.tsv", checked, &failures);
}

#[test]
fn near_misses_are_read_or_refused_as_libphonenumber_does() {
    let rows = rows("phone_near_misses.tsv");
    assert!(rows.len() > 2000, "only {} near misses", rows.len());
    let mut failures = Vec::new();
    for row in &rows {
        let [region, text, expected] = row.as_slice() else {
            panic!("not 3 columns: {row:?}");
        };
        let read = match PhoneRules::for_region(region) {
            Ok(rules) => rules.normalise(text).ok(),
            Err(error) => {
                failures.push(format!("{text:?} in {region} not read: {error}"));
                continue;
            }
        };
        let expected = (expected != "refused").then_some(expected.as_str());
        if read.as_deref() != expected {
            let expected = expected.unwrap_or("refused");
            failures.push(format!("{text:?} in {region} is {read:?}, not {expected}"));
        }
    }
    report("phone_near_misses.tsv", rows.len(), &failures);
}
