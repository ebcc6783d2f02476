-- Identity: teams and the agency tree, users, API keys, credits, subscriptions.
-- Timestamps are milliseconds since the Unix epoch; flags are 0/1 integers.

CREATE TABLE teams (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    parent_team_id TEXT REFERENCES teams (id),
    owns_agency BIGINT NOT NULL DEFAULT 0,
    monthly_credits BIGINT NOT NULL DEFAULT 0,
    access_users BIGINT NOT NULL DEFAULT 1,
    access_instructions BIGINT NOT NULL DEFAULT 1,
    access_instructions_write BIGINT NOT NULL DEFAULT 1,
    access_testing BIGINT NOT NULL DEFAULT 1,
    access_knowledge_base BIGINT NOT NULL DEFAULT 1,
    access_agent_configuration BIGINT NOT NULL DEFAULT 1,
    access_agent_creation BIGINT NOT NULL DEFAULT 1,
    created_at BIGINT NOT NULL,
    deleted_at BIGINT
);
CREATE INDEX teams_parent ON teams (parent_team_id, created_at);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL REFERENCES teams (id),
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    email TEXT NOT NULL,
    role TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (team_id, email)
);

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL REFERENCES teams (id),
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    key_hash TEXT NOT NULL UNIQUE,
    access TEXT NOT NULL CHECK (access IN ('full', 'read_only')),
    created_at BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at BIGINT
);
CREATE INDEX api_keys_team ON api_keys (team_id, created_at);

CREATE TABLE credit_balances (
    team_id TEXT PRIMARY KEY REFERENCES teams (id),
    balance BIGINT NOT NULL CHECK (balance >= 0),
    updated_at BIGINT NOT NULL
);

-- Append-only: every change of a balance is one row here, written in the same
-- transaction as the balance.
CREATE TABLE credit_ledger (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL REFERENCES teams (id),
    delta BIGINT NOT NULL,
    balance_after BIGINT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('grant', 'debit', 'refund', 'transfer_in', 'transfer_out')),
    reason TEXT NOT NULL,
    reference_id TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX credit_ledger_team ON credit_ledger (team_id, created_at);
-- A debit is given back at most once.
CREATE UNIQUE INDEX credit_ledger_one_refund ON credit_ledger (reference_id) WHERE kind = 'refund';

CREATE TABLE subscriptions (
    team_id TEXT PRIMARY KEY REFERENCES teams (id),
    plan TEXT NOT NULL,
    status TEXT NOT NULL,
    current_period_end BIGINT
);
