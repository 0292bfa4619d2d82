-- The payout ledger is append-only: a correction is a reversal line, never an edit.
CREATE OR REPLACE FUNCTION payouts_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'payouts is an append-only ledger: write a reversal line instead';
END $$;

CREATE OR REPLACE TRIGGER payouts_no_update_delete BEFORE UPDATE OR DELETE ON payouts
    FOR EACH ROW EXECUTE FUNCTION payouts_append_only();
