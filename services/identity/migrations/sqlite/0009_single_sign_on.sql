-- Single sign-on with OpenID Connect, per team: the team's identity provider, the e-mail
-- domains it covers (each domain belongs to one team), and the sign-ins under way.
CREATE TABLE sso_configs (
    team_id TEXT PRIMARY KEY REFERENCES teams (id),
    issuer TEXT NOT NULL,
    client_id TEXT NOT NULL,
    client_secret TEXT NOT NULL,
    -- The role of people created at their first sign-in.
    default_role TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE sso_domains (
    domain TEXT PRIMARY KEY,
    team_id TEXT NOT NULL REFERENCES teams (id)
);
CREATE INDEX sso_domains_team ON sso_domains (team_id);

-- One per redirect to the provider: the OAuth state (as SHA-256), bound to the browser that
-- started it (a cookie's SHA-256), with the nonce and PKCE verifier the answer must match.
CREATE TABLE sso_logins (
    id TEXT PRIMARY KEY,
    state_hash TEXT NOT NULL UNIQUE,
    binding_hash TEXT NOT NULL,
    team_id TEXT NOT NULL REFERENCES teams (id),
    nonce TEXT NOT NULL,
    pkce_verifier TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
);

-- The provider's subject a user signs in as (`issuer` and `sub`); NULL for password users.
ALTER TABLE users ADD COLUMN sso_subject TEXT;
CREATE UNIQUE INDEX users_sso_subject ON users (sso_subject) WHERE sso_subject IS NOT NULL;
-- How a session began: `password` (and a second factor when the user has one) or `sso`.
ALTER TABLE sessions ADD COLUMN method TEXT NOT NULL DEFAULT 'password';
