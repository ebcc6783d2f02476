-- Who made a key through the API: the key (or, with sessions, the user) that created it.
-- NULL for keys made by an operator with `switchboard admin` and for keys made before.
ALTER TABLE api_keys ADD COLUMN created_by_type TEXT;
ALTER TABLE api_keys ADD COLUMN created_by_id TEXT;
ALTER TABLE api_keys ADD COLUMN created_by_name TEXT;
