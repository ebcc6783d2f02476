-- The CRM: contacts (with their search text, notes, assigned users, tags, custom field values
-- and places on boards), tags, kanban boards with their stages, custom field definitions,
-- and jobs. Timestamps are milliseconds since the Unix epoch; flags are 0/1. PostgreSQL has
-- the same tables (BIGINT for INTEGER, sort keys in the "C" collation, which is SQLite's
-- byte order); only the text index differs. Every row carries its team.

-- A contact, named by its number (E.164) within the team. The *_key columns are the sort
-- keys of the names: lowercased by the store, so that `ada` and `Ada` sort together on both
-- engines. The e-mail is stored lowercase and is its own sort key.
CREATE TABLE contacts (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    number TEXT NOT NULL,
    first_name TEXT,
    last_name TEXT,
    email TEXT,
    carrier TEXT,
    first_name_key TEXT,
    last_name_key TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (team_id, number)
);
-- One index per sort key of GET /contacts, ties broken by id.
CREATE INDEX contacts_created ON contacts (team_id, created_at, id);
CREATE INDEX contacts_first_name ON contacts (team_id, first_name_key, id);
CREATE INDEX contacts_last_name ON contacts (team_id, last_name_key, id);
CREATE INDEX contacts_email ON contacts (team_id, email, id);
CREATE INDEX contacts_number ON contacts (team_id, number, id);

-- The text a contact search reads, lowercased: one row per contact, its full name, e-mail
-- and number on separate lines. Replaced whenever one of them changes.
CREATE TABLE contact_search (
    id INTEGER PRIMARY KEY,
    contact_id TEXT NOT NULL UNIQUE REFERENCES contacts (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX contact_search_team ON contact_search (team_id);

-- The trigram index over the bodies (external content: the text is stored once, in the
-- table), so that a substring of 3 or more characters is found without reading every row.
-- The triggers keep it in step with its table, cascaded deletes included.
CREATE VIRTUAL TABLE contact_search_fts USING fts5 (body, content = 'contact_search', content_rowid = 'id', tokenize = 'trigram');
CREATE TRIGGER contact_search_added AFTER INSERT ON contact_search BEGIN
    INSERT INTO contact_search_fts (rowid, body) VALUES (new.id, new.body);
END;
CREATE TRIGGER contact_search_removed AFTER DELETE ON contact_search BEGIN
    INSERT INTO contact_search_fts (contact_search_fts, rowid, body) VALUES ('delete', old.id, old.body);
END;
CREATE TRIGGER contact_search_changed AFTER UPDATE ON contact_search BEGIN
    INSERT INTO contact_search_fts (contact_search_fts, rowid, body) VALUES ('delete', old.id, old.body);
    INSERT INTO contact_search_fts (rowid, body) VALUES (new.id, new.body);
END;

-- Notes on a contact, newest first.
CREATE TABLE contact_notes (
    id TEXT PRIMARY KEY,
    contact_id TEXT NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    note TEXT NOT NULL,
    type TEXT NOT NULL CHECK (type IN ('general', 'info', 'warning', 'danger')),
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX contact_notes_contact ON contact_notes (contact_id, created_at, id);

-- Users of the team (identity service) assigned to a contact.
CREATE TABLE contact_assignments (
    contact_id TEXT NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    team_id TEXT NOT NULL,
    assigned_at INTEGER NOT NULL,
    PRIMARY KEY (contact_id, user_id)
);
CREATE INDEX contact_assignments_user ON contact_assignments (team_id, user_id, contact_id);

-- Tags; names are unique in the team regardless of case (name_key is the lowercased name).
CREATE TABLE tags (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    color TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (team_id, name_key)
);

CREATE TABLE contact_tags (
    contact_id TEXT NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    tag_id TEXT NOT NULL REFERENCES tags (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    PRIMARY KEY (contact_id, tag_id)
);
CREATE INDEX contact_tags_tag ON contact_tags (tag_id, contact_id);

-- Kanban boards; their columns are stages, in position order (0-based).
CREATE TABLE boards (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX boards_team ON boards (team_id, created_at, id);

CREATE TABLE stages (
    id TEXT PRIMARY KEY,
    board_id TEXT NOT NULL REFERENCES boards (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    name TEXT NOT NULL,
    position INTEGER NOT NULL,
    color TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX stages_board ON stages (board_id, position);

-- Where a contact sits on a board: one stage per board. placed_at orders a contact's
-- placements (its crmStage is the latest); the store keeps it strictly increasing per contact.
CREATE TABLE contact_placements (
    contact_id TEXT NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    board_id TEXT NOT NULL REFERENCES boards (id) ON DELETE CASCADE,
    stage_id TEXT NOT NULL REFERENCES stages (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    placed_at INTEGER NOT NULL,
    PRIMARY KEY (contact_id, board_id)
);
CREATE INDEX contact_placements_board ON contact_placements (board_id, contact_id);
CREATE INDEX contact_placements_stage ON contact_placements (stage_id, contact_id);

-- Custom field definitions: name is the key of the values (unique in the team regardless of
-- case, name_key lowercased); options is a JSON array of strings, empty unless type is select.
CREATE TABLE custom_fields (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    label TEXT NOT NULL,
    type TEXT NOT NULL CHECK (type IN ('text', 'number', 'date', 'boolean', 'select')),
    required INTEGER NOT NULL,
    options TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (team_id, name_key)
);
CREATE INDEX custom_fields_team ON custom_fields (team_id, created_at, id);

-- A contact's value of a custom field, as compact JSON checked against the field's type.
CREATE TABLE contact_field_values (
    contact_id TEXT NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    field_id TEXT NOT NULL REFERENCES custom_fields (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (contact_id, field_id)
);
CREATE INDEX contact_field_values_field ON contact_field_values (field_id);

-- What ANALYZE would say of a busy database (many teams, a team with many contacts, a tag or
-- a board holding a share of them), until ANALYZE says better. Without any figures SQLite's
-- planner takes `team_id = ?` for a selective condition.
ANALYZE sqlite_schema;
DELETE FROM sqlite_stat1 WHERE tbl IN ('contacts', 'contact_search', 'contact_notes', 'contact_assignments', 'tags', 'contact_tags', 'boards', 'stages', 'contact_placements', 'custom_fields', 'contact_field_values');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('contacts', 'sqlite_autoindex_contacts_1', '1000000 1'),
    ('contacts', 'sqlite_autoindex_contacts_2', '1000000 10000 1'),
    ('contacts', 'contacts_created', '1000000 10000 1 1'),
    ('contacts', 'contacts_first_name', '1000000 10000 10 1'),
    ('contacts', 'contacts_last_name', '1000000 10000 10 1'),
    ('contacts', 'contacts_email', '1000000 10000 2 1'),
    ('contacts', 'contacts_number', '1000000 10000 1 1'),
    ('contact_search', 'sqlite_autoindex_contact_search_1', '1000000 1'),
    ('contact_search', 'contact_search_team', '1000000 10000'),
    ('contact_notes', 'sqlite_autoindex_contact_notes_1', '3000000 1'),
    ('contact_notes', 'contact_notes_contact', '3000000 3 1 1'),
    ('contact_assignments', 'sqlite_autoindex_contact_assignments_1', '1000000 1 1'),
    ('contact_assignments', 'contact_assignments_user', '1000000 10000 1000 1'),
    ('tags', 'sqlite_autoindex_tags_1', '10000 1'),
    ('tags', 'sqlite_autoindex_tags_2', '10000 20 1'),
    ('contact_tags', 'sqlite_autoindex_contact_tags_1', '2000000 2 1'),
    ('contact_tags', 'contact_tags_tag', '2000000 1000 1'),
    ('boards', 'sqlite_autoindex_boards_1', '1000 1'),
    ('boards', 'boards_team', '1000 2 1 1'),
    ('stages', 'sqlite_autoindex_stages_1', '5000 1'),
    ('stages', 'stages_board', '5000 5 1'),
    ('contact_placements', 'sqlite_autoindex_contact_placements_1', '1000000 1 1'),
    ('contact_placements', 'contact_placements_board', '1000000 2000 1'),
    ('contact_placements', 'contact_placements_stage', '1000000 500 1'),
    ('custom_fields', 'sqlite_autoindex_custom_fields_1', '10000 1'),
    ('custom_fields', 'sqlite_autoindex_custom_fields_2', '10000 10 1'),
    ('custom_fields', 'custom_fields_team', '10000 10 1 1'),
    ('contact_field_values', 'sqlite_autoindex_contact_field_values_1', '3000000 3 1'),
    ('contact_field_values', 'contact_field_values_field', '3000000 10000');

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
