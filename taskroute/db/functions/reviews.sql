-- Review as work (queries/reviews.sql): what a reviewer's submit does.

-- Called by taskroute_submit for every live submit: no row unless the assignment is a review
-- task's. Then, in the submit's transaction: the reviewer's answer is stored, accepted and
-- paid the project's review_pay_cents (one payment line per review assignment), and the
-- verdict decides the reviewed answer with the customer's own statement (queries/ledger.sql
-- assignments_decide: only an undecided answer changes, an accepted one gets its one payment
-- line): 'accept' accepts it; 'reject' rejects it with the reviewer's reason; 'correct'
-- rejects it (accepts it when the project pays corrected answers) and the correction becomes
-- the item's label (taskroute_resolve_item reads it). A verdict that finds the answer decided
-- already (the customer or auto-approval got there first) is recorded as not applied.
-- opened: tasks the re-resolution opened (none in practice: a correction resolves the item).
CREATE OR REPLACE FUNCTION taskroute_review_submit(
    p_assignment uuid, p_expert uuid, p_answer jsonb
) RETURNS TABLE (receipt_id uuid, submitted_at timestamptz, pay_cents integer, opened jsonb)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_rev record;
    v_stored record;
    v_decided record;
    v_verdict text := p_answer ->> 'verdict';
    v_status text;
    v_reason text := p_answer ->> 'reason';
    v_by text := 'expert-review';
    v_applied boolean;
BEGIN
    {{ review_of_assignment(p_assignment) }} INTO v_rev;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    opened := '[]';
    {{ assignment_submit(p_assignment, p_answer, v_rev.review_pay_cents, 'on_submit', false) }} INTO v_stored;
    {{ task_done(v_rev.task_id, p_assignment) }};
    {{ payout_insert(p_assignment, p_expert, v_rev.project_id, v_rev.review_pay_cents) }};
    v_status := CASE WHEN v_verdict = 'accept' THEN 'accepted'
                     WHEN v_verdict = 'correct' AND v_rev.pay_corrected THEN 'accepted'
                     ELSE 'rejected' END;
    v_reason := CASE WHEN v_verdict = 'accept' THEN coalesce(v_reason, 'accepted by a reviewer')
                     WHEN v_verdict = 'correct'
                         THEN 'corrected by a reviewer' || coalesce(': ' || v_reason, '')
                     ELSE v_reason END;
    {{ assignments_decide(ARRAY[v_rev.reviewed_id], v_status, v_by, v_reason) }} INTO v_decided;
    v_applied := FOUND;
    {{ review_record(v_rev.task_id, p_assignment, v_verdict, p_answer->'correction', v_applied) }};
    IF v_applied AND v_verdict = 'correct' THEN
        opened := taskroute_resolve_item(v_rev.item_id, false);
    END IF;
    receipt_id := v_stored.receipt_id;
    submitted_at := v_stored.submitted_at;
    pay_cents := v_stored.pay_cents;
    RETURN NEXT;
END
$fn$;
