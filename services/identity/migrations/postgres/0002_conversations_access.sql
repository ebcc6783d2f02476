-- The `conversations` access flag (calls and chats) of a client subteam; on unless switched off.
ALTER TABLE teams ADD COLUMN access_conversations INTEGER NOT NULL DEFAULT 1;
