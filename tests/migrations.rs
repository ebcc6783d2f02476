//! A rolling upgrade runs two releases side by side on one database, so every migration must
//! leave the schema usable by the release before it (docs/deploy.md, "Upgrades"): it may add
//! tables, columns with a default, and indexes, and drop indexes, but a table or column is
//! dropped, renamed, retyped or made NOT NULL only after an earlier migration has retired it:
//! a `-- retired: <table>[.<column>]` line saying that from that release on no code reads or
//! writes it. The drop then ships in a later release (expand, then contract).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One migration file of one service and engine.
struct Migration {
    number: u32,
    name: String,
    sql: String,
}

/// What one migration does that the release before it would not survive, in words.
fn breaking_changes(sql: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for statement in statements(sql) {
        let words: Vec<&str> = statement.iter().map(String::as_str).collect();
        match words.as_slice() {
            ["DROP", "TABLE", rest @ ..] => {
                for table in top_level(skip_if_exists(rest)) {
                    if let Some(name) = table.first() {
                        found.push((object(name, None), "drops the table".to_owned()));
                    }
                }
            }
            ["ALTER", "TABLE", rest @ ..] => {
                let rest = skip_if_exists(rest);
                let rest = rest.strip_prefix(&["ONLY"]).unwrap_or(rest);
                let Some((table, actions)) = rest.split_first() else { continue };
                for action in top_level(actions) {
                    if let Some(change) = table_action(table, action) {
                        found.push(change);
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// The breaking change one action of an `ALTER TABLE` makes, if it makes one.
fn table_action(table: &str, action: &[&str]) -> Option<(String, String)> {
    let column_of = |rest: &[&str]| -> Option<String> {
        let rest = rest.strip_prefix(&["COLUMN"]).unwrap_or(rest);
        skip_if_exists(rest).first().map(|column| object(table, Some(column)))
    };
    match action {
        ["DROP", "CONSTRAINT", ..] => None,
        ["DROP", rest @ ..] => Some((column_of(rest)?, "drops the column".to_owned())),
        ["RENAME", "TO", ..] => Some((object(table, None), "renames the table".to_owned())),
        ["RENAME", rest @ ..] => Some((column_of(rest)?, "renames the column".to_owned())),
        ["ALTER", rest @ ..] => {
            let changes_type = action.windows(2).any(|pair| pair == ["SET", "DATA"]) || action.contains(&"TYPE");
            let sets_not_null = action.windows(3).any(|words| words == ["SET", "NOT", "NULL"]);
            if changes_type {
                Some((column_of(rest)?, "changes the column's type".to_owned()))
            } else if sets_not_null {
                Some((column_of(rest)?, "makes the column NOT NULL".to_owned()))
            } else {
                None
            }
        }
        ["ADD", rest @ ..] => {
            // The release before inserts rows without the new column: NOT NULL needs a default.
            let rest = rest.strip_prefix(&["COLUMN"]).unwrap_or(rest);
            let rest = rest.strip_prefix(&["IF", "NOT", "EXISTS"]).unwrap_or(rest);
            let not_null = action.windows(2).any(|pair| pair == ["NOT", "NULL"]);
            if matches!(rest.first(), Some(&("CONSTRAINT" | "PRIMARY" | "UNIQUE" | "FOREIGN" | "CHECK")))
                || !not_null
                || action.contains(&"DEFAULT")
            {
                None
            } else {
                Some((object(table, rest.first().copied()), "adds a NOT NULL column without a default".to_owned()))
            }
        }
        _ => None,
    }
}

/// `words` split at the commas outside parentheses (`NUMERIC(10, 2)` stays whole).
fn top_level<'a>(words: &'a [&'a str]) -> Vec<&'a [&'a str]> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (at, word) in words.iter().enumerate() {
        match *word {
            "(" => depth += 1,
            ")" => depth = depth.saturating_sub(1),
            "," if depth == 0 => {
                parts.push(&words[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&words[start..]);
    parts
}

fn skip_if_exists<'a>(words: &'a [&'a str]) -> &'a [&'a str] {
    words.strip_prefix(&["IF", "EXISTS"]).unwrap_or(words)
}

/// `table` or `table.column`, lower case and unquoted, as `-- retired:` lines name them.
fn object(table: &str, column: Option<&str>) -> String {
    let clean = |name: &str| name.trim_matches('"').to_lowercase();
    match column {
        Some(column) => format!("{}.{}", clean(table), clean(column)),
        None => clean(table),
    }
}

/// The statements of `sql` as upper-case words, commas and parentheses words of their own,
/// comments and string literals left out (a default's text is not a statement's word).
fn statements(sql: &str) -> Vec<Vec<String>> {
    let mut statements = vec![Vec::new()];
    let mut word = String::new();
    let mut chars = sql.chars().peekable();
    let push = |statements: &mut Vec<Vec<String>>, word: String| {
        if let Some(statement) = statements.last_mut() {
            statement.push(word);
        }
    };
    let flush = |word: &mut String, statements: &mut Vec<Vec<String>>| {
        if !word.is_empty() {
            let upper = if word.starts_with('"') { word.clone() } else { word.to_uppercase() };
            push(statements, upper);
            word.clear();
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '-' if chars.peek() == Some(&'-') => {
                flush(&mut word, &mut statements);
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '\'' => {
                flush(&mut word, &mut statements);
                while let Some(c) = chars.next() {
                    if c == '\'' && chars.next_if_eq(&'\'').is_none() {
                        break;
                    }
                }
                push(&mut statements, "'…'".to_owned());
            }
            ';' => {
                flush(&mut word, &mut statements);
                statements.push(Vec::new());
            }
            '(' | ')' | ',' => {
                flush(&mut word, &mut statements);
                push(&mut statements, c.to_string());
            }
            c if c.is_whitespace() => flush(&mut word, &mut statements),
            c => word.push(c),
        }
    }
    flush(&mut word, &mut statements);
    statements.retain(|statement| !statement.is_empty());
    statements
}

/// The objects a migration retires (`-- retired: calls.legacy, old_table`).
fn retired(sql: &str) -> BTreeSet<String> {
    sql.lines()
        .filter_map(|line| line.trim().strip_prefix("--")?.trim().strip_prefix("retired:"))
        .flat_map(|names| names.split(','))
        .map(|name| name.trim().to_lowercase())
        .filter(|name| !name.is_empty())
        .collect()
}

/// Every change in `migrations` (one service and engine, in order) that the release before
/// it would not survive.
fn violations(migrations: &[Migration]) -> Vec<String> {
    let mut retired_before = BTreeSet::new();
    let mut problems = Vec::new();
    for migration in migrations {
        for (object, change) in breaking_changes(&migration.sql) {
            if !retired_before.contains(&object) {
                let hint = if retired(&migration.sql).contains(&object) {
                    "it is retired in this same migration, which ships in the same release"
                } else {
                    "no earlier migration retires it"
                };
                problems.push(format!("{}: {change} {object}, but {hint}", migration.name));
            }
        }
        retired_before.extend(retired(&migration.sql));
    }
    problems
}

/// Each service's migrations of each engine, in order of their numbers.
fn migration_sets(root: &Path) -> Vec<(PathBuf, Vec<Migration>)> {
    let mut sets = Vec::new();
    let mut services: Vec<PathBuf> =
        std::fs::read_dir(root.join("services")).unwrap().map(|entry| entry.unwrap().path()).collect();
    services.sort();
    for service in services {
        for engine in ["postgres", "sqlite"] {
            let dir = service.join("migrations").join(engine);
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            let mut migrations: Vec<Migration> = entries
                .map(|entry| entry.unwrap().path())
                .filter(|path| path.extension().is_some_and(|extension| extension == "sql"))
                .map(|path| {
                    let name = path.strip_prefix(root).unwrap().display().to_string();
                    let file = path.file_name().unwrap().to_string_lossy().into_owned();
                    let number = file.split('_').next().and_then(|digits| digits.parse().ok());
                    let number = number.unwrap_or_else(|| panic!("{name}: a migration's name starts with its number"));
                    Migration { number, name, sql: std::fs::read_to_string(&path).unwrap() }
                })
                .collect();
            migrations.sort_by_key(|migration| migration.number);
            sets.push((dir, migrations));
        }
    }
    sets
}

#[test]
fn every_migration_leaves_the_schema_usable_by_the_release_before() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sets = migration_sets(root);
    assert!(sets.len() >= 12, "expected both engines' migrations of six services, found {} sets", sets.len());
    let problems: Vec<String> = sets.iter().flat_map(|(_, migrations)| violations(migrations)).collect();
    assert!(
        problems.is_empty(),
        "migrations a rolling upgrade would break on (docs/deploy.md):\n{}",
        problems.join("\n")
    );
}

fn migrations(files: &[&str]) -> Vec<Migration> {
    files
        .iter()
        .enumerate()
        .map(|(index, sql)| Migration {
            number: u32::try_from(index + 1).unwrap(),
            name: format!("{:04}.sql", index + 1),
            sql: (*sql).to_owned(),
        })
        .collect()
}

#[test]
fn drops_renames_and_retypes_need_an_earlier_retirement() {
    for (sql, object) in [
        ("DROP TABLE IF EXISTS legacy;", "legacy"),
        ("ALTER TABLE calls DROP COLUMN summary;", "calls.summary"),
        ("alter table \"calls\" drop summary", "calls.summary"),
        ("ALTER TABLE calls RENAME COLUMN summary TO abstract;", "calls.summary"),
        ("ALTER TABLE calls RENAME TO phone_calls;", "calls"),
        ("ALTER TABLE calls ALTER COLUMN duration TYPE BIGINT;", "calls.duration"),
        ("ALTER TABLE calls ALTER COLUMN summary SET NOT NULL;", "calls.summary"),
        ("ALTER TABLE calls ADD COLUMN x INT, DROP COLUMN summary;", "calls.summary"),
        ("ALTER TABLE calls ADD COLUMN rating INTEGER NOT NULL;", "calls.rating"),
        (
            "ALTER TABLE calls ADD COLUMN cost NUMERIC(10, 2), ALTER COLUMN duration SET DATA TYPE BIGINT;",
            "calls.duration",
        ),
    ] {
        let problems = violations(&migrations(&["CREATE TABLE calls (id TEXT);", sql]));
        assert_eq!(problems.len(), 1, "{sql}: {problems:?}");
        assert!(problems[0].contains(object), "{sql}: {problems:?}");

        let prepared = format!("-- retired: {object}\nSELECT 1;");
        assert!(violations(&migrations(&["CREATE TABLE calls (id TEXT);", &prepared, sql])).is_empty(), "{sql}");
        let same_release = format!("-- retired: {object}\n{sql}");
        let problems = violations(&migrations(&["CREATE TABLE calls (id TEXT);", &same_release]));
        assert!(problems.len() == 1 && problems[0].contains("same migration"), "{sql}: {problems:?}");
    }
}

#[test]
fn additions_index_changes_and_defaults_are_additive() {
    let additive = [
        "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL);",
        "ALTER TABLE calls ADD COLUMN rating INTEGER;",
        "ALTER TABLE calls ADD COLUMN method TEXT NOT NULL DEFAULT 'password';",
        "ALTER TABLE calls ADD CONSTRAINT calls_rating CHECK (rating > 0), DROP CONSTRAINT old_check;",
        "DROP INDEX calls_started; CREATE INDEX calls_started ON calls (team_id, started_at);",
        "ALTER TABLE calls ALTER COLUMN rating SET DEFAULT 0; ALTER TABLE calls ALTER COLUMN rating DROP NOT NULL;",
        // A word in a default or a comment is not a statement: '-- DROP TABLE calls;'
        "INSERT INTO notes (id, body) VALUES ('1', 'DROP TABLE calls; ALTER TABLE calls DROP x');",
    ];
    for sql in additive {
        assert!(breaking_changes(sql).is_empty(), "{sql}: {:?}", breaking_changes(sql));
    }
}
