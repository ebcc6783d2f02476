-- A team's webhook endpoints. `events` is a JSON array of event types; `secret` is the
-- `whsec_...` signing secret (needed in clear to sign, shown to the team once).
CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    description TEXT,
    secret TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'failing')),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX webhooks_team ON webhooks (team_id, created_at);

-- Events published by the services, with the body every delivery of them sends.
CREATE TABLE events (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    type TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    body TEXT NOT NULL,
    occurred_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX events_created ON events (created_at);

-- One event to one endpoint. `seq` orders the deliveries of a subject; `next_attempt_at`
-- is set while pending; a claimed delivery has `lease_until` in the future.
CREATE TABLE deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    webhook_id TEXT NOT NULL,
    team_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL,
    status_code INTEGER,
    duration_ms INTEGER,
    error TEXT,
    next_attempt_at INTEGER,
    lease_until INTEGER,
    give_up_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    last_attempt_at INTEGER,
    UNIQUE (webhook_id, event_id)
);
CREATE INDEX deliveries_due ON deliveries (status, next_attempt_at);
CREATE INDEX deliveries_subject ON deliveries (webhook_id, subject_id, status, seq);
CREATE INDEX deliveries_event ON deliveries (event_id);
