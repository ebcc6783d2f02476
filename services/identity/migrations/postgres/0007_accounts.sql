-- People who sign in: a password on a user, sessions, single-use links (invitations and
-- password resets) and the audit log.

-- Argon2id PHC string; NULL for a user who has never set one (cannot sign in).
ALTER TABLE users ADD COLUMN password_hash TEXT;
-- The e-mail as compared: lower-case. At most one account that can sign in per address.
ALTER TABLE users ADD COLUMN email_key TEXT;
ALTER TABLE users ADD COLUMN last_sign_in_at BIGINT;
UPDATE users SET email_key = LOWER(email);
CREATE UNIQUE INDEX users_account_email ON users (email_key) WHERE password_hash IS NOT NULL;
CREATE INDEX users_email_key ON users (email_key);

-- Opaque tokens, stored as their SHA-256; ended_at set by sign-out, a password change or the
-- user's removal.
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    team_id TEXT NOT NULL REFERENCES teams (id),
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    ended_at BIGINT,
    ip TEXT NOT NULL DEFAULT '',
    user_agent TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE link_tokens (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL CHECK (kind IN ('invite', 'reset')),
    team_id TEXT NOT NULL REFERENCES teams (id),
    email TEXT NOT NULL,
    role TEXT NOT NULL,
    -- Set when the link is for an existing user (a subteam's first user, a reset).
    user_id TEXT REFERENCES users (id) ON DELETE CASCADE,
    created_by_type TEXT,
    created_by_id TEXT,
    created_by_name TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT
);
CREATE INDEX link_tokens_team ON link_tokens (team_id, created_at);

CREATE TABLE audit_log (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL REFERENCES teams (id),
    action TEXT NOT NULL,
    actor_type TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    actor_name TEXT NOT NULL,
    target TEXT NOT NULL,
    ip TEXT NOT NULL,
    user_agent TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX audit_log_team ON audit_log (team_id, created_at);
CREATE INDEX audit_log_team_action ON audit_log (team_id, action, created_at);
