-- Agents, their instructions and history, runtime prompts and jobs.
-- Timestamps are milliseconds since the Unix epoch.

CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    type TEXT NOT NULL CHECK (type IN ('phone', 'chat')),
    knowledgebase_id TEXT,
    instructions TEXT NOT NULL,
    instructions_version INTEGER NOT NULL,
    instructions_updated_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX agents_team ON agents (team_id, created_at);
CREATE INDEX agents_knowledgebase ON agents (team_id, knowledgebase_id);

-- Texts an agent's instructions had before; the newest 20 are kept.
CREATE TABLE instruction_versions (
    agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    instructions TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    replaced_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, version)
);

-- The prompt conversations use, built by the optimize_prompt job.
CREATE TABLE runtime_prompts (
    agent_id TEXT PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    instructions_version INTEGER NOT NULL,
    prompt TEXT NOT NULL,
    built_at INTEGER NOT NULL
);

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
