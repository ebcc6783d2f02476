-- A second factor at sign-in. A TOTP secret (RFC 6238) per user, usable once a code made from
-- it was entered; recovery codes (stored as SHA-256) for a lost authenticator; sign-ins that
-- passed the password and wait for the second factor; and whether a team requires one.
CREATE TABLE totp_factors (
    user_id TEXT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    -- Base32, as authenticator apps take it.
    secret TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    confirmed_at BIGINT,
    -- The last time step a code was accepted for: each code works once (RFC 6238 5.2).
    last_step BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE recovery_codes (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    used_at BIGINT
);
CREATE INDEX recovery_codes_user ON recovery_codes (user_id);

CREATE TABLE sign_in_challenges (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    used_at BIGINT,
    ip TEXT NOT NULL DEFAULT '',
    user_agent TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sign_in_challenges_user ON sign_in_challenges (user_id);

ALTER TABLE teams ADD COLUMN require_second_factor BIGINT NOT NULL DEFAULT 0;
