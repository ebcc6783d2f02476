-- The resources that writes with an Idempotency-Key created, by the key's digest: a retry
-- after an answer that was lost (a 5xx after the commit) gets the same resource
-- (switchboard_kit::write_keys).
CREATE TABLE write_keys (
    team_id TEXT NOT NULL,
    write_key TEXT NOT NULL,
    operation TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (team_id, write_key, operation)
);
CREATE INDEX write_keys_created_at ON write_keys (created_at);
