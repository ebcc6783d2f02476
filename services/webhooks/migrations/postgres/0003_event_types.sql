-- An event's type is one of switchboard_kit::vocabulary::EventType, or `webhook.test` (issue
-- 54): the service refuses any other before it writes, and this keeps the tables to the same
-- list (a test compares them). NOT VALID: rows written before are not read again. A release
-- that adds an event type replaces the constraints in a migration of its own.
ALTER TABLE events ADD CONSTRAINT events_type_known CHECK (type IN (
    'call.ended', 'chat.ended', 'contact.created', 'contact.updated', 'contact.deleted',
    'webpage.ready', 'webpage.failed', 'document.ready', 'document.failed',
    'agent.instructions.updated', 'subteam.created', 'credits.low', 'webhook.test'
)) NOT VALID;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_event_type_known CHECK (event_type IN (
    'call.ended', 'chat.ended', 'contact.created', 'contact.updated', 'contact.deleted',
    'webpage.ready', 'webpage.failed', 'document.ready', 'document.failed',
    'agent.instructions.updated', 'subteam.created', 'credits.low', 'webhook.test'
)) NOT VALID;
