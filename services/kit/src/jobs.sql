-- The jobs table of switchboard_kit::jobs; copied into the migrations of each service that
-- runs jobs (INTEGER becomes BIGINT for PostgreSQL).
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
