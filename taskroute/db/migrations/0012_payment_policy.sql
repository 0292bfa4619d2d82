-- Issue 20: pay for accepted work. A payment policy per project and a review state per
-- submitted assignment; the ledger (payouts) follows the decisions (queries/ledger.sql).

-- on_submit: accepted and paid at submit (the behaviour before issue 20, the default).
-- on_acceptance: accepted when the answer agrees with the item's resolved answer or is a
--   correct gold answer, rejected when it disagrees (functions/quality.sql decides).
-- on_review: the customer approves or rejects; work not reviewed within
--   auto_approve_seconds of its submit is accepted by the auto-approval job.
ALTER TABLE projects
    ADD COLUMN payment_policy text NOT NULL DEFAULT 'on_submit'
        CHECK (payment_policy IN ('on_submit', 'on_acceptance', 'on_review')),
    -- MTurk's default auto-approval delay is 3 days
    ADD COLUMN auto_approve_seconds integer NOT NULL DEFAULT 259200
        CHECK (auto_approve_seconds BETWEEN 0 AND 2592000),
    -- a rejection may be turned into an acceptance this long after it (MTurk: 30 days)
    ADD COLUMN override_seconds integer NOT NULL DEFAULT 2592000
        CHECK (override_seconds BETWEEN 0 AND 31536000),
    -- on_acceptance: are answers that disagree with an adjudicated result paid? (an item that
    -- needed adjudication was hard; disagreeing on it is not the expert's fault)
    ADD COLUMN pay_adjudicated_disagreements boolean NOT NULL DEFAULT true;

-- NULL until submitted; then 'submitted' (undecided), 'accepted' or 'rejected'.
-- reviewed_by: 'customer:<id>', 'policy' (on_submit), 'quality' (on_acceptance), 'auto'
-- (the auto-approval job), 'canceled' (decided because the project was canceled), 'retraction'.
ALTER TABLE assignments
    ADD COLUMN review_status text CHECK (review_status IN ('submitted', 'accepted', 'rejected')),
    ADD COLUMN reviewed_at timestamptz,
    ADD COLUMN reviewed_by text,
    ADD COLUMN review_reason text;

-- Everything submitted before this migration was paid at submit: it was accepted then.
UPDATE assignments
SET review_status = 'accepted', reviewed_at = submitted_at, reviewed_by = 'policy'
WHERE status = 'submitted';

-- The auto-approval job's probe, and pending amounts: undecided work only (small).
CREATE INDEX assignments_review_pending ON assignments (submitted_at)
    WHERE review_status = 'submitted';
-- A customer's review list of a project.
CREATE INDEX assignments_project_review ON assignments (project_id, submitted_at, id)
    WHERE review_status IS NOT NULL;
-- An expert's pending amount.
CREATE INDEX assignments_expert_review_pending ON assignments (expert_id)
    WHERE review_status = 'submitted';
