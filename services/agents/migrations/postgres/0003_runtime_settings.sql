-- Issue 41: an agent's runtime settings (the encoded switchboard.v1.AgentSettings; NULL for
-- none), versioned with its instructions, and the log of agent changes that WatchAgents
-- replays from a version (rows older than 7 days are pruned; the newest is always kept).
ALTER TABLE agents ADD COLUMN settings BYTEA;
ALTER TABLE instruction_versions ADD COLUMN settings BYTEA;

CREATE TABLE agent_changes (
    seq BIGSERIAL PRIMARY KEY,
    team_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('updated', 'deleted')),
    at BIGINT NOT NULL
);
CREATE INDEX agent_changes_team ON agent_changes (team_id, seq);
CREATE INDEX agent_changes_at ON agent_changes (at);
