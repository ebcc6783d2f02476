-- What a runtime reports at a call's end beyond its summary: the analysis (sentiment, success,
-- custom fields as a JSON object), why it ended, and its cost in credits with the part the
-- balance could not cover and the ledger entry that took it. All NULL until reported. The
-- filtered and grouped ones are columns of their own, not JSON, so that the list's filters and
-- the analytics' GROUP BY read them from indexes.
ALTER TABLE calls ADD COLUMN sentiment TEXT CHECK (sentiment IN ('positive', 'neutral', 'negative', 'unknown'));
ALTER TABLE calls ADD COLUMN successful BIGINT;
ALTER TABLE calls ADD COLUMN analysis_custom TEXT;
ALTER TABLE calls ADD COLUMN disconnection_reason TEXT CHECK (disconnection_reason IN
    ('customer_hangup', 'agent_hangup', 'transfer', 'voicemail', 'no_answer', 'busy', 'error', 'other'));
ALTER TABLE calls ADD COLUMN cost_credits BIGINT;
ALTER TABLE calls ADD COLUMN cost_unpaid_credits BIGINT;
ALTER TABLE calls ADD COLUMN credit_entry_id TEXT;
-- One per new filter of GET /v1/calls, newest first within it.
CREATE INDEX calls_sentiment ON calls (team_id, sentiment, started_at);
CREATE INDEX calls_successful ON calls (team_id, successful, started_at);
CREATE INDEX calls_disconnection ON calls (team_id, disconnection_reason, started_at);
-- GET /v1/analytics/calls groups a range of the team's calls by day from this index alone.
CREATE INDEX calls_analytics ON calls (team_id, started_at, agent_id, duration_seconds, successful, sentiment,
    disconnection_reason, cost_credits);
