-- Issue 41: an agent's runtime settings (the encoded switchboard.v1.AgentSettings; NULL for
-- none), versioned with its instructions, and the log of agent changes that WatchAgents
-- replays from a version (rows older than 7 days are pruned; the newest is always kept).
ALTER TABLE agents ADD COLUMN settings BLOB;
ALTER TABLE instruction_versions ADD COLUMN settings BLOB;

CREATE TABLE agent_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    team_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('updated', 'deleted')),
    at INTEGER NOT NULL
);
CREATE INDEX agent_changes_team ON agent_changes (team_id, seq);
CREATE INDEX agent_changes_at ON agent_changes (at);
