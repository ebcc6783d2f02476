//! The text that a search of conversations reads: rows of `call_search` / `chat_search`
//! (one per source: a call's numbers and summary, each append of transcript segments; a
//! chat's contact, each append of messages), lowercased here. Finding and paging them is
//! `switchboard_kit::listing`'s, shared with the other stores that search.

use sqlx::AnyConnection;
use switchboard_kit::ServiceResult;
use switchboard_kit::db::Engine;
use switchboard_kit::listing::TextIndex;
use switchboard_kit::signature::{self, Signature};

/// Which conversations a search row belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Call,
    Chat,
}

impl Kind {
    /// Where its search rows are.
    pub(super) const fn index(self) -> &'static TextIndex {
        match self {
            Kind::Call => &CALL_TEXT,
            Kind::Chat => &CHAT_TEXT,
        }
    }

    fn table(self) -> &'static str {
        self.index().table
    }

    fn owner_column(self) -> &'static str {
        self.index().owner_column
    }

    /// The table of the conversations themselves.
    fn owner_table(self) -> &'static str {
        match self {
            Kind::Call => "calls",
            Kind::Chat => "chats",
        }
    }
}

/// A search finding 2,000 rows or more is frequent: carrying more cost more than it saved
/// (BENCHMARKS.md, "Why the lists are planned the way they are").
const CARRIED_ROWS: i64 = 2_000;
const CALL_TEXT: TextIndex = TextIndex {
    table: "call_search",
    fts_table: "call_search_fts",
    owner_column: "call_id",
    carried_rows: CARRIED_ROWS,
    signature_column: Some(SIGNATURE_COLUMN),
};
const CHAT_TEXT: TextIndex = TextIndex {
    table: "chat_search",
    fts_table: "chat_search_fts",
    owner_column: "chat_id",
    carried_rows: CARRIED_ROWS,
    signature_column: Some(SIGNATURE_COLUMN),
};

/// The column of `calls` and `chats` (PostgreSQL only) holding the signature of all their
/// search text: see `switchboard_kit::signature` and migration 0004.
const SIGNATURE_COLUMN: &str = "text_signature";

/// The column and value an INSERT of a new call or chat adds so that its signature starts
/// empty and gains the bits of its texts (PostgreSQL; nothing on SQLite). Rows written without
/// it get the column's default, every bit set, which is always safe: such rows are probed.
pub(super) fn empty_signature(conn: &AnyConnection) -> (String, String) {
    match Engine::of(conn) {
        Engine::Postgres => (format!(", {SIGNATURE_COLUMN}"), format!(", B'0'::{}", signature::SQL_TYPE)),
        Engine::Sqlite => (String::new(), String::new()),
    }
}

/// What a search row holds: see the migration's `source` check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// A call's numbers and summary (one row per call).
    Meta,
    /// One append of transcript segments.
    Transcript,
    /// A chat's contact number and e-mail (one row per chat).
    Contact,
    /// One append of chat messages.
    Messages,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::Meta => "meta",
            Source::Transcript => "transcript",
            Source::Contact => "contact",
            Source::Messages => "messages",
        }
    }
}

/// The searchable form of some texts: lowercased, one per line, empty ones left out.
fn body<'a>(texts: impl IntoIterator<Item = &'a str>) -> String {
    let lines: Vec<&str> = texts.into_iter().filter(|text| !text.is_empty()).collect();
    lines.join("\n").to_lowercase()
}

/// Adds a row of searchable text to a conversation (nothing when all texts are empty).
pub(super) async fn add(
    conn: &mut AnyConnection,
    kind: Kind,
    (owner_id, team_id): (&str, &str),
    source: Source,
    texts: impl IntoIterator<Item = &str>,
) -> ServiceResult<()> {
    let body = body(texts);
    if body.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "INSERT INTO {} ({}, team_id, source, body) VALUES ($1, $2, $3, $4)",
        kind.table(),
        kind.owner_column()
    );
    let signature = Signature::of(&body);
    sqlx::query(&sql).bind(owner_id).bind(team_id).bind(source.as_str()).bind(body).execute(&mut *conn).await?;
    // PostgreSQL's frequent searches check the signature before the text (SQLite's FTS5
    // index answers them without walking).
    if Engine::of(conn) == Engine::Postgres && !signature.is_empty() {
        let sql = format!(
            "UPDATE {} SET {SIGNATURE_COLUMN} = {SIGNATURE_COLUMN} | $1::{} WHERE id = $2",
            kind.owner_table(),
            signature::SQL_TYPE
        );
        sqlx::query(&sql).bind(signature.bit_string()).bind(owner_id).execute(conn).await?;
    }
    Ok(())
}

/// Replaces the conversation's row of `source` (its numbers and summary, its contact).
pub(super) async fn replace(
    conn: &mut AnyConnection,
    kind: Kind,
    owner: (&str, &str),
    source: Source,
    texts: impl IntoIterator<Item = &str>,
) -> ServiceResult<()> {
    let sql = format!("DELETE FROM {} WHERE {} = $1 AND source = $2", kind.table(), kind.owner_column());
    sqlx::query(&sql).bind(owner.0).bind(source.as_str()).execute(&mut *conn).await?;
    add(conn, kind, owner, source, texts).await
}

/// Removes every search row of a conversation that is being deleted.
pub(super) async fn forget(conn: &mut AnyConnection, kind: Kind, owner_id: &str) -> ServiceResult<()> {
    let sql = format!("DELETE FROM {} WHERE {} = $1", kind.table(), kind.owner_column());
    sqlx::query(&sql).bind(owner_id).execute(conn).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_lowercase_lines_without_empty_ones() {
        assert_eq!(body(["+1415", "", "Zürich SUMMARY"]), "+1415\nzürich summary");
    }
}
