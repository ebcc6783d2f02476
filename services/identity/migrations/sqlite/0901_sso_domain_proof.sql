-- Single sign-on domains take effect only once proven (issue 53). A team's claims, proven or
-- not, are `sso_domain_claims`: several teams may claim a domain, none blocks another by
-- claiming it. `sso_domains` holds only proven domains (one team each, as before), with when
-- and how each was proven. The claims the release before made without proof move out of it:
-- they route no one until their team proves them.
-- (Numbered 0901, not 0013: a migration of another branch may take the next number.)
CREATE TABLE sso_domain_claims (
    team_id TEXT NOT NULL REFERENCES teams (id),
    domain TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (team_id, domain)
);
CREATE INDEX sso_domain_claims_domain ON sso_domain_claims (domain);
INSERT INTO sso_domain_claims (team_id, domain, created_at)
    SELECT d.team_id, d.domain, COALESCE(c.created_at, 0)
    FROM sso_domains d LEFT JOIN sso_configs c ON c.team_id = d.team_id;
-- NULL on a row the release before wrote during an upgrade: not proven, ignored.
ALTER TABLE sso_domains ADD COLUMN verified_at INTEGER;
-- `dns` (a TXT record) or `https` (a file on the domain's web server).
ALTER TABLE sso_domains ADD COLUMN method TEXT;
DELETE FROM sso_domains WHERE verified_at IS NULL;

-- The random token a team publishes to prove its domains; kept when its single sign-on is
-- removed, so that records already published stay valid when it is set again.
CREATE TABLE sso_proof_tokens (
    team_id TEXT PRIMARY KEY REFERENCES teams (id),
    token TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

-- How a person's link to a provider's subject was made: `created` (their first sign-in made
-- the account) or `linked` (they linked it themselves, from a session of theirs). NULL: by
-- the release before, which also linked existing accounts found by e-mail.
ALTER TABLE users ADD COLUMN sso_link TEXT;

-- A link under way: the session that began it (its token's SHA-256) and its person.
ALTER TABLE sso_logins ADD COLUMN link_session_hash TEXT;
ALTER TABLE sso_logins ADD COLUMN link_user_id TEXT;

-- People new through single sign-on are members or viewers, never admins.
UPDATE sso_configs SET default_role = 'member' WHERE default_role NOT IN ('member', 'viewer');
