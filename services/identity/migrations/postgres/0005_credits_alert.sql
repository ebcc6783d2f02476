-- The balance under which the team's webhooks hear credits.low (NULL: never).
ALTER TABLE credit_balances ADD COLUMN low_threshold BIGINT;
