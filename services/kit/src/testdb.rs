//! Fresh databases for store tests, one per test, on every engine the machine offers:
//! always SQLite (a file in a temporary directory), and PostgreSQL when `TEST_DATABASE_URL`
//! names a server (a new database named `sbtest_<uuid>` is created on it). Set
//! `SWITCHBOARD_REQUIRE_POSTGRES=1` to make a missing `TEST_DATABASE_URL` an error instead
//! of a skipped engine; the project's test command does.
//!
//! [`Explainer`] shows how PostgreSQL plans a store's statements (as `switchboard_kit::listing::
//! recorded` catches them), for the tests that check a list keeps the plan it was tuned for.

use anyhow::Context;
use sqlx::{Connection, Row};

use crate::db::Engine;
use crate::listing::{Arg, Statement, Step};

pub struct TestDatabase {
    pub engine: Engine,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

pub fn sqlite() -> anyhow::Result<TestDatabase> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    Ok(TestDatabase {
        engine: Engine::Sqlite,
        url: crate::db::sqlite_url(&dir.path().join("test.db")),
        _dir: Some(dir),
    })
}

/// `None` when no PostgreSQL server is configured (and none is required).
pub async fn postgres() -> anyhow::Result<Option<TestDatabase>> {
    let Ok(admin_url) = std::env::var("TEST_DATABASE_URL") else {
        anyhow::ensure!(
            std::env::var("SWITCHBOARD_REQUIRE_POSTGRES").is_err(),
            "SWITCHBOARD_REQUIRE_POSTGRES is set but TEST_DATABASE_URL is not"
        );
        eprintln!("note: TEST_DATABASE_URL is not set; PostgreSQL is not tested");
        return Ok(None);
    };
    sqlx::any::install_default_drivers();
    let name = format!("sbtest_{}", uuid::Uuid::new_v4().simple());
    let mut admin =
        sqlx::AnyConnection::connect(&admin_url).await.with_context(|| "connecting to TEST_DATABASE_URL".to_owned())?;
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut admin).await.context("creating a test database")?;
    admin.close().await?;
    let mut url = url::Url::parse(&admin_url).context("parsing TEST_DATABASE_URL")?;
    url.set_path(&name);
    Ok(Some(TestDatabase { engine: Engine::Postgres, url: url.to_string(), _dir: None }))
}

/// One fresh database per available engine.
pub async fn all() -> anyhow::Result<Vec<TestDatabase>> {
    let mut databases = vec![sqlite()?];
    databases.extend(postgres().await?);
    Ok(databases)
}

/// How PostgreSQL plans a statement for its values, for tests that check a list keeps the plan
/// it was tuned for: `EXPLAIN (FORMAT JSON)` on a connection of its own (the `Any` driver reads
/// no JSON) that has the session settings of the store's connections, since some of them
/// (parallel workers) change plans.
pub struct Explainer {
    conn: sqlx::PgConnection,
}

/// A node of a plan, as [`plan_nodes`] lists them (depth first, `depth` 0 for the top node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanNode {
    pub depth: usize,
    /// `Seq Scan`, `Index Only Scan`, `Bitmap Index Scan`, `Nested Loop`, ...
    pub node_type: String,
    /// The table a scan reads.
    pub relation: Option<String>,
    pub alias: Option<String>,
    /// The index a scan reads.
    pub index: Option<String>,
    /// `InitPlan 1 (returns $0)`, `SubPlan 2`, ...: the node runs as that subquery.
    pub subplan: Option<String>,
}

impl Explainer {
    /// Connects to `url` (the store's database) with the settings that `pool`'s connections
    /// were given by `SET`.
    pub async fn connect(url: &str, pool: &sqlx::AnyPool) -> anyhow::Result<Explainer> {
        let settings = sqlx::query("SELECT name, setting FROM pg_settings WHERE source = 'session'")
            .fetch_all(pool)
            .await
            .context("reading the store connection's settings")?;
        let mut conn = sqlx::PgConnection::connect(url).await.context("connecting to explain")?;
        for row in &settings {
            let (name, setting): (String, String) = (row.try_get("name")?, row.try_get("setting")?);
            sqlx::query("SELECT set_config($1, $2, false)").bind(&name).bind(&setting).execute(&mut conn).await?;
        }
        Ok(Explainer { conn })
    }

    /// `EXPLAIN (FORMAT JSON) {sql}` with `args` bound, as the `Any` driver binds them (text,
    /// 64-bit integers), so that the plan is the one the statement gets for these values.
    pub async fn explain(&mut self, sql: &str, args: &[Arg]) -> anyhow::Result<serde_json::Value> {
        let explain = format!("EXPLAIN (FORMAT JSON) {sql}");
        let mut query = sqlx::query(&explain).persistent(false);
        for arg in args {
            query = match arg {
                Arg::Text(text) => query.bind(text.as_str()),
                Arg::Int(number) => query.bind(*number),
            };
        }
        let row = query.fetch_one(&mut self.conn).await.with_context(|| format!("explaining {sql}"))?;
        // `json`, which decodes as its text.
        let plan: String = row.try_get_unchecked(0)?;
        serde_json::from_str(&plan).context("reading the JSON plan")
    }

    /// Checks the plans of the statements a list ran (`statements`, as
    /// `switchboard_kit::listing::recorded` caught them): `expected` gives, for each step the
    /// list must take, the indexes its plans must read (see [`Explainer::check`]). A step the
    /// list did not take, or one it took that is not expected (another path than intended), is a
    /// failure too; estimates are never run and are not checked. Returns the failures, each
    /// naming `list`, and prints every plan (shown by `cargo test -- --nocapture`).
    pub async fn check_list(
        &mut self,
        list: &str,
        statements: &[Statement],
        expected: &[(Step, &[&str])],
        big: &[&str],
    ) -> anyhow::Result<Vec<String>> {
        let mut failures = Vec::new();
        for (step, _) in expected {
            if !statements.iter().any(|statement| statement.step == *step) {
                failures.push(format!("{list}: no {step:?} statement ran; the list ran {:?}", steps(statements)));
            }
        }
        for statement in statements.iter().filter(|statement| statement.step != Step::Estimate) {
            let Some((_, indexes)) = expected.iter().find(|(step, _)| *step == statement.step) else {
                failures.push(format!(
                    "{list}: an unexpected {:?} statement ran (the list took another path: {:?}): {}",
                    statement.step,
                    steps(statements),
                    statement.sql
                ));
                continue;
            };
            let plan = self.explain(&statement.sql, &statement.args).await?;
            eprintln!("{list}: {:?}\n{}", statement.step, render_plan(&plan));
            if let Some(failure) = judged(statement, &plan, indexes, big) {
                failures.push(format!("{list}: {failure}"));
            }
        }
        Ok(failures)
    }

    /// Why the plan of `statement` is not the intended one, `None` when it is: every index of
    /// `indexes` must be read somewhere in it (`a|b`: one of them at least), and no table of
    /// `big` by a sequential scan. A page ([`Step::Page`]) looks its rows up by the primary key
    /// whatever finds them: its indexes must be read where its ids are found (the `InitPlan`
    /// computing their array). The description names the statement, its values and the whole
    /// plan.
    pub async fn check(
        &mut self,
        statement: &Statement,
        indexes: &[&str],
        big: &[&str],
    ) -> anyhow::Result<Option<String>> {
        let plan = self.explain(&statement.sql, &statement.args).await?;
        Ok(judged(statement, &plan, indexes, big))
    }
}

/// What [`Explainer::check`] says of `statement`'s `plan`.
fn judged(statement: &Statement, plan: &serde_json::Value, indexes: &[&str], big: &[&str]) -> Option<String> {
    let mut problems = plan_problems(plan, &[], big);
    if statement.step == Step::Page {
        match init_plan(plan) {
            Some(ids) => problems.extend(
                plan_problems(ids, indexes, &[])
                    .into_iter()
                    .map(|problem| format!("finding the page's ids: {problem}")),
            ),
            None => problems.push("no InitPlan finds the page's ids".to_owned()),
        }
    } else {
        problems.extend(plan_problems(plan, indexes, &[]));
    }
    if problems.is_empty() {
        return None;
    }
    Some(format!(
        "{:?} statement: {}\n  SQL: {}\n  values: {}\nplan:\n{}\nJSON plan:\n{}",
        statement.step,
        problems.join("; "),
        statement.sql,
        shown_args(&statement.args),
        render_plan(plan),
        serde_json::to_string_pretty(plan).unwrap_or_default()
    ))
}

/// The first node of a plan that runs as an `InitPlan` (a subquery run once, its result a
/// value of the statement), with the nodes under it.
pub fn init_plan(plan: &serde_json::Value) -> Option<&serde_json::Value> {
    fn find(node: &serde_json::Value) -> Option<&serde_json::Value> {
        let name = node.get("Subplan Name").and_then(serde_json::Value::as_str).unwrap_or_default();
        if name.starts_with("InitPlan") {
            return Some(node);
        }
        node.get("Plans").and_then(serde_json::Value::as_array).into_iter().flatten().find_map(find)
    }
    let tops = plan.as_array().map(Vec::as_slice).unwrap_or(std::slice::from_ref(plan));
    tops.iter().find_map(|top| find(top.get("Plan").unwrap_or(top)))
}

/// The nodes of an `EXPLAIN (FORMAT JSON)` plan, depth first.
pub fn plan_nodes(plan: &serde_json::Value) -> Vec<PlanNode> {
    fn walk(node: &serde_json::Value, depth: usize, nodes: &mut Vec<PlanNode>) {
        let text = |key: &str| node.get(key).and_then(serde_json::Value::as_str).map(str::to_owned);
        nodes.push(PlanNode {
            depth,
            node_type: text("Node Type").unwrap_or_default(),
            relation: text("Relation Name"),
            alias: text("Alias"),
            index: text("Index Name"),
            subplan: text("Subplan Name"),
        });
        for child in node.get("Plans").and_then(serde_json::Value::as_array).into_iter().flatten() {
            walk(child, depth + 1, nodes);
        }
    }
    let mut nodes = Vec::new();
    let tops = plan.as_array().map(Vec::as_slice).unwrap_or(std::slice::from_ref(plan));
    for top in tops {
        walk(top.get("Plan").unwrap_or(top), 0, &mut nodes);
    }
    nodes
}

/// What keeps `plan` from being the intended one (see [`Explainer::check`]); empty when nothing.
pub fn plan_problems(plan: &serde_json::Value, indexes: &[&str], big: &[&str]) -> Vec<String> {
    let nodes = plan_nodes(plan);
    let read = |index: &str| nodes.iter().any(|node| node.index.as_deref() == Some(index));
    let mut problems: Vec<String> = indexes
        .iter()
        .filter(|wanted| !wanted.split('|').any(read))
        .map(|wanted| {
            if wanted.contains('|') {
                format!("none of the indexes {wanted} is used")
            } else {
                format!("index {wanted} is not used")
            }
        })
        .collect();
    for node in &nodes {
        if let (true, Some(relation)) = (node.node_type.contains("Seq Scan"), &node.relation)
            && big.contains(&relation.as_str())
        {
            problems.push(format!("{} on {relation}", node.node_type));
        }
    }
    problems
}

/// The plan as an indented outline, one node a line: `Index Only Scan using calls_started on calls c`.
pub fn render_plan(plan: &serde_json::Value) -> String {
    let mut lines = Vec::new();
    for node in plan_nodes(plan) {
        let mut line = format!("{}{}", "  ".repeat(node.depth + 1), node.node_type);
        if let Some(subplan) = &node.subplan {
            line = format!("{line} [{subplan}]");
        }
        if let Some(index) = &node.index {
            line.push_str(&format!(" using {index}"));
        }
        if let Some(relation) = &node.relation {
            line.push_str(&format!(" on {relation}"));
            if let Some(alias) = node.alias.as_ref().filter(|alias| *alias != relation) {
                line.push_str(&format!(" {alias}"));
            }
        }
        lines.push(line);
    }
    lines.join("\n")
}

fn steps(statements: &[Statement]) -> Vec<Step> {
    statements.iter().map(|statement| statement.step).collect()
}

/// A statement's values for a message, long ones (carried ids) cut short.
fn shown_args(args: &[Arg]) -> String {
    let shown: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(n, arg)| match arg {
            Arg::Int(number) => format!("${}={number}", n + 1),
            Arg::Text(text) if text.chars().count() > 80 => {
                format!("${}='{}...' ({} chars)", n + 1, text.chars().take(80).collect::<String>(), text.len())
            }
            Arg::Text(text) => format!("${}='{text}'", n + 1),
        })
        .collect();
    shown.join(", ")
}

/// Drops a PostgreSQL test database, its connections and all (a test of plans fills a big one:
/// it drops it once it passed, and leaves a failing one for a look).
pub async fn drop_postgres(database: TestDatabase) -> anyhow::Result<()> {
    anyhow::ensure!(database.engine == Engine::Postgres, "not a PostgreSQL test database");
    let admin_url = std::env::var("TEST_DATABASE_URL").context("TEST_DATABASE_URL")?;
    let url = url::Url::parse(&database.url).context("parsing the test database's URL")?;
    let name = url.path().trim_start_matches('/');
    anyhow::ensure!(name.starts_with("sbtest_"), "{name} is not a test database");
    let mut admin = sqlx::AnyConnection::connect(&admin_url).await.context("connecting to TEST_DATABASE_URL")?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .context("dropping a test database")?;
    admin.close().await?;
    Ok(())
}
