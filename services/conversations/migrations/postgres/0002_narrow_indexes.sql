-- Narrower list indexes, and text indexes that start from the team.
--
-- The list indexes of 0001 held every filtered column so that a page could be found from the
-- index alone. Measured at 100,000 calls per team they lost: every call is updated when it
-- ends (duration, end time), each update adds an entry to all five wide indexes (44-78 MB
-- each), and COUNT(*) over a bloated index was the cost of GET /calls (p99 87 ms). One index
-- per sort key, (team, key, id), plus one per selective filter brought the same request mix
-- to p99 16 ms (bench/conversations.sh, BENCHMARKS.md). Chats get the same shape: their
-- last_message_at changes with every message.
--
-- The trigram indexes now lead with the team (btree_gin, a trusted extension like pg_trgm),
-- so that a search reads only its team's candidates instead of every team's.
--
-- CREATE INDEX without CONCURRENTLY blocks writes to the table while it builds: on a large
-- existing database, run this migration in a quiet hour.
CREATE EXTENSION IF NOT EXISTS btree_gin;

DROP INDEX calls_started;
DROP INDEX calls_duration;
DROP INDEX calls_ended;
DROP INDEX calls_agent;
DROP INDEX calls_direction;
CREATE INDEX calls_started ON calls (team_id, started_at, id);
CREATE INDEX calls_duration ON calls (team_id, duration_seconds, id);
CREATE INDEX calls_ended ON calls (team_id, ended_at, id);
CREATE INDEX calls_agent ON calls (team_id, agent_id, started_at);
CREATE INDEX calls_direction ON calls (team_id, direction, started_at);
CREATE INDEX calls_direction_duration ON calls (team_id, direction, duration_seconds);

DROP INDEX chats_created;
DROP INDEX chats_last_message;
DROP INDEX chats_agent;
DROP INDEX chats_channel;
DROP INDEX chats_status;
CREATE INDEX chats_created ON chats (team_id, created_at, id);
CREATE INDEX chats_last_message ON chats (team_id, last_message_at, id);
CREATE INDEX chats_agent ON chats (team_id, agent_id, created_at);
CREATE INDEX chats_channel ON chats (team_id, channel, created_at);
CREATE INDEX chats_status ON chats (team_id, status, created_at);

DROP INDEX call_search_body;
DROP INDEX chat_search_body;
CREATE INDEX call_search_body ON call_search USING gin (team_id, body gin_trgm_ops);
CREATE INDEX chat_search_body ON chat_search USING gin (team_id, body gin_trgm_ops);
