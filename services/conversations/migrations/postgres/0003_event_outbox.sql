-- Events for webhooks, written in the transaction of the change (switchboard_kit::outbox).
CREATE TABLE event_outbox (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL,
    event BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
