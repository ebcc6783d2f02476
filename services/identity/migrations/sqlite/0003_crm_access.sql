-- The `crm` access flag (contacts, boards, tags) of a client subteam; on unless switched off.
ALTER TABLE teams ADD COLUMN access_crm INTEGER NOT NULL DEFAULT 1;
