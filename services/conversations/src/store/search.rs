//! Finding conversations: the text that `search` reads, the WHERE clause a list is filtered
//! by, and paging over a sort key that may be NULL.
//!
//! Search is a case-insensitive substring match, served by a trigram index so that it does
//! not read every row of the team:
//! - the text lives in `call_search` / `chat_search`, lowercased here (Rust's Unicode
//!   lowercase, so that `Zürich` and `ZÜRICH` agree on both engines whatever the database's
//!   locale), one row per source: a call's numbers and summary, each append of transcript
//!   segments; a chat's contact, each append of messages. Texts of one append are joined by
//!   a newline, which no query can span since queries are one line.
//! - SQLite: an FTS5 table with the `trigram` tokenizer over those rows (kept in step by
//!   triggers), queried with `MATCH` on a quoted phrase: a phrase of trigrams at consecutive
//!   positions is exactly a substring.
//! - PostgreSQL: a GIN `gin_trgm_ops` index over the rows, queried with `LIKE '%…%'` (the text
//!   and the query are lowercased already, so `LIKE` is the case-insensitive match).
//!
//! A query shorter than 3 characters has no trigram: it is answered by `LIKE` over the
//! team's rows, which is correct but NOT indexed (it reads every search row of the team).

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{Any, AnyConnection, Row};
use switchboard_kit::ServiceResult;
use switchboard_kit::db::Engine;

/// A statement of the `Any` driver, as built with `sqlx::query`.
pub(super) type Query<'q> = sqlx::query::Query<'q, Any, AnyArguments<'q>>;

/// Which conversations a search row belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Call,
    Chat,
}

impl Kind {
    fn table(self) -> &'static str {
        match self {
            Kind::Call => "call_search",
            Kind::Chat => "chat_search",
        }
    }

    fn fts_table(self) -> &'static str {
        match self {
            Kind::Call => "call_search_fts",
            Kind::Chat => "chat_search_fts",
        }
    }

    fn owner_column(self) -> &'static str {
        match self {
            Kind::Call => "call_id",
            Kind::Chat => "chat_id",
        }
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
    sqlx::query(&sql).bind(owner_id).bind(team_id).bind(source.as_str()).bind(body).execute(conn).await?;
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

/// `%`, `_` and `\` stand for themselves in the `LIKE` pattern (with `ESCAPE '\'`).
fn like_pattern(query: &str) -> String {
    let mut pattern = String::with_capacity(query.len() + 2);
    pattern.push('%');
    for c in query.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// An FTS5 string: the whole query as one phrase, `"` doubled.
fn fts_phrase(query: &str) -> String {
    format!("\"{}\"", query.replace('"', "\"\""))
}

/// The values bound to a statement, in placeholder order.
#[derive(Debug, Clone)]
pub(super) enum Arg {
    Text(String),
    Int(i64),
}

/// The conditions of a list query, ANDed, with their values: each condition names its values
/// by the placeholders [`Filter::arg`] hands out.
#[derive(Debug, Clone, Default)]
pub(super) struct Filter {
    team_id: String,
    conditions: Vec<String>,
    args: Vec<Arg>,
}

impl Filter {
    /// The filter of a list of the team's conversations (`alias` names their table): the
    /// team is the first value, `$1`. When the list is searched, SQLite must start from the
    /// search's matches and look their conversations up by id; without statistics its
    /// planner would rather walk the team's index and probe the matches for each of the
    /// team's conversations (200 ms at 100,000 calls). The unary `+` keeps it from using the
    /// team's indexes.
    pub(super) fn for_team(engine: Engine, alias: &str, team_id: &str, searching: bool) -> Filter {
        let mut filter = Filter { team_id: team_id.to_owned(), ..Filter::default() };
        let team = filter.arg(Arg::Text(team_id.to_owned()));
        let unindexed = if searching && engine == Engine::Sqlite { "+" } else { "" };
        filter.and(format!("{unindexed}{alias}.team_id = {team}"));
        filter
    }

    /// Hands out the placeholder (`$n`) of a new value.
    pub(super) fn arg(&mut self, arg: Arg) -> String {
        self.args.push(arg);
        format!("${}", self.args.len())
    }

    pub(super) fn and(&mut self, condition: String) {
        self.conditions.push(condition);
    }

    /// The WHERE clause's body (`1 = 1` when there is no condition).
    pub(super) fn sql(&self) -> String {
        if self.conditions.is_empty() { "1 = 1".to_owned() } else { self.conditions.join(" AND ") }
    }

    /// The placeholder that a value bound after the filter's own gets.
    fn next_placeholder(&self, after: usize) -> String {
        format!("${}", self.args.len() + after)
    }

    pub(super) fn bind<'q>(&'q self, mut query: Query<'q>) -> Query<'q> {
        for arg in &self.args {
            query = match arg {
                Arg::Text(text) => query.bind(text.as_str()),
                Arg::Int(number) => query.bind(*number),
            };
        }
        query
    }

    /// Keeps the conversations (`alias.id`) with a search row holding `query` (trimmed and
    /// lowercased by [`normalise_query`]) as a substring. The text index is read once, here:
    /// when it finds at most [`CARRIED_MATCHES`] conversations their ids go into the list's
    /// queries (the count and the page then look them up by id); a search that finds more is
    /// matched inside those queries instead.
    pub(super) async fn search(
        &mut self,
        conn: &mut AnyConnection,
        engine: Engine,
        (kind, alias): (Kind, &str),
        query: &str,
    ) -> ServiceResult<()> {
        let indexed = query.chars().count() >= 3;
        let carried = if indexed { matching_ids(conn, engine, kind, &self.team_id, query).await? } else { None };
        let condition = match carried {
            Some(ids) if ids.is_empty() => "1 = 0".to_owned(),
            Some(ids) => {
                let placeholders: Vec<String> = ids.into_iter().map(|id| self.arg(Arg::Text(id))).collect();
                format!("{alias}.id IN ({})", placeholders.join(", "))
            }
            None => {
                let rows = self.matching_rows(engine, kind, query);
                format!("{alias}.id IN (SELECT s.{} FROM {} s WHERE {rows})", kind.owner_column(), kind.table())
            }
        };
        self.and(condition);
        Ok(())
    }

    /// The condition on the team's search rows `s` that hold `query`.
    fn matching_rows(&mut self, engine: Engine, kind: Kind, query: &str) -> String {
        if engine == Engine::Sqlite && query.chars().count() >= 3 {
            let fts = kind.fts_table();
            let phrase = self.arg(Arg::Text(fts_phrase(query)));
            // By rowid (`+`): the text index's matches are fewer than the team's rows.
            format!("+s.team_id = {TEAM} AND s.id IN (SELECT rowid FROM {fts} WHERE {fts} MATCH {phrase})")
        } else {
            // PostgreSQL: the trigram index when the query has 3 characters or more. Shorter
            // queries (either engine) are NOT indexed: LIKE reads the team's search rows.
            let pattern = self.arg(Arg::Text(like_pattern(query)));
            format!("s.team_id = {TEAM} AND s.body LIKE {pattern} ESCAPE '\\'")
        }
    }
}

/// How many conversations a search may find for their ids to be carried into the list's
/// queries (as bound values: well below SQLite's 32,766 and PostgreSQL's 65,535).
const CARRIED_MATCHES: usize = 2_000;

/// The placeholder of the team id: the first value of every list's filter.
const TEAM: &str = "$1";

/// The team's conversations whose text holds `query` (3 characters or more), or `None` when
/// there are more than [`CARRIED_MATCHES`].
async fn matching_ids(
    conn: &mut AnyConnection,
    engine: Engine,
    kind: Kind,
    team_id: &str,
    query: &str,
) -> ServiceResult<Option<Vec<String>>> {
    let mut alone = Filter::default();
    alone.arg(Arg::Text(team_id.to_owned()));
    let rows = alone.matching_rows(engine, kind, query);
    let (owner, table, most) = (kind.owner_column(), kind.table(), CARRIED_MATCHES + 1);
    let sql = format!("SELECT DISTINCT s.{owner} AS owner FROM {table} s WHERE {rows} LIMIT {most}");
    let found = alone.bind(sqlx::query(&sql)).fetch_all(conn).await?;
    if found.len() > CARRIED_MATCHES {
        return Ok(None);
    }
    Ok(Some(found.iter().map(|row| row.try_get("owner")).collect::<Result<_, _>>()?))
}

/// How a `search` is matched: trimmed and lowercased like the indexed text.
pub(super) fn normalise_query(query: &str) -> String {
    query.trim().to_lowercase()
}

/// How a list is read: `SELECT {columns} FROM {from} WHERE {filter}`, sorted by `key` then
/// `id`, both in the same direction. A nullable key puts the rows without one last in either
/// direction, by id.
pub(super) struct Listing<'a> {
    pub columns: &'a str,
    pub from: &'a str,
    pub key: &'a str,
    pub id: &'a str,
    pub nullable: bool,
    pub ascending: bool,
}

/// One page of a list (`offset`, at most `limit` rows) and how many rows match in all.
///
/// A nullable key is read in two parts rather than with `NULLS LAST`: an ordinary index on
/// (team, key, id) serves `key IS NOT NULL ORDER BY key` in both directions and
/// `key IS NULL ORDER BY id` on both engines, whereas `NULLS LAST` is served by an ascending
/// index only in one direction (a different one on each engine) and would sort every row
/// of the team in the other.
pub(super) async fn read_page(
    conn: &mut AnyConnection,
    listing: &Listing<'_>,
    filter: &Filter,
    offset: i64,
    limit: i64,
) -> ServiceResult<(Vec<AnyRow>, i64)> {
    let total = count(conn, listing, filter, "").await?;
    if offset >= total {
        return Ok((Vec::new(), total));
    }
    let direction = if listing.ascending { "ASC" } else { "DESC" };
    let (key, id) = (listing.key, listing.id);
    if !listing.nullable {
        let order = format!("{key} {direction}, {id} {direction}");
        return Ok((select(conn, listing, filter, "", &order, (offset, limit)).await?, total));
    }
    let keyed_order = format!("{key} {direction}, {id} {direction}");
    let with_key = format!(" AND {key} IS NOT NULL");
    let mut rows = select(conn, listing, filter, &with_key, &keyed_order, (offset, limit)).await?;
    let missing = limit - i64::try_from(rows.len()).unwrap_or(limit);
    if missing > 0 {
        // The keyed rows end on this page: if some were read, the unkeyed ones start right
        // after them; if none were, `offset` lies past all of them.
        let unkeyed_offset =
            if rows.is_empty() { (offset - count(conn, listing, filter, &with_key).await?).max(0) } else { 0 };
        let without_key = format!(" AND {key} IS NULL");
        let order = format!("{id} {direction}");
        rows.extend(select(conn, listing, filter, &without_key, &order, (unkeyed_offset, missing)).await?);
    }
    Ok((rows, total))
}

async fn count(conn: &mut AnyConnection, listing: &Listing<'_>, filter: &Filter, extra: &str) -> ServiceResult<i64> {
    let sql = format!("SELECT COUNT(*) AS n FROM {} WHERE {}{extra}", listing.from, filter.sql());
    Ok(filter.bind(sqlx::query(&sql)).fetch_one(conn).await?.try_get("n")?)
}

async fn select(
    conn: &mut AnyConnection,
    listing: &Listing<'_>,
    filter: &Filter,
    extra: &str,
    order: &str,
    (offset, limit): (i64, i64),
) -> ServiceResult<Vec<AnyRow>> {
    // The page's ids first, walking the sort key's index; then only those rows are read. Sorting whole rows would read every matching
    // row of the team before the sort could drop them.
    let (columns, from, id) = (listing.columns, listing.from, listing.id);
    let sql = format!(
        "SELECT {columns} FROM {from} WHERE {id} IN (SELECT {id} FROM {from} WHERE {}{extra} ORDER BY {order} \
         LIMIT {} OFFSET {}) ORDER BY {order}",
        filter.sql(),
        filter.next_placeholder(1),
        filter.next_placeholder(2),
    );
    Ok(filter.bind(sqlx::query(&sql)).bind(limit).bind(offset).fetch_all(conn).await?)
}

/// `total_pages` of a list: ceil(total / limit), 0 when empty.
pub(super) fn total_pages(total: i64, limit: i64) -> u32 {
    let pages = if limit > 0 { (total + limit - 1) / limit } else { 0 };
    u32::try_from(pages).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_take_wildcards_literally() {
        assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }

    #[test]
    fn phrases_double_quotes() {
        assert_eq!(fts_phrase("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn bodies_are_lowercase_lines_without_empty_ones() {
        assert_eq!(body(["+1415", "", "Zürich SUMMARY"]), "+1415\nzürich summary");
    }

    #[test]
    fn pages_round_up() {
        assert_eq!((total_pages(0, 20), total_pages(1, 20), total_pages(40, 20), total_pages(41, 20)), (0, 1, 2, 3));
    }
}
