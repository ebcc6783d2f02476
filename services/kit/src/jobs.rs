//! Background jobs kept in the owning service's database.
//!
//! A job is written with [`enqueue`] inside the same transaction as the state change that
//! needs it, so both commit or neither does. Workers *claim* jobs (a lease in the row, with
//! `FOR UPDATE SKIP LOCKED` on PostgreSQL) instead of holding them in memory: when a process
//! dies mid-job its lease runs out and another worker, or the restarted process, runs the
//! job again. Handlers must therefore be idempotent. Failures are retried with exponential
//! backoff and full jitter ([`crate::backoff`]); after the last attempt the job is `failed` and its handler is told, so the
//! domain state can show the failure.
//!
//! Every service that uses jobs has the table of `jobs.sql` in its migrations; its tests call
//! [`check_migration`] so that the copy cannot drift from the one definition.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use tokio::sync::{Notify, watch};

use crate::backoff::Backoff;
use crate::db::{Db, Engine, Migrations};
use crate::time::now_ms;
use crate::vocabulary::JobStatus;

/// The jobs table's DDL for SQLite; PostgreSQL's is the same with BIGINT for INTEGER.
const TABLE_DDL: &str = include_str!("jobs.sql");

/// The statements of the jobs table for `engine`, comments dropped and whitespace collapsed.
pub fn table_statements(engine: Engine) -> Vec<String> {
    let ddl = match engine {
        Engine::Sqlite => TABLE_DDL.to_owned(),
        Engine::Postgres => TABLE_DDL.replace("INTEGER", "BIGINT"),
    };
    statements(&ddl)
}

fn statements(sql: &str) -> Vec<String> {
    let code: Vec<&str> = sql.lines().map(|line| line.split("--").next().unwrap_or_default()).collect();
    code.join(" ")
        .split(';')
        .map(|statement| statement.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|statement| !statement.is_empty())
        .collect()
}

/// [`check_migration`] over every migration of a service, on both engines.
pub fn check_migrations(migrations: &Migrations) -> Result<(), String> {
    for (engine, migrator) in [(Engine::Sqlite, migrations.sqlite), (Engine::Postgres, migrations.postgres)] {
        let all: String = migrator.iter().map(|migration| format!("{};\n", migration.sql)).collect();
        check_migration(&all, engine).map_err(|error| format!("{engine:?}: {error}"))?;
    }
    Ok(())
}

/// Checks that a service's migration holds every statement of the jobs table exactly, and
/// no other statement about it: `Err` names what differs.
pub fn check_migration(migration: &str, engine: Engine) -> Result<(), String> {
    let found = statements(migration);
    let expected = table_statements(engine);
    let about_jobs = |statement: &&String| statement.contains(" jobs ") || statement.contains(" jobs(");
    let extra: Vec<&String> = found.iter().filter(about_jobs).filter(|s| !expected.contains(s)).collect();
    let missing: Vec<&String> = expected.iter().filter(|s| !found.contains(s)).collect();
    if extra.is_empty() && missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the jobs table differs from switchboard_kit's jobs.sql: missing {missing:?}, different {extra:?}"))
    }
}

/// Completed jobs are kept this long (they show the last run's outcome), then pruned.
/// The largest ceiling of a retry's wait.
const MOST_BACKOFF: Duration = Duration::from_secs(300);

const KEEP_COMPLETED_MS: i64 = 7 * 24 * 60 * 60 * 1000;

pub struct NewJob<'a> {
    pub kind: &'a str,
    pub team_id: &'a str,
    /// What the job works on (an agent, a webpage): how its state is looked up.
    pub subject_id: &'a str,
    pub payload: serde_json::Value,
    pub max_attempts: i64,
}

#[derive(Debug, Clone)]
pub struct Job {
    pub id: String,
    pub kind: String,
    pub team_id: String,
    pub subject_id: String,
    pub payload: serde_json::Value,
    pub status: JobStatus,
    pub attempts: i64,
    pub max_attempts: i64,
    pub last_error: Option<String>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

const JOB_COLUMNS: &str =
    "id, kind, team_id, subject_id, payload, status, attempts, max_attempts, last_error, created_at, updated_at";

fn job_from_row(row: &AnyRow) -> Result<Job, sqlx::Error> {
    let payload: String = row.try_get("payload")?;
    Ok(Job {
        id: row.try_get("id")?,
        kind: row.try_get("kind")?,
        team_id: row.try_get("team_id")?,
        subject_id: row.try_get("subject_id")?,
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::Null),
        status: job_status(row)?,
        attempts: row.try_get("attempts")?,
        max_attempts: row.try_get("max_attempts")?,
        last_error: row.try_get("last_error")?,
        created_at_ms: row.try_get("created_at")?,
        updated_at_ms: row.try_get("updated_at")?,
    })
}

/// The row's status, parsed at the edge (the table's CHECK allows only [`JobStatus`]'s values).
fn job_status(row: &AnyRow) -> Result<JobStatus, sqlx::Error> {
    let text: String = row.try_get("status")?;
    JobStatus::parse(&text).ok_or_else(|| sqlx::Error::Decode(format!("{text} is not a job status").into()))
}

/// Writes a job; call it inside the transaction of the change that needs it.
pub async fn enqueue(conn: &mut AnyConnection, job: NewJob<'_>) -> Result<String, sqlx::Error> {
    // Time-ordered ids: two jobs queued in the same millisecond still sort by age, so
    // `latest` never shows the older one.
    let id = uuid::Uuid::now_v7().to_string();
    let now = now_ms();
    sqlx::query(
        "INSERT INTO jobs (id, kind, team_id, subject_id, payload, status, attempts, max_attempts, run_after, \
         created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $8, 0, $6, $7, $7, $7)",
    )
    .bind(&id)
    .bind(job.kind)
    .bind(job.team_id)
    .bind(job.subject_id)
    .bind(job.payload.to_string())
    .bind(job.max_attempts.max(1))
    .bind(now)
    .bind(JobStatus::Queued.as_str())
    .execute(conn)
    .await?;
    Ok(id)
}

/// The newest job of a kind for a subject, to show its state.
pub async fn latest(db: &Db, kind: &str, subject_id: &str) -> Result<Option<Job>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "SELECT {JOB_COLUMNS} FROM jobs WHERE kind = $1 AND subject_id = $2 ORDER BY created_at DESC, id DESC LIMIT 1"
    ))
    .bind(kind)
    .bind(subject_id)
    .fetch_optional(db.pool())
    .await?;
    row.as_ref().map(job_from_row).transpose()
}

#[async_trait::async_trait]
pub trait JobHandler: Send + Sync + 'static {
    /// Does the work. Runs again after a crash or an error, so it must be idempotent.
    async fn run(&self, job: &Job) -> anyhow::Result<()>;
    /// Called once when the last attempt has failed.
    async fn gave_up(&self, _job: &Job, _error: &str) -> anyhow::Result<()> {
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// How long a claimed job belongs to its worker without a heartbeat.
    pub lease: Duration,
    /// How often the table is looked at when nobody rings.
    pub poll: Duration,
    /// The ceiling of the first retry's wait; each next one doubles it, up to 5 minutes (the
    /// wait is drawn below the ceiling: [`Backoff`]).
    pub backoff: Duration,
    /// Jobs run at the same time by one runner.
    pub concurrency: usize,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(500),
            backoff: Duration::from_secs(2),
            concurrency: 2,
        }
    }
}

impl RunnerConfig {
    /// Defaults, with `SWITCHBOARD_JOB_LEASE_MS` and `SWITCHBOARD_JOB_BACKOFF_MS` applied.
    pub fn from_env() -> Self {
        let ms = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok()).map(Duration::from_millis);
        let mut config = Self::default();
        if let Some(lease) = ms("SWITCHBOARD_JOB_LEASE_MS") {
            config.lease = lease.max(Duration::from_millis(200));
        }
        if let Some(backoff) = ms("SWITCHBOARD_JOB_BACKOFF_MS") {
            config.backoff = backoff;
        }
        config
    }
}

/// Claims and runs jobs until shut down.
pub struct Runner {
    db: Db,
    handlers: HashMap<String, Arc<dyn JobHandler>>,
    config: RunnerConfig,
    wake: Arc<Notify>,
    /// Whose queue the metrics report.
    component: &'static str,
}

/// Runs `work` at once and then every `interval` until the task is aborted; a failure is logged
/// as `what` failed.
fn every<F, Fut>(interval: Duration, what: &'static str, runner: Arc<Runner>, work: F) -> tokio::task::JoinHandle<()>
where
    F: Fn(Arc<Runner>) -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    tokio::spawn(async move {
        loop {
            if let Err(error) = work(runner.clone()).await {
                tracing::warn!(error = format!("{error:#}"), "{what} failed");
            }
            tokio::time::sleep(interval).await;
        }
    })
}

/// How often the queue's depth and age are sampled for the metrics.
const QUEUE_SAMPLE_EVERY: Duration = Duration::from_secs(15);

impl Runner {
    pub fn new(db: Db, config: RunnerConfig) -> Self {
        Self { db, handlers: HashMap::new(), config, wake: Arc::new(Notify::new()), component: "jobs" }
    }

    /// Names the component whose queue this is, in the metrics.
    pub fn component(mut self, component: &'static str) -> Self {
        self.component = component;
        self
    }

    pub fn handle(mut self, kind: &str, handler: Arc<dyn JobHandler>) -> Self {
        self.handlers.insert(kind.to_owned(), handler);
        self
    }

    /// Uses a waker made before the runner (by the service that queues the jobs).
    pub fn with_waker(mut self, wake: Arc<Notify>) -> Self {
        self.wake = wake;
        self
    }

    /// Ring it after committing a job so that it starts now rather than at the next poll.
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let runner = Arc::new(self);
        let mut workers = Vec::new();
        for _ in 0..runner.config.concurrency.max(1) {
            let runner = runner.clone();
            let shutdown = shutdown.clone();
            workers.push(tokio::spawn(async move { runner.work(shutdown).await }));
        }
        let pruner = every(Duration::from_secs(600), "pruning old jobs", runner.clone(), |runner| async move {
            runner.prune().await
        });
        let sampler = every(QUEUE_SAMPLE_EVERY, "sampling the job queue", runner.clone(), |runner| async move {
            crate::metrics::record_queues(runner.component, runner.queues().await?);
            Ok(())
        });
        let _ = shutdown.wait_for(|stop| *stop).await;
        for worker in workers {
            let _ = worker.await;
        }
        pruner.abort();
        sampler.abort();
    }

    /// Per kind: jobs waiting or running, and the age of the oldest in seconds.
    async fn queues(&self) -> anyhow::Result<Vec<(String, u64, f64)>> {
        let rows = sqlx::query(
            "SELECT kind, COUNT(*) AS waiting, MIN(created_at) AS oldest FROM jobs \
             WHERE status IN ($1, $2) GROUP BY kind",
        )
        .bind(JobStatus::Queued.as_str())
        .bind(JobStatus::Running.as_str())
        .fetch_all(self.db.pool())
        .await
        .context("counting waiting jobs")?;
        let now = now_ms();
        rows.iter()
            .map(|row| {
                let (kind, waiting, oldest): (String, i64, i64) =
                    (row.try_get("kind")?, row.try_get("waiting")?, row.try_get("oldest")?);
                Ok((kind, u64::try_from(waiting).unwrap_or(0), (now - oldest).max(0) as f64 / 1000.0))
            })
            .collect()
    }

    async fn work(&self, mut shutdown: watch::Receiver<bool>) {
        while !*shutdown.borrow() {
            match self.claim().await {
                Ok(Some(job)) => self.execute(job).await,
                Ok(None) => {
                    tokio::select! {
                        _ = self.wake.notified() => {}
                        _ = tokio::time::sleep(self.config.poll) => {}
                        _ = shutdown.changed() => {}
                    }
                }
                Err(error) => {
                    tracing::warn!(error = format!("{error:#}"), "claiming a job failed");
                    tokio::time::sleep(self.config.poll).await;
                }
            }
        }
    }

    async fn claim(&self) -> anyhow::Result<Option<Job>> {
        if self.handlers.is_empty() {
            return Ok(None);
        }
        let kinds: Vec<&String> = self.handlers.keys().collect();
        let placeholders: Vec<String> = (0..kinds.len()).map(|i| format!("${}", i + 3)).collect();
        let now = now_ms();
        let lease_until = now + i64::try_from(self.config.lease.as_millis()).unwrap_or(i64::MAX / 2);
        let sql = format!(
            "UPDATE jobs SET status = '{running}', attempts = attempts + 1, lease_until = $1, updated_at = $2 \
             WHERE id = (SELECT id FROM jobs WHERE kind IN ({}) AND \
             ((status = '{queued}' AND run_after <= $2) OR (status = '{running}' AND lease_until < $2)) \
             ORDER BY run_after, created_at LIMIT 1{}) RETURNING {JOB_COLUMNS}",
            placeholders.join(", "),
            self.db.for_update_skip_locked(),
            running = JobStatus::Running,
            queued = JobStatus::Queued,
        );
        let mut query = sqlx::query(&sql).bind(lease_until).bind(now);
        for kind in kinds {
            query = query.bind(kind.as_str());
        }
        let mut tx = self.db.begin_write().await.context("starting the claim")?;
        let row = query.fetch_optional(&mut *tx).await.context("claiming a job")?;
        tx.commit().await.context("committing the claim")?;
        Ok(row.as_ref().map(job_from_row).transpose()?)
    }

    async fn execute(&self, job: Job) {
        let Some(handler) = self.handlers.get(&job.kind).cloned() else {
            return;
        };
        // A trace of its own: without an explicit root, the span would take whatever trace
        // context the worker thread has current (a request's, met in a shared runtime).
        let span = tracing::info_span!(parent: None, "job", id = %job.id, kind = %job.kind, attempt = job.attempts);
        let heartbeat = self.heartbeat(&job.id);
        let outcome = tokio::select! {
            outcome = tracing::Instrument::instrument(handler.run(&job), span.clone()) => outcome,
            () = heartbeat => Err(anyhow::anyhow!("heartbeat stopped")),
        };
        // Instrumented, not entered: an entered span held across an await stays current on
        // the worker thread for whatever other task runs there meanwhile.
        let record = async {
            match outcome {
                Ok(()) => self.finish(&job.id, JobStatus::Completed, None, None).await,
                Err(error) => {
                    let message = format!("{error:#}");
                    if job.attempts < job.max_attempts {
                        tracing::warn!(error = %message, "job failed, will retry");
                        let failures = u32::try_from(job.attempts).unwrap_or(u32::MAX);
                        let delay = Backoff::new(self.config.backoff, MOST_BACKOFF).after(failures);
                        let run_after = now_ms() + i64::try_from(delay.as_millis()).unwrap_or(300_000);
                        self.finish(&job.id, JobStatus::Queued, Some(&message), Some(run_after)).await
                    } else {
                        tracing::error!(error = %message, "job failed for good");
                        if let Err(error) = handler.gave_up(&job, &message).await {
                            tracing::error!(error = format!("{error:#}"), "recording the failure failed");
                        }
                        self.finish(&job.id, JobStatus::Failed, Some(&message), None).await
                    }
                }
            }
        };
        let recorded = tracing::Instrument::instrument(record, span).await;
        if let Err(error) = recorded {
            tracing::error!(error = format!("{error:#}"), "recording the job's outcome failed");
        }
    }

    /// Keeps extending the lease while the job runs; never completes unless the database
    /// stops answering, in which case the job is abandoned for another worker to retry.
    async fn heartbeat(&self, id: &str) {
        let beat = self.config.lease / 3;
        let mut failures = 0;
        loop {
            tokio::time::sleep(beat).await;
            let lease_until = now_ms() + i64::try_from(self.config.lease.as_millis()).unwrap_or(i64::MAX / 2);
            let renewed = sqlx::query("UPDATE jobs SET lease_until = $1 WHERE id = $2 AND status = $3")
                .bind(lease_until)
                .bind(id)
                .bind(JobStatus::Running.as_str())
                .execute(self.db.pool())
                .await;
            failures = if renewed.is_ok() { 0 } else { failures + 1 };
            if failures >= 3 {
                return;
            }
        }
    }

    async fn finish(
        &self,
        id: &str,
        status: JobStatus,
        error: Option<&str>,
        run_after: Option<i64>,
    ) -> anyhow::Result<()> {
        let now = now_ms();
        sqlx::query(
            "UPDATE jobs SET status = $1, last_error = $2, run_after = COALESCE($3, run_after), lease_until = NULL, \
             updated_at = $4 WHERE id = $5",
        )
        .bind(status.as_str())
        .bind(error)
        .bind(run_after)
        .bind(now)
        .bind(id)
        .execute(self.db.pool())
        .await
        .context("updating the job")?;
        Ok(())
    }

    async fn prune(&self) -> anyhow::Result<()> {
        sqlx::query("DELETE FROM jobs WHERE status = $2 AND updated_at < $1")
            .bind(now_ms() - KEEP_COMPLETED_MS)
            .bind(JobStatus::Completed.as_str())
            .execute(self.db.pool())
            .await
            .context("deleting old completed jobs")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_faithful_copy_passes_and_a_drifted_one_is_named() {
        let postgres = TABLE_DDL.replace("INTEGER", "BIGINT");
        let migration = format!("CREATE TABLE agents (id TEXT);\n{postgres}");
        assert_eq!(check_migration(&migration, Engine::Postgres), Ok(()));
        assert!(check_migration(&migration, Engine::Sqlite).is_err(), "BIGINT is not the SQLite copy");
        let drifted = migration.replace("last_error TEXT,", "last_error TEXT, note TEXT,");
        let error = check_migration(&drifted, Engine::Postgres).unwrap_err();
        assert!(error.contains("note TEXT"), "{error}");
        assert!(check_migration("CREATE TABLE agents (id TEXT);", Engine::Sqlite).is_err());
    }
}
