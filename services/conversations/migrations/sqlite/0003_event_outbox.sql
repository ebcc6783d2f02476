-- Events for webhooks, written in the transaction of the change (switchboard_kit::outbox).
CREATE TABLE event_outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    event BLOB NOT NULL,
    created_at INTEGER NOT NULL
);
