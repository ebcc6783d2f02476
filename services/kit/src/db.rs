//! One database handle for SQLite and PostgreSQL, picked by the URL scheme.
//!
//! Stores write their SQL once, against sqlx's `Any` driver, using `$1`-style placeholders
//! (SQLite accepts them too), TEXT ids, BIGINT millisecond timestamps and 0/1 integers for
//! flags. Where the engines truly differ (row locking, say) a store asks [`Db::engine`].
//! Each service embeds one migrations folder per engine and they are applied at connect.

use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use anyhow::Context;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Executor};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

impl Engine {
    pub fn from_url(url: &str) -> anyhow::Result<Engine> {
        if url.starts_with("sqlite:") {
            Ok(Engine::Sqlite)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Ok(Engine::Postgres)
        } else {
            anyhow::bail!("unsupported database URL scheme (use sqlite: or postgres:)")
        }
    }

    /// The engine a connection talks to, for code that holds a connection but not its pool.
    pub fn of(conn: &sqlx::AnyConnection) -> Engine {
        if conn.backend_name() == <sqlx::Postgres as sqlx::Database>::NAME { Engine::Postgres } else { Engine::Sqlite }
    }
}

/// The engines this process has opened databases on, for telemetry: a statement's event does
/// not say which driver ran it, and a process normally has one (a `serve` process one
/// database, `dev` SQLite for every service).
static OPENED: AtomicU8 = AtomicU8::new(0);

fn bit(engine: Engine) -> u8 {
    match engine {
        Engine::Sqlite => 1,
        Engine::Postgres => 2,
    }
}

fn note_opened(engine: Engine) {
    OPENED.fetch_or(bit(engine), Ordering::Relaxed);
}

/// The one engine this process has opened databases on; `None` when it has both (or none).
pub fn only_engine_opened() -> Option<Engine> {
    let opened = OPENED.load(Ordering::Relaxed);
    [Engine::Sqlite, Engine::Postgres].into_iter().find(|engine| opened == bit(*engine))
}

/// The migrations of one service, one folder per engine.
pub struct Migrations {
    pub sqlite: &'static Migrator,
    pub postgres: &'static Migrator,
}

/// Pools do not ping a connection before handing it out (sqlx's default): the ping is a
/// round trip per query (to the server on PostgreSQL, to the connection's worker thread on
/// SQLite) before every query, hot reads included. A connection that broke while idle
/// fails the one query that finds out, and the pool drops it.
#[derive(Clone, Debug)]
pub struct Db {
    pool: AnyPool,
    engine: Engine,
    /// SQLite only: one connection for [`Db::begin_write`], so that this process's writers
    /// queue for it in order, in sqlx's pool, instead of in SQLite's busy handler. That handler
    /// sleeps between tries (1, 2, 5, 10 ... up to 100 ms), so under many small writes a
    /// writer could sleep 100 ms after the lock was free: with 8 clients searching (each
    /// search debits a credit), 1 % of searches took over 100 ms. Other processes on the same
    /// file (the admin command) still meet the busy handler.
    writer: Option<AnyPool>,
}

/// `sqlite://<path>?mode=rwc`: the file is created when missing.
pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}?mode=rwc", path.display())
}

/// Makes the SQLite file of `url` (and its journal files) readable by its owner only, creating
/// it so when it does not exist yet: it holds password hashes, sessions and every team's data,
/// and SQLite would create it with the process's umask (0644). SQLite gives the `-wal` and
/// `-shm` files it makes the main file's permissions.
fn keep_sqlite_private(url: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path.contains(":memory:") || url.contains("mode=memory") {
        return Ok(());
    }
    let path = Path::new(path);
    if !path.exists() {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("creating {}", path.display()))?;
    }
    let beside = |suffix: &str| std::path::PathBuf::from(format!("{}{suffix}", path.display()));
    for file in [path.to_path_buf(), beside("-wal"), beside("-shm")] {
        let private = std::fs::Permissions::from_mode(0o600);
        if file.exists() {
            std::fs::set_permissions(&file, private).with_context(|| format!("restricting {}", file.display()))?;
        }
    }
    Ok(())
}

/// The longest a PostgreSQL session may sit idle inside a transaction before the server ends
/// it, rolling it back. The services' transactions are statements back to back; the one that
/// waits on something else between them (the webhook outbox relay, see `crate::outbox`)
/// bounds that wait below this.
pub const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(5);

impl Db {
    pub async fn connect(url: &str, migrations: &Migrations) -> anyhow::Result<Db> {
        sqlx::any::install_default_drivers();
        let engine = Engine::from_url(url)?;
        let options = AnyConnectOptions::from_str(url).context("parsing the database URL")?;
        let pool = match engine {
            // One writer at a time is SQLite's rule; readers run beside it in WAL mode.
            Engine::Sqlite => {
                keep_sqlite_private(url)?;
                sqlite_pool(8).connect_with(options.clone()).await
            }
            Engine::Postgres => {
                AnyPoolOptions::new()
                    .max_connections(max_connections_from_env())
                    // While the server is down, sqlx retries a refused connection until this
                    // deadline: it is how long a request waits before its 503 (measured by
                    // bench/faults.sh: 8.6 s with the 10 s this was).
                    .acquire_timeout(acquire_timeout_from_env())
                    .test_before_acquire(false)
                    // The services' queries are short and many run at once: a parallel plan's
                    // worker start-up cost more than it saved when measured (a contact list
                    // filtered by two tags: 20.8 ms parallel, 10.6 ms not; a count of 57,000
                    // call search matches: 114 ms parallel, 83 ms not, on 2 cores).
                    //
                    // No JIT either: a search's list statement, planned with per-row probes, has
                    // a cost estimate past `jit_above_cost`, and compiling it took 150-300 ms for
                    // a statement that runs in 10 (bench/conversations.sh, 100,000 calls).
                    .after_connect(|conn, _meta| {
                        Box::pin(async move {
                            conn.execute("SET max_parallel_workers_per_gather = 0").await?;
                            conn.execute("SET jit = off").await?;
                            // A replica cut off from the database mid-transaction leaves its
                            // session open on the server, holding its row locks (a team's
                            // credit balance, say) until TCP keepalive gives up, hours later,
                            // while every other replica's writes to those rows wait. The
                            // server ends such a session once it has idled this long instead.
                            let idle = IDLE_IN_TRANSACTION.as_millis();
                            conn.execute(format!("SET idle_in_transaction_session_timeout = {idle}").as_str()).await?;
                            Ok(())
                        })
                    })
                    .connect_with(options.clone())
                    .await
            }
        }
        .with_context(|| format!("connecting to the {engine:?} database"))?;

        let migrator = match engine {
            Engine::Sqlite => migrations.sqlite,
            Engine::Postgres => migrations.postgres,
        };
        migrator.run(&pool).await.context("applying database migrations")?;
        // A second pool on `:memory:` would be a second, empty database.
        let writer = match engine {
            Engine::Sqlite if !url.contains(":memory:") && !url.contains("mode=memory") => Some(
                sqlite_pool(1)
                    .connect_with(options)
                    .await
                    .with_context(|| format!("connecting to the {engine:?} database for writes"))?,
            ),
            _ => None,
        };
        note_opened(engine);
        Ok(Db { pool, engine, writer })
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Whether the database answers a trivial query within `within` (a readiness check).
    pub async fn answers(&self, within: std::time::Duration) -> bool {
        matches!(tokio::time::timeout(within, sqlx::query("SELECT 1").execute(&self.pool)).await, Ok(Ok(_)))
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Appended to a `SELECT` that must lock the rows it reads until the transaction ends.
    /// SQLite needs nothing: a write transaction already excludes other writers.
    pub fn for_update(&self) -> &'static str {
        match self.engine {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR UPDATE",
        }
    }

    /// Like [`Db::for_update`], but rows locked by another worker are passed over: how job
    /// workers claim jobs without blocking each other.
    pub fn for_update_skip_locked(&self) -> &'static str {
        match self.engine {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }

    /// Starts a transaction that will write. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`), so that a transaction that reads before it writes waits for its
    /// turn instead of failing with `SQLITE_BUSY` when another writer got there first.
    pub async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.engine {
            Engine::Sqlite => self.writer.as_ref().unwrap_or(&self.pool).begin_with("BEGIN IMMEDIATE").await,
            Engine::Postgres => self.pool.begin().await,
        }
    }

    /// Serialises the transactions that check and then change something of `scope` (a team's
    /// count of webhooks, say) until `tx` ends. SQLite needs nothing: [`Db::begin_write`]
    /// already lets one writer in at a time; PostgreSQL takes a transaction advisory lock.
    pub async fn lock_scope(&self, tx: &mut sqlx::AnyConnection, scope: &str) -> Result<(), sqlx::Error> {
        if self.engine == Engine::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))").bind(scope).execute(tx).await?;
        }
        Ok(())
    }

    pub async fn close(&self) {
        if let Some(writer) = &self.writer {
            writer.close().await;
        }
        self.pool.close().await;
    }
}

/// A pool of at most `connections` SQLite connections in WAL mode.
fn sqlite_pool(connections: u32) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(Duration::from_secs(10))
        .test_before_acquire(false)
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                conn.execute(
                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                     PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000;",
                )
                .await?;
                Ok(())
            })
        })
}

fn acquire_timeout_from_env() -> Duration {
    let ms = std::env::var("SWITCHBOARD_DB_ACQUIRE_TIMEOUT_MS").ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0);
    Duration::from_millis(ms.unwrap_or(2_000))
}

fn max_connections_from_env() -> u32 {
    std::env::var("SWITCHBOARD_DB_MAX_CONNECTIONS").ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(10)
}

/// True when the error is a unique-constraint violation, which stores turn into client
/// errors (a duplicate) rather than internal ones.
pub fn is_unique_violation(error: &sqlx::Error) -> bool {
    error.as_database_error().is_some_and(|e| e.is_unique_violation())
}

/// `0/1` integers are how flags are stored on both engines.
pub fn flag(value: bool) -> i64 {
    i64::from(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    static NO_MIGRATIONS: Migrator = Migrator::DEFAULT;

    /// Writers of one process queue for the write connection: each read-then-write transaction
    /// sees the last one's commit and none fails with `SQLITE_BUSY`. (It passes without the
    /// write connection too, only slower: how long writers wait is measured in BENCHMARKS.md,
    /// not asserted here.)
    #[tokio::test]
    async fn sqlite_writers_of_one_process_take_turns_and_all_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let migrations = Migrations { sqlite: &NO_MIGRATIONS, postgres: &NO_MIGRATIONS };
        let db = Db::connect(&sqlite_url(&dir.path().join("turns.db")), &migrations).await.expect("connect");
        sqlx::query("CREATE TABLE counter (n BIGINT NOT NULL)").execute(db.pool()).await.expect("create");
        sqlx::query("INSERT INTO counter (n) VALUES (0)").execute(db.pool()).await.expect("insert");
        let writers: Vec<_> = (0..32)
            .map(|_| {
                let db = db.clone();
                tokio::spawn(async move {
                    let mut tx = db.begin_write().await?;
                    let (n,): (i64,) = sqlx::query_as("SELECT n FROM counter").fetch_one(&mut *tx).await?;
                    sqlx::query("UPDATE counter SET n = $1").bind(n + 1).execute(&mut *tx).await?;
                    tx.commit().await
                })
            })
            .collect();
        for writer in writers {
            writer.await.expect("writer task").expect("write transaction");
        }
        let (n,): (i64,) = sqlx::query_as("SELECT n FROM counter").fetch_one(db.pool()).await.expect("read");
        assert_eq!(n, 32);
        db.close().await;
    }
}
