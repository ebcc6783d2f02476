-- Passkeys (WebAuthn credentials): a second factor, and a sign-in without a password. Each is
-- the serialized `webauthn_rs::Passkey` (public key, counter, backup state), found by its
-- credential id; the ceremonies under way keep their server-side state until used once.
CREATE TABLE passkeys (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    credential_id TEXT NOT NULL UNIQUE,
    passkey TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT
);
CREATE INDEX passkeys_user ON passkeys (user_id);

CREATE TABLE webauthn_ceremonies (
    id TEXT PRIMARY KEY,
    -- `register`, `second_factor` (after a password) or `sign_in` (no password).
    kind TEXT NOT NULL,
    user_id TEXT REFERENCES users (id) ON DELETE CASCADE,
    -- The pending sign-in a second-factor ceremony belongs to.
    challenge_id TEXT,
    state TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT
);
