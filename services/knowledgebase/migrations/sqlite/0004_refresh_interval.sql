-- A webpage refreshes itself every day or week (off by default), following the rules of a
-- manual refresh. Due pages are found by their last refresh (or creation) and interval.
ALTER TABLE webpages ADD COLUMN refresh_interval TEXT NOT NULL DEFAULT 'off'
    CHECK (refresh_interval IN ('off', 'daily', 'weekly'));
CREATE INDEX webpages_scheduled ON webpages (refresh_interval, last_refresh_requested_at)
    WHERE refresh_interval <> 'off';
