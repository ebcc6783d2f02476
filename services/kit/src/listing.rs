//! Paged lists of a team's rows on both engines: the WHERE clause a list is filtered by (its
//! values bound by placeholder), a case-insensitive substring search served by a trigram
//! index, and paging over a sort key that may be NULL.
//!
//! A store that searches keeps its searchable text in a table of its own (a [`TextIndex`]):
//! an integer `id`, the owner's id, `team_id` and `body`, the text lowercased by the store
//! (Rust's Unicode lowercase, so that `Zürich` and `ZÜRICH` agree on both engines whatever the
//! database's locale). Texts of one row are joined by a newline, which no query can span
//! since queries are one line.
//! - SQLite: an FTS5 table with the `trigram` tokenizer over those rows (external content,
//!   kept in step by triggers), queried with `MATCH` on a quoted phrase: a phrase of trigrams
//!   at consecutive positions is exactly a substring.
//! - PostgreSQL: a GIN `gin_trgm_ops` index over `body`, queried with `LIKE '%…%'` (the text
//!   and the query are lowercased already, so `LIKE` is the case-insensitive match).
//!
//! A query shorter than 3 characters has no trigram: it is answered by `LIKE` over the
//! team's rows, which is correct but NOT indexed (it reads every search row of the team).

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{Any, AnyConnection, Row};

use crate::db::Engine;
use crate::signature::Signature;
use crate::{ServiceError, ServiceResult};

/// A statement of the `Any` driver, as built with `sqlx::query`.
pub type Query<'q> = sqlx::query::Query<'q, Any, AnyArguments<'q>>;

/// Where a store keeps the text that a search reads: `table` has the columns `id` (an
/// integer, the FTS5 rowid on SQLite), `owner_column` (the id of the listed row), `team_id`
/// and `body`; `fts_table` is its FTS5 table on SQLite.
///
/// `carried_rows`: on PostgreSQL, how many search rows a search may find and still be rare,
/// its matches carried by id (see [`Filter::search`]); more make it frequent. Where to draw
/// the line is the store's: a short text per row, one row per owner (contacts), makes a long
/// list of ids cheap to find; transcripts (long texts, many rows a call) do not.
///
/// `signature_column`: on PostgreSQL, a `bit(1024)` column of the listed rows holding the
/// [`Signature`] of all their search text, which a frequent search checks before probing the
/// text (see [`crate::signature`]); `None` when the store keeps none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextIndex {
    pub table: &'static str,
    pub fts_table: &'static str,
    pub owner_column: &'static str,
    pub carried_rows: i64,
    pub signature_column: Option<&'static str>,
}

/// A statement of a list (`sql`, bound by `filter`'s values and then `more`), planned anew
/// for its values each time it runs: not a prepared statement, whose generic plan PostgreSQL
/// may reuse after five runs. The right plan for a list depends on its values: a frequent
/// search walks the sort key's index, a rare one starts from the text index; planned without
/// them, a count of a frequent word's first matches was many times slower (BENCHMARKS.md,
/// "Why the lists are planned the way they are").
fn statement<'q>(step: Step, sql: &'q str, filter: &'q Filter, more: &'q [Arg]) -> Query<'q> {
    record(step, sql, || filter.args.iter().chain(more).cloned().collect());
    more.iter().fold(filter.bind(sqlx::query(sql).persistent(false)), bind_arg)
}

fn bind_arg<'q>(query: Query<'q>, arg: &'q Arg) -> Query<'q> {
    match arg {
        Arg::Text(text) => query.bind(text.as_str()),
        Arg::Int(number) => query.bind(*number),
    }
}

/// What a list statement is for (see [`Statement`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Reading a search's matches from the text index ([`Filter::search`]).
    SearchMatches,
    /// An `EXPLAIN` whose row estimate is read, never run ([`estimate`]).
    Estimate,
    /// Counting the whole list ([`count`]).
    Count,
    /// Counting a frequent search's list up to [`EXACT_TOTAL_UP_TO`] + 1.
    CountUpTo,
    /// Counting a frequent search's sampled matches that pass the other conditions.
    CountSampled,
    /// Reading a page ([`select`]).
    Page,
    /// A statement of a store's own, named by the store.
    Store(&'static str),
}

/// A list statement as it ran: what for, its SQL, and its values in placeholder order.
#[derive(Debug, Clone)]
pub struct Statement {
    pub step: Step,
    pub sql: String,
    pub args: Vec<Arg>,
}

tokio::task_local! {
    static RECORDED: std::cell::RefCell<Vec<Statement>>;
}

/// Runs `work` and returns, with its output, every list statement it ran, in order: for the
/// tests that check how PostgreSQL plans them. Outside this, nothing is recorded.
#[doc(hidden)]
pub async fn recorded<T>(work: impl std::future::Future<Output = T>) -> (T, Vec<Statement>) {
    RECORDED
        .scope(std::cell::RefCell::new(Vec::new()), async move {
            let output = work.await;
            (output, RECORDED.with(std::cell::RefCell::take))
        })
        .await
}

/// Notes a statement about to run (its values made by `args` only when [`recorded`] is
/// listening): every list statement of this module, and those a store runs for a list itself.
#[doc(hidden)]
pub fn record(step: Step, sql: &str, args: impl FnOnce() -> Vec<Arg>) {
    let _ = RECORDED.try_with(|recorded| {
        recorded.borrow_mut().push(Statement { step, sql: sql.to_owned(), args: args() });
    });
}

/// `%`, `_` and `\` stand for themselves in the `LIKE` pattern (with `ESCAPE '\'`).
pub fn like_pattern(query: &str) -> String {
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
pub fn fts_phrase(query: &str) -> String {
    format!("\"{}\"", query.replace('"', "\"\""))
}

/// The values bound to a statement, in placeholder order.
#[derive(Debug, Clone)]
pub enum Arg {
    Text(String),
    Int(i64),
}

/// The conditions of a list query, ANDed, with their values: each condition names its values
/// by the placeholders [`Filter::arg`] hands out.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    team_id: String,
    conditions: Vec<String>,
    args: Vec<Arg>,
    /// A search matched too many rows to carry their ids: the list's total is counted only up
    /// to [`EXACT_TOTAL_UP_TO`] and estimated beyond (see [`read_page`]).
    frequent_search: bool,
    /// Some of a frequent search's matches (owner ids), read while finding it frequent: when
    /// enough of them pass the other conditions, the list has more than [`EXACT_TOTAL_UP_TO`]
    /// rows without the whole search being matched to count them (see [`read_page`]).
    sampled: Vec<String>,
    /// How a frequent search is matched when a page is read ([`Filter::sql`]), and when the
    /// list is counted or its size estimated ([`Filter::matched_sql`]): see
    /// [`Filter::probe_each_row`].
    executed: Vec<String>,
    matched: Vec<String>,
}

impl Filter {
    /// The filter of a list of the team's rows (`alias` names their table): the team is the
    /// first value, `$1`. When the list is searched, SQLite must start from the search's
    /// matches and look their rows up by id; without statistics its planner would rather walk
    /// the team's index and probe the matches for each of the team's rows, which is slow for a
    /// large team (BENCHMARKS.md, "Why the lists are planned the way they are"). The unary `+`
    /// keeps it from using the team's indexes.
    pub fn for_team(engine: Engine, alias: &str, team_id: &str, searching: bool) -> Filter {
        let mut filter = Filter { team_id: team_id.to_owned(), ..Filter::default() };
        let team = filter.arg(Arg::Text(team_id.to_owned()));
        let unindexed = if searching && engine == Engine::Sqlite { "+" } else { "" };
        filter.and(format!("{unindexed}{alias}.team_id = {team}"));
        filter
    }

    /// Hands out the placeholder (`$n`) of a new value.
    pub fn arg(&mut self, arg: Arg) -> String {
        self.args.push(arg);
        format!("${}", self.args.len())
    }

    pub fn and(&mut self, condition: String) {
        self.conditions.push(condition);
    }

    /// Adds `left value` for each value that is given (`left` ends with its operator, as in
    /// `c.started_at >=`); an absent value adds nothing. This is a list's optional filters.
    pub fn compare_each<'a>(&mut self, comparisons: impl IntoIterator<Item = (&'a str, Option<Arg>)>) {
        for (left, value) in comparisons {
            if let Some(value) = value {
                let value = self.arg(value);
                self.and(format!("{left} {value}"));
            }
        }
    }

    /// The WHERE clause's body (`1 = 1` when there is no condition).
    pub fn sql(&self) -> String {
        Self::joined(self.conditions.iter().chain(&self.executed))
    }

    /// A WHERE clause that selects the same rows as [`Filter::sql`] with a frequent search as a
    /// semi-join: a form whose size the planner can estimate, and whose matches it may hash
    /// when a count needs many of them (every count of a list uses it).
    fn matched_sql(&self) -> String {
        Self::joined(self.conditions.iter().chain(&self.matched))
    }

    fn joined<'a>(conditions: impl Iterator<Item = &'a String>) -> String {
        let all: Vec<&str> = conditions.map(String::as_str).collect();
        if all.is_empty() { "1 = 1".to_owned() } else { all.join(" AND ") }
    }

    /// The placeholder that a value bound after the filter's own gets.
    pub fn next_placeholder(&self, after: usize) -> String {
        format!("${}", self.args.len() + after)
    }

    pub fn bind<'q>(&'q self, query: Query<'q>) -> Query<'q> {
        self.args.iter().fold(query, bind_arg)
    }

    /// Keeps the rows (`alias.id`) with a search row of `index` holding `query` (trimmed and
    /// lowercased by [`normalise_query`]) as a substring. The text index is read once, here:
    /// when the search is rare enough (see [`matching_ids`]) the ids it finds go into the
    /// list's queries as one value (the count and the page then look them up by id), and their
    /// number is returned; a search that finds more is matched inside those queries instead
    /// (`None`), and on PostgreSQL the list's total is then counted only up to
    /// [`EXACT_TOTAL_UP_TO`] ([`read_page`]).
    ///
    /// Carrying the ids is what keeps a rare search fast whatever the sort: given a subquery,
    /// the planner either hashes every row of the team or walks the sort key's index probing
    /// each row, which is slow when the matches sit far along it (a last name sorted by last
    /// name). A frequent search is the opposite case: the walk finds a page after a few probes,
    /// and what costs is reading every match, for the ids or for an exact count (BENCHMARKS.md,
    /// "Why the lists are planned the way they are").
    /// Owner ids must not contain a comma (PostgreSQL gets them comma-separated).
    pub async fn search(
        &mut self,
        conn: &mut AnyConnection,
        engine: Engine,
        (index, alias): (&TextIndex, &str),
        query: &str,
    ) -> ServiceResult<Option<usize>> {
        let indexed = query.chars().count() >= 3;
        let matches = if indexed {
            matching_ids(conn, engine, index, &self.team_id, query).await?
        } else {
            Matches::Frequent(Vec::new())
        };
        let carried = match matches {
            Matches::Carried(ids) => Some(ids),
            Matches::Frequent(sampled) => {
                self.sampled = sampled;
                None
            }
        };
        let found = carried.as_ref().map(Vec::len);
        let condition = match carried {
            Some(ids) if ids.is_empty() => "1 = 0".to_owned(),
            Some(ids) => match engine {
                Engine::Postgres => {
                    let ids = self.arg(Arg::Text(ids.join(",")));
                    format!("{alias}.id = ANY(string_to_array({ids}, ','))")
                }
                Engine::Sqlite => {
                    let ids = self.arg(Arg::Text(serde_json::Value::from(ids).to_string()));
                    format!("{alias}.id IN (SELECT value FROM json_each({ids}))")
                }
            },
            None => {
                self.frequent_search = engine == Engine::Postgres;
                let rows = self.matching_rows(engine, index, query);
                let (owner, table) = (index.owner_column, index.table);
                let matched = format!("{alias}.id IN (SELECT s.{owner} FROM {table} s WHERE {rows})");
                match index.signature_column.filter(|_| engine == Engine::Postgres) {
                    Some(column) => {
                        let probe = probed_per_row(&format!("FROM {table} s WHERE s.{owner} = {alias}.id AND {rows}"));
                        self.probe_each_row(&format!("{alias}.{column}"), query, (matched, probe));
                    }
                    None => {
                        self.executed.push(matched.clone());
                        self.matched.push(matched);
                    }
                }
                return Ok(found);
            }
        };
        self.and(condition);
        Ok(found)
    }

    /// Has a frequent search read each listed row's own search text, after a check of the
    /// row's signature (`column`) for every trigram bit of `query`, instead of matching the
    /// whole list against the text index: the list is then always a walk along its sort index
    /// that stops at the page (or at the count's end), and a row whose signature lacks a bit
    /// of the query costs a bit test instead of a probe (an index lookup and a heap read). That
    /// is what keeps a word said only in the rows at the far end of the sort index (the
    /// shortest calls, sorted by duration) from probing thousands of rows for a page.
    ///
    /// The check is wrapped by [`weighed_a_third`] and `probe` is a [`probed_per_row`]. Counts
    /// and estimates use `matched`, the same search as a semi-join: counting by the walk reads
    /// many rows per match for a word in a few percent of the rows, where hashing the word's
    /// matches is cheaper. The bits are written into the statement: they are ours, not the
    /// client's. Measured: BENCHMARKS.md, "Why the lists are planned the way they are".
    fn probe_each_row(&mut self, column: &str, query: &str, (matched, probe): (String, String)) {
        self.matched.push(matched);
        let signature = Signature::of(query);
        if !signature.is_empty() {
            let bits = format!("B'{}'", signature.bit_string());
            self.executed.push(weighed_a_third(&format!("({column} & {bits}) = {bits}")));
        }
        self.executed.push(probe);
    }

    /// The condition on the team's search rows `s` that hold `query`.
    fn matching_rows(&mut self, engine: Engine, index: &TextIndex, query: &str) -> String {
        if engine == Engine::Sqlite && query.chars().count() >= 3 {
            let fts = index.fts_table;
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

/// `test` (a bit test, say) as a condition the PostgreSQL planner gives a third of the rows.
/// It can estimate neither a bit test nor a subquery per row and takes them for nearly none;
/// it would then sort or hash every row of the team rather than walk the sort index to the
/// page, many times slower (BENCHMARKS.md, "Why the lists are planned the way they are").
pub fn weighed_a_third(test: &str) -> String {
    format!("(CASE WHEN {test} THEN 1 ELSE 0 END) > 0")
}

/// The condition that the listed row has a related row (`from_where`, a `FROM ... WHERE ...`
/// naming the listed row), probed for each row a walk reaches: kept one (`LIMIT 1`) so that
/// the planner cannot turn it into a join over every related row.
pub fn probed_per_row(from_where: &str) -> String {
    format!("(SELECT 1 {from_where} LIMIT 1) = 1")
}

/// How many rows a search may find for their ids to be carried into the list's queries, as
/// one comma-separated value (10,000 UUIDs are 370 kB): past it, the value and the time to
/// find the ids outweigh what carrying them saves (BENCHMARKS.md, "Why the lists are planned
/// the way they are").
pub const CARRIED_MATCHES: usize = 10_000;

/// On PostgreSQL, a search the planner expects to find this many times
/// [`TextIndex::carried_rows`] is frequent without being read. Its estimates for texts that
/// frequent are close; for rarer ones they can be several times too high, so those are read
/// (BENCHMARKS.md, "Why the lists are planned the way they are").
const ESTIMATED_FREQUENT_FACTOR: i64 = 5;

/// Up to how many rows the total of a frequent search is counted exactly (PostgreSQL): the
/// count stops one past it, and a list with more gets the planner's estimate instead, flagged
/// as such. A total at most this large is always exact, on both engines.
pub const EXACT_TOTAL_UP_TO: i64 = 1_000;

/// The placeholder of the team id: the first value of every list's filter.
const TEAM: &str = "$1";

/// What [`matching_ids`] found.
enum Matches {
    /// Every matching owner id, few enough to carry.
    Carried(Vec<String>),
    /// Too many to carry; the distinct owner ids among the matches read on the way (none when
    /// the planner's estimate alone said so).
    Frequent(Vec<String>),
}

/// The team's rows whose text holds `query` (3 characters or more), or [`Matches::Frequent`]
/// when there are too many to carry: more than [`CARRIED_MATCHES`] on SQLite,
/// [`TextIndex::carried_rows`] search rows or more on PostgreSQL.
///
/// PostgreSQL reads at most that many rows, not distinct ones: a `DISTINCT` would read every
/// match before the limit applies, which is the cost being avoided.
async fn matching_ids(
    conn: &mut AnyConnection,
    engine: Engine,
    index: &TextIndex,
    team_id: &str,
    query: &str,
) -> ServiceResult<Matches> {
    let mut alone = Filter::default();
    alone.arg(Arg::Text(team_id.to_owned()));
    let rows = alone.matching_rows(engine, index, query);
    let (owner, table) = (index.owner_column, index.table);
    if engine == Engine::Postgres {
        // The planner's estimate (from the column's statistics, close for frequent texts) spares
        // a frequent search the reading; a rare one is read, and the reading decides.
        let most = index.carried_rows;
        let expected = estimate(conn, &alone, &format!("SELECT 1 FROM {table} s WHERE {rows}")).await?;
        if expected >= most.saturating_mul(ESTIMATED_FREQUENT_FACTOR) {
            return Ok(Matches::Frequent(Vec::new()));
        }
        let sql = format!("SELECT s.{owner} AS owner FROM {table} s WHERE {rows} LIMIT {most}");
        let found = statement(Step::SearchMatches, &sql, &alone, &[]).fetch_all(conn).await?;
        let frequent = i64::try_from(found.len()).unwrap_or(i64::MAX) >= most;
        let mut ids = found.iter().map(|row| row.try_get("owner")).collect::<Result<Vec<String>, _>>()?;
        ids.sort_unstable();
        ids.dedup();
        return Ok(if frequent { Matches::Frequent(ids) } else { Matches::Carried(ids) });
    }
    let most = CARRIED_MATCHES + 1;
    let sql = format!("SELECT DISTINCT s.{owner} AS owner FROM {table} s WHERE {rows} LIMIT {most}");
    let found = statement(Step::SearchMatches, &sql, &alone, &[]).fetch_all(conn).await?;
    if found.len() > CARRIED_MATCHES {
        return Ok(Matches::Frequent(Vec::new()));
    }
    Ok(Matches::Carried(found.iter().map(|row| row.try_get("owner")).collect::<Result<_, _>>()?))
}

/// How a `search` is matched: trimmed and lowercased like the indexed text.
pub fn normalise_query(query: &str) -> String {
    query.trim().to_lowercase()
}

/// How a list is read: `SELECT {columns} FROM {from} WHERE {filter}`, sorted by `key` then
/// `id`, both in the same direction. A nullable key puts the rows without one last in either
/// direction, by id.
pub struct Listing<'a> {
    pub columns: &'a str,
    pub from: &'a str,
    pub key: &'a str,
    pub id: &'a str,
    pub nullable: bool,
    pub ascending: bool,
}

/// How many rows a list has in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Total {
    pub count: i64,
    /// `count` is the planner's estimate (a frequent search on PostgreSQL), at least
    /// [`EXACT_TOTAL_UP_TO`] + 1 and at least the rows known to exist.
    pub estimated: bool,
}

impl Total {
    pub const fn exact(count: i64) -> Total {
        Total { count, estimated: false }
    }
}

/// One page of a list (`offset`, at most `limit` rows) and how many rows match in all.
///
/// The total of a frequent search (see [`Filter::search`]) is counted up to
/// [`EXACT_TOTAL_UP_TO`]: past it, the planner's estimate of the whole list, flagged as one,
/// unless the page itself shows where the list ends.
pub async fn read_page(
    conn: &mut AnyConnection,
    listing: &Listing<'_>,
    filter: &Filter,
    offset: i64,
    limit: i64,
) -> ServiceResult<(Vec<AnyRow>, Total)> {
    if !filter.frequent_search {
        let total = count(conn, listing, filter, "").await?;
        return Ok((read_counted_page(conn, listing, filter, (offset, limit), total).await?, Total::exact(total)));
    }
    let counted = match count_sampled(conn, listing, filter, EXACT_TOTAL_UP_TO + 1).await? {
        Some(more) if more > EXACT_TOTAL_UP_TO => more,
        _ => count_up_to(conn, listing, filter, EXACT_TOTAL_UP_TO + 1).await?,
    };
    if counted <= EXACT_TOTAL_UP_TO {
        return Ok((read_counted_page(conn, listing, filter, (offset, limit), counted).await?, Total::exact(counted)));
    }
    let rows = read_counted_page(conn, listing, filter, (offset, limit), TOTAL_UNKNOWN).await?;
    let read = i64::try_from(rows.len()).unwrap_or(i64::MAX);
    let total = if read > 0 && read < limit {
        Total::exact(offset + read)
    } else {
        let whole = format!("SELECT 1 FROM {} WHERE {}", listing.from, filter.matched_sql());
        let estimate = estimate(conn, filter, &whole).await?.max(counted).max(offset + read);
        // An empty page past the end: the list has at most `offset` rows.
        let estimate = if read == 0 { estimate.min(offset.max(counted)) } else { estimate };
        Total { count: estimate, estimated: true }
    };
    Ok((rows, total))
}

/// The total given to [`read_counted_page`] when it is not known: no offset lies past it.
const TOTAL_UNKNOWN: i64 = i64::MAX;

/// How many rows match the filter, counting no further than `most`.
async fn count_up_to(
    conn: &mut AnyConnection,
    listing: &Listing<'_>,
    filter: &Filter,
    most: i64,
) -> ServiceResult<i64> {
    let sql = format!(
        "SELECT COUNT(*) AS n FROM (SELECT 1 FROM {} WHERE {} LIMIT {most}) counted",
        listing.from,
        filter.matched_sql()
    );
    Ok(statement(Step::CountUpTo, &sql, filter, &[]).fetch_one(conn).await?.try_get("n")?)
}

/// How many of a frequent search's sampled matches ([`Filter::search`]) pass the list's other
/// conditions, counting no further than `most`; `None` when too few were sampled to reach it.
/// Reaching it settles that the list is long by looking the sampled rows up by id, instead of
/// matching the whole search again to count (BENCHMARKS.md, "Why the lists are planned the way
/// they are").
async fn count_sampled(
    conn: &mut AnyConnection,
    listing: &Listing<'_>,
    filter: &Filter,
    most: i64,
) -> ServiceResult<Option<i64>> {
    if i64::try_from(filter.sampled.len()).unwrap_or(i64::MAX) < most {
        return Ok(None);
    }
    let sql = format!(
        "SELECT COUNT(*) AS n FROM (SELECT 1 FROM {} WHERE {} AND {} = ANY(string_to_array({}, ',')) LIMIT {most}) \
         counted",
        listing.from,
        Filter::joined(filter.conditions.iter()),
        listing.id,
        filter.next_placeholder(1)
    );
    let sampled = [Arg::Text(filter.sampled.join(","))];
    let query = statement(Step::CountSampled, &sql, filter, &sampled);
    Ok(Some(query.fetch_one(conn).await?.try_get("n")?))
}

/// The PostgreSQL planner's estimate of how many rows `query` (bound by `filter`) returns,
/// from the statistics `ANALYZE` keeps, without reading a row: `rows=` of the plan's top line.
pub async fn estimate(conn: &mut AnyConnection, filter: &Filter, query: &str) -> ServiceResult<i64> {
    let explain = format!("EXPLAIN {query}");
    let top: String = statement(Step::Estimate, &explain, filter, &[]).fetch_one(conn).await?.try_get(0)?;
    planned_rows(&top).ok_or_else(|| ServiceError::internal(anyhow::anyhow!("no row estimate in the plan {top:?}")))
}

/// `rows=N` of a line of a text plan, e.g. `Seq Scan on calls c  (cost=0.00..1.00 rows=42 width=4)`.
fn planned_rows(line: &str) -> Option<i64> {
    let (_, after) = line.split_once(" rows=")?;
    after.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Like [`read_page`], for a caller that knows how many rows match (`total`) by a cheaper
/// query than counting the filtered list, e.g. from a link table alone.
///
/// A nullable key is read in two parts rather than with `NULLS LAST`: an ordinary index on
/// (team, key, id) serves `key IS NOT NULL ORDER BY key` in both directions and
/// `key IS NULL ORDER BY id` on both engines, whereas `NULLS LAST` is served by an ascending
/// index only in one direction (a different one on each engine) and would sort every row
/// of the team in the other.
pub async fn read_counted_page(
    conn: &mut AnyConnection,
    listing: &Listing<'_>,
    filter: &Filter,
    (offset, limit): (i64, i64),
    total: i64,
) -> ServiceResult<Vec<AnyRow>> {
    if offset >= total {
        return Ok(Vec::new());
    }
    let direction = if listing.ascending { "ASC" } else { "DESC" };
    let (key, id) = (listing.key, listing.id);
    if !listing.nullable {
        let order = format!("{key} {direction}, {id} {direction}");
        return select(conn, listing, filter, "", &order, (offset, limit)).await;
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
    Ok(rows)
}

/// How many rows match the filter (and `extra`, a condition starting with ` AND`).
pub async fn count(
    conn: &mut AnyConnection,
    listing: &Listing<'_>,
    filter: &Filter,
    extra: &str,
) -> ServiceResult<i64> {
    let sql = format!("SELECT COUNT(*) AS n FROM {} WHERE {}{extra}", listing.from, filter.matched_sql());
    Ok(statement(Step::Count, &sql, filter, &[]).fetch_one(conn).await?.try_get("n")?)
}

/// The rows of one page, in `order`.
pub async fn select(
    conn: &mut AnyConnection,
    listing: &Listing<'_>,
    filter: &Filter,
    extra: &str,
    order: &str,
    (offset, limit): (i64, i64),
) -> ServiceResult<Vec<AnyRow>> {
    // The page's ids first, from the indexes alone (they hold every filtered and sorted
    // column); then only those rows are read. Sorting whole rows would read every matching
    // row of the team before the sort could drop them. On PostgreSQL the ids are an array
    // computed first and looked up by id: given them as a subquery, the planner chooses how to
    // join it by its estimate of the page's size, and a filter it cannot estimate (a probe per
    // row) made that 1 row, for which it scanned every row of the table (BENCHMARKS.md, "Why
    // the lists are planned the way they are").
    let (columns, from, id) = (listing.columns, listing.from, listing.id);
    let (open, close) = match Engine::of(conn) {
        Engine::Postgres => ("= ANY(ARRAY(", "))"),
        Engine::Sqlite => ("IN (", ")"),
    };
    let sql = format!(
        "SELECT {columns} FROM {from} WHERE {id} {open}SELECT {id} FROM {from} WHERE {}{extra} ORDER BY {order} \
         LIMIT {} OFFSET {}{close} ORDER BY {order}",
        filter.sql(),
        filter.next_placeholder(1),
        filter.next_placeholder(2),
    );
    let page = [Arg::Int(limit), Arg::Int(offset)];
    Ok(statement(Step::Page, &sql, filter, &page).fetch_all(conn).await?)
}

/// Where a page lies in a list of `total` rows.
pub fn page_info(page: u32, limit: u32, total: Total) -> switchboard_proto::v1::PageInfo {
    switchboard_proto::v1::PageInfo {
        page,
        limit,
        total_count: u64::try_from(total.count).unwrap_or_default(),
        total_pages: total_pages(total.count, i64::from(limit)),
        total_count_estimated: total.estimated,
    }
}

/// `total_pages` of a list: ceil(total / limit), 0 when empty.
pub fn total_pages(total: i64, limit: i64) -> u32 {
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
    fn estimates_are_read_from_the_top_line_of_a_plan() {
        assert_eq!(planned_rows("Hash Join  (cost=23838.00..33603.51 rows=26950 width=4)"), Some(26950));
        assert_eq!(planned_rows("Result  (cost=0.00..0.01 rows=1 width=4)"), Some(1));
        assert_eq!(planned_rows("Result"), None);
    }

    #[test]
    fn pages_round_up() {
        assert_eq!((total_pages(0, 20), total_pages(1, 20), total_pages(40, 20), total_pages(41, 20)), (0, 1, 2, 3));
    }

    #[test]
    fn values_get_placeholders_in_order_after_the_team() {
        let mut filter = Filter::for_team(Engine::Postgres, "c", "team", false);
        let value = filter.arg(Arg::Int(5));
        filter.and(format!("c.n = {value}"));
        assert_eq!(filter.sql(), "c.team_id = $1 AND c.n = $2");
        assert_eq!(filter.next_placeholder(1), "$3");
        let searching = Filter::for_team(Engine::Sqlite, "c", "team", true);
        assert_eq!(searching.sql(), "+c.team_id = $1");
    }

    #[test]
    fn only_the_given_values_are_compared() {
        let mut filter = Filter::for_team(Engine::Postgres, "c", "team", false);
        filter.compare_each([("c.a =", None), ("c.b >=", Some(Arg::Int(2))), ("c.c =", Some(Arg::Text("x".into())))]);
        assert_eq!(filter.sql(), "c.team_id = $1 AND c.b >= $2 AND c.c = $3");
    }
}
