-- A 1,024-bit trigram signature of all the search text of each call and chat
-- (switchboard_kit::signature), which frequent searches check before probing the text.
--
-- The default has every bit set: such a row passes every check and is probed as before, so no
-- match is lost. That is what rows existing when this runs get (their signatures are not
-- rebuilt), and what any writer gets that does not keep signatures. The store inserts calls
-- and chats with an empty signature and ORs in the bits of each text it adds to them. Adding a
-- column with a constant default rewrites nothing (PostgreSQL 11+). SQLite has no such
-- column: its FTS5 index answers searches without walking a sort index.
ALTER TABLE calls ADD COLUMN text_signature bit(1024) NOT NULL DEFAULT ~(B'0'::bit(1024));
ALTER TABLE chats ADD COLUMN text_signature bit(1024) NOT NULL DEFAULT ~(B'0'::bit(1024));
