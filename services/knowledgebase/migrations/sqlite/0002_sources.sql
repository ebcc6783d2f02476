-- Webpages and uploaded documents of a knowledge base. Their Q&A entries live in
-- `entries` (source_type 'webpage' or 'document', source_id naming the row here) and are
-- replaced as a whole each time the source is scraped or extracted.

-- status: pending (first scrape queued or running), refreshing (a refresh was accepted),
-- ready, failed (failure_reason says why; the entries of the last good scrape stay).
-- last_refresh_requested_at drives the once-per-24-hours refresh rule.
CREATE TABLE webpages (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    knowledgebase_id TEXT NOT NULL REFERENCES knowledgebases (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    url TEXT NOT NULL,
    notes TEXT,
    status TEXT NOT NULL CHECK (status IN ('pending', 'refreshing', 'ready', 'failed')),
    failure_reason TEXT,
    last_scraped_at INTEGER,
    last_refresh_requested_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX webpages_knowledgebase ON webpages (knowledgebase_id, created_at);

-- The file itself is in object storage under object_key; it never changes.
CREATE TABLE documents (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    knowledgebase_id TEXT NOT NULL REFERENCES knowledgebases (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    notes TEXT,
    file_name TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    object_key TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'ready', 'failed')),
    failure_reason TEXT,
    extracted_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX documents_knowledgebase ON documents (knowledgebase_id, created_at);
