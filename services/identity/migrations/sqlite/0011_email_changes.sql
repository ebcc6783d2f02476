-- A person's new e-mail address, waiting for its confirmation link to be opened (issue 40).
-- The token is mailed to the new address and stored as its SHA-256; only the newest request
-- of a user is live (a new one deletes the older ones); used_at is set when the address changes.
CREATE TABLE email_changes (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
);
CREATE INDEX email_changes_user ON email_changes (user_id);
