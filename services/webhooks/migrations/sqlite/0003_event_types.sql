-- An event's type is one of switchboard_kit::vocabulary::EventType, or `webhook.test` (issue
-- 54): the service refuses any other before it writes, and this keeps the tables to the same
-- list (a test compares them). SQLite adds no CHECK to a table it has: triggers refuse the
-- rows instead. A release that adds an event type replaces them in a migration of its own.
CREATE TRIGGER events_type_known BEFORE INSERT ON events
WHEN NOT (NEW.type IN (
    'call.ended', 'chat.ended', 'contact.created', 'contact.updated', 'contact.deleted',
    'webpage.ready', 'webpage.failed', 'document.ready', 'document.failed',
    'agent.instructions.updated', 'subteam.created', 'credits.low', 'webhook.test'
))
BEGIN
    SELECT RAISE(ABORT, 'events.type is not an event type');
END;
CREATE TRIGGER events_type_known_on_update BEFORE UPDATE OF type ON events
WHEN NOT (NEW.type IN (
    'call.ended', 'chat.ended', 'contact.created', 'contact.updated', 'contact.deleted',
    'webpage.ready', 'webpage.failed', 'document.ready', 'document.failed',
    'agent.instructions.updated', 'subteam.created', 'credits.low', 'webhook.test'
))
BEGIN
    SELECT RAISE(ABORT, 'events.type is not an event type');
END;
CREATE TRIGGER deliveries_event_type_known BEFORE INSERT ON deliveries
WHEN NOT (NEW.event_type IN (
    'call.ended', 'chat.ended', 'contact.created', 'contact.updated', 'contact.deleted',
    'webpage.ready', 'webpage.failed', 'document.ready', 'document.failed',
    'agent.instructions.updated', 'subteam.created', 'credits.low', 'webhook.test'
))
BEGIN
    SELECT RAISE(ABORT, 'deliveries.event_type is not an event type');
END;
CREATE TRIGGER deliveries_event_type_known_on_update BEFORE UPDATE OF event_type ON deliveries
WHEN NOT (NEW.event_type IN (
    'call.ended', 'chat.ended', 'contact.created', 'contact.updated', 'contact.deleted',
    'webpage.ready', 'webpage.failed', 'document.ready', 'document.failed',
    'agent.instructions.updated', 'subteam.created', 'credits.low', 'webhook.test'
))
BEGIN
    SELECT RAISE(ABORT, 'deliveries.event_type is not an event type');
END;
