-- Re-authentication (issue 53): a person's factors, password, address and sessions change
-- only within a few minutes of a proof of who they are; `authenticated_at` is when this
-- session last gave one (its sign-in, or POST /v1/auth/reauthenticate). Sessions begun before
-- this column existed have none: they prove themselves again before such a change.
ALTER TABLE sessions ADD COLUMN authenticated_at INTEGER;

-- What a second-factor challenge finishes: a sign-in (`sign_in`), a password reset (`reset`:
-- the session it begins lists the passkeys that still sign in), or the re-authentication of a
-- session (`reauth`: made and used within one request, counted with the person's failures).
ALTER TABLE sign_in_challenges ADD COLUMN purpose TEXT NOT NULL DEFAULT 'sign_in';
