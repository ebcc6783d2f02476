-- A webhook can be paused: while `enabled` is 0 its deliveries stay pending without being
-- attempted (the API shows them as `held`), and they go out once it is enabled again.
ALTER TABLE webhooks ADD COLUMN enabled INTEGER NOT NULL DEFAULT 1;
