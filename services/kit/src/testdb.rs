//! Fresh databases for store tests, one per test, on every engine the machine offers:
//! always SQLite (a file in a temporary directory), and PostgreSQL when `TEST_DATABASE_URL`
//! names a server (a new database named `sbtest_<uuid>` is created on it). Set
//! `SWITCHBOARD_REQUIRE_POSTGRES=1` to make a missing `TEST_DATABASE_URL` an error instead
//! of a skipped engine; the project's test command does.

use anyhow::Context;
use sqlx::Connection;

use crate::db::Engine;

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
