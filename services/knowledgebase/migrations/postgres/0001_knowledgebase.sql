-- Knowledge bases and their Q&A entries. Entries are the truth; the vector index is
-- derived from them. Timestamps are milliseconds since the Unix epoch.

CREATE TABLE knowledgebases (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    name TEXT,
    description TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX knowledgebases_team ON knowledgebases (team_id, created_at);

-- Manual references (source_type 'manual') and entries extracted from a webpage or a
-- document (source_id names it). The embedding is kept so that the index can be rebuilt
-- without the model.
CREATE TABLE entries (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    knowledgebase_id TEXT NOT NULL REFERENCES knowledgebases (id) ON DELETE CASCADE,
    source_type TEXT NOT NULL CHECK (source_type IN ('manual', 'webpage', 'document')),
    source_id TEXT,
    position BIGINT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    embedding BYTEA NOT NULL,
    embedding_model TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX entries_knowledgebase ON entries (knowledgebase_id, source_type, created_at);
CREATE INDEX entries_source ON entries (source_id, position);

-- Changes committed to SQL and not yet applied to the vector index. Written in the same
-- transaction as the entries; removed once the index has them. What is left after a crash
-- is applied at start.
CREATE TABLE index_outbox (
    id TEXT PRIMARY KEY,
    entry_id TEXT NOT NULL,
    knowledgebase_id TEXT NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('upsert', 'delete', 'delete_knowledgebase')),
    created_at BIGINT NOT NULL
);

CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    team_id TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed')),
    attempts BIGINT NOT NULL,
    max_attempts BIGINT NOT NULL,
    run_after BIGINT NOT NULL,
    lease_until BIGINT,
    last_error TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX jobs_ready ON jobs (status, run_after);
CREATE INDEX jobs_subject ON jobs (subject_id, kind, created_at);
