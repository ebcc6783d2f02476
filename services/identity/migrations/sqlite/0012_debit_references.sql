-- A debit may carry a reference (a call's cost: `call:<call id>`) that makes it idempotent: a
-- team has at most one debit per reference, and a repeat is answered with the first entry.
-- Searches' debits have none. Refunds keep their own rule (credit_ledger_one_refund).
CREATE UNIQUE INDEX credit_ledger_debit_reference ON credit_ledger (team_id, reference_id)
    WHERE kind = 'debit' AND reference_id IS NOT NULL;
