-- Calls (with their transcript, timeline and recording), chats (with their messages), the
-- text their searches read, and jobs. Timestamps are milliseconds since the Unix epoch; flags
-- are 0/1. PostgreSQL has the same tables (BIGINT for INTEGER); only the text index differs.

-- A call as its runtime reports it, named by the runtime's external_id within the team.
-- duration_seconds and ended_at stay NULL while the call is in progress.
CREATE TABLE calls (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    external_id TEXT NOT NULL,
    agent_id TEXT,
    from_number TEXT NOT NULL,
    to_number TEXT NOT NULL,
    direction TEXT NOT NULL CHECK (direction IN ('INCOMING', 'OUTGOING')),
    status TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    duration_seconds INTEGER,
    summary TEXT,
    score REAL,
    flagged INTEGER NOT NULL,
    favorite INTEGER NOT NULL,
    spam INTEGER NOT NULL,
    recording_object_key TEXT,
    recording_content_type TEXT,
    recording_size_bytes INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (team_id, external_id)
);
-- One index per sort key (ties broken by id) and per selective filter of GET /calls. Each
-- also holds the other filtered columns, so that a page's ids are found and sorted from the
-- index alone, whichever filters apply.
CREATE INDEX calls_started ON calls (team_id, started_at, id, direction, agent_id, duration_seconds, ended_at);
CREATE INDEX calls_duration ON calls (team_id, duration_seconds, id, direction, agent_id, started_at, ended_at);
CREATE INDEX calls_ended ON calls (team_id, ended_at, id, direction, agent_id, duration_seconds, started_at);
CREATE INDEX calls_agent ON calls (team_id, agent_id, started_at, id, direction, duration_seconds, ended_at);
CREATE INDEX calls_direction ON calls (team_id, direction, started_at, id, agent_id, duration_seconds, ended_at);
CREATE INDEX calls_from ON calls (team_id, from_number, started_at);
CREATE INDEX calls_to ON calls (team_id, to_number, started_at);

-- What was said, named by seq within the call; offset_ms counts from the call's start.
CREATE TABLE call_segments (
    call_id TEXT NOT NULL REFERENCES calls (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    speaker TEXT NOT NULL CHECK (speaker IN ('agent', 'caller')),
    text TEXT NOT NULL,
    offset_ms INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (call_id, seq)
);

-- The call's timeline; id keeps the order of arrival among events of the same time.
CREATE TABLE call_events (
    id INTEGER PRIMARY KEY,
    call_id TEXT NOT NULL REFERENCES calls (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    type TEXT NOT NULL,
    occurred_at INTEGER NOT NULL,
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX call_events_call ON call_events (call_id, occurred_at, id);

-- A chat, named by the runtime's external_id within the team; status 'active' until ended.
CREATE TABLE chats (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    external_id TEXT NOT NULL,
    agent_id TEXT,
    channel TEXT NOT NULL CHECK (channel IN ('web', 'web-agent', 'voice-widget', 'whatsapp')),
    status TEXT NOT NULL CHECK (status IN ('active', 'ended')),
    contact_number TEXT,
    contact_email TEXT,
    message_count INTEGER NOT NULL,
    last_message_at INTEGER,
    created_at INTEGER NOT NULL,
    ended_at INTEGER,
    summary TEXT,
    updated_at INTEGER NOT NULL,
    UNIQUE (team_id, external_id)
);
CREATE INDEX chats_created ON chats (team_id, created_at, id, channel, agent_id, status);
CREATE INDEX chats_last_message ON chats (team_id, last_message_at, id, channel, agent_id, status, created_at);
CREATE INDEX chats_agent ON chats (team_id, agent_id, created_at, id, channel, status, last_message_at);
CREATE INDEX chats_channel ON chats (team_id, channel, created_at, id, agent_id, status, last_message_at);
CREATE INDEX chats_status ON chats (team_id, status, created_at, id, channel, agent_id, last_message_at);

-- A chat's messages, named by the runtime's external_id within the chat.
CREATE TABLE chat_messages (
    id TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    external_id TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'agent', 'system')),
    text TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (chat_id, external_id)
);
CREATE INDEX chat_messages_chat ON chat_messages (chat_id, created_at, id);

-- The text searches read, lowercased: for a call one 'meta' row (its numbers and summary)
-- and one 'transcript' row per append; for a chat one 'contact' row (number and e-mail) and
-- one 'messages' row per append. Rows are only inserted and deleted, never updated.
CREATE TABLE call_search (
    id INTEGER PRIMARY KEY,
    call_id TEXT NOT NULL REFERENCES calls (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('meta', 'transcript')),
    body TEXT NOT NULL
);
CREATE INDEX call_search_call ON call_search (call_id, source);
CREATE INDEX call_search_team ON call_search (team_id);

CREATE TABLE chat_search (
    id INTEGER PRIMARY KEY,
    chat_id TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('contact', 'messages')),
    body TEXT NOT NULL
);
CREATE INDEX chat_search_chat ON chat_search (chat_id, source);
CREATE INDEX chat_search_team ON chat_search (team_id);

-- Trigram indexes over the bodies above (external content: the text is stored once, in the
-- table), so that a substring of 3 or more characters is found without reading every row.
-- The triggers keep them in step with their tables, cascaded deletes included.
CREATE VIRTUAL TABLE call_search_fts USING fts5 (body, content = 'call_search', content_rowid = 'id', tokenize = 'trigram');
CREATE TRIGGER call_search_added AFTER INSERT ON call_search BEGIN
    INSERT INTO call_search_fts (rowid, body) VALUES (new.id, new.body);
END;
CREATE TRIGGER call_search_removed AFTER DELETE ON call_search BEGIN
    INSERT INTO call_search_fts (call_search_fts, rowid, body) VALUES ('delete', old.id, old.body);
END;
CREATE TRIGGER call_search_changed AFTER UPDATE ON call_search BEGIN
    INSERT INTO call_search_fts (call_search_fts, rowid, body) VALUES ('delete', old.id, old.body);
    INSERT INTO call_search_fts (rowid, body) VALUES (new.id, new.body);
END;

CREATE VIRTUAL TABLE chat_search_fts USING fts5 (body, content = 'chat_search', content_rowid = 'id', tokenize = 'trigram');
CREATE TRIGGER chat_search_added AFTER INSERT ON chat_search BEGIN
    INSERT INTO chat_search_fts (rowid, body) VALUES (new.id, new.body);
END;
CREATE TRIGGER chat_search_removed AFTER DELETE ON chat_search BEGIN
    INSERT INTO chat_search_fts (chat_search_fts, rowid, body) VALUES ('delete', old.id, old.body);
END;
CREATE TRIGGER chat_search_changed AFTER UPDATE ON chat_search BEGIN
    INSERT INTO chat_search_fts (chat_search_fts, rowid, body) VALUES ('delete', old.id, old.body);
    INSERT INTO chat_search_fts (rowid, body) VALUES (new.id, new.body);
END;

-- What ANALYZE would say of a busy database (many teams, a team with many conversations, an
-- agent or a direction with a share of them, a number with few), until ANALYZE says better.
-- Without any figures SQLite's planner takes `team_id = ?` for a selective condition and,
-- for example, reads all of a team's calls to find the five from one number.
ANALYZE sqlite_schema;
DELETE FROM sqlite_stat1 WHERE tbl IN ('calls', 'call_segments', 'call_events', 'call_search', 'chats', 'chat_messages', 'chat_search');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('calls', 'sqlite_autoindex_calls_1', '1000000 1'),
    ('calls', 'sqlite_autoindex_calls_2', '1000000 10000 1'),
    ('calls', 'calls_started', '1000000 10000 1 1 1 1 1 1'),
    ('calls', 'calls_duration', '1000000 10000 20 1 1 1 1 1'),
    ('calls', 'calls_ended', '1000000 10000 2 1 1 1 1 1'),
    ('calls', 'calls_agent', '1000000 10000 1000 1 1 1 1 1'),
    ('calls', 'calls_direction', '1000000 10000 5000 1 1 1 1 1'),
    ('calls', 'calls_from', '1000000 10000 5 1'),
    ('calls', 'calls_to', '1000000 10000 5 1'),
    ('call_segments', 'sqlite_autoindex_call_segments_1', '20000000 20 1'),
    ('call_events', 'call_events_call', '5000000 5 1 1'),
    ('call_search', 'call_search_call', '3000000 3 2'),
    ('call_search', 'call_search_team', '3000000 30000'),
    ('chats', 'sqlite_autoindex_chats_1', '1000000 1'),
    ('chats', 'sqlite_autoindex_chats_2', '1000000 10000 1'),
    ('chats', 'chats_created', '1000000 10000 1 1 1 1 1'),
    ('chats', 'chats_last_message', '1000000 10000 2 1 1 1 1 1'),
    ('chats', 'chats_agent', '1000000 10000 1000 1 1 1 1 1'),
    ('chats', 'chats_channel', '1000000 10000 2500 1 1 1 1 1'),
    ('chats', 'chats_status', '1000000 10000 5000 1 1 1 1 1'),
    ('chat_messages', 'sqlite_autoindex_chat_messages_1', '10000000 1'),
    ('chat_messages', 'sqlite_autoindex_chat_messages_2', '10000000 10 1'),
    ('chat_messages', 'chat_messages_chat', '10000000 10 1 1'),
    ('chat_search', 'chat_search_chat', '3000000 3 2'),
    ('chat_search', 'chat_search_team', '3000000 30000');

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
