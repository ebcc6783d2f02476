-- Narrower list indexes, as on PostgreSQL (see its 0002): one per sort key, (team, key, id),
-- plus one per selective filter. Wide indexes grew with every update of a call's end and
-- a chat's last message, and their size, not the page, was the cost of a list's count.
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
