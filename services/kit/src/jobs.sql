-- The jobs table of switchboard_kit::jobs, the one definition: each service that runs jobs
-- has it in its migrations (INTEGER becomes BIGINT for PostgreSQL), and
-- `switchboard_kit::jobs::check_migration` in that service's tests proves the copy is exact.
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    team_id TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed')),
    attempts INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    run_after INTEGER NOT NULL,
    lease_until INTEGER,
    last_error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX jobs_ready ON jobs (status, run_after);
CREATE INDEX jobs_subject ON jobs (subject_id, kind, created_at);
