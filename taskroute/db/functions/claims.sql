-- The claim loop inside the database: one call per claim, heartbeat and submit (one round
-- trip each, like procrastinate_fetch_job or graphile-worker's get_job). Each function runs
-- the named statements of queries/*.sql, spliced in by `{{ name(args) }}`
-- (taskroute/db/queries.py), so EXPLAIN tests and the functions run the very same SQL.
-- Lock order everywhere: the expert row (claims), then a task row, then its assignment, then
-- the item, then the project's settle lock (functions/projects.sql). The change feed takes no
-- lock (it is read up to a horizon: queries/quality.sql result_feed_horizon).
-- Every function reports its outcome in an `outcome` column instead of raising, so the caller
-- maps outcomes to the API's errors in one place (taskroute/resolvers/claims.py).

-- The expert's live claim if they hold one, else the best task they may take: gold first
-- (by the project's gold share), else real work; only from `p_project` when given. Before a
-- new claim, the expert's own expired leases go back to the pool (they would block it: one
-- live claim per expert). Every payload handed out, again or for the first time, is audited.
-- outcome: 'claimed' | 'held' | 'none' (nothing for you) | 'busy' (nothing free, but open
--          work this expert may take is locked by another transaction for a moment)
--          | 'inactive' (expert disabled)
--          | 'no_project' (the scope names no project) | 'unknown_skill' (`skill` names the
--          named skills the expert does not hold).
-- released: the leases returned to the pool, [{skill, project_id, status, min_quality}].
-- candidates_swapped: the pairwise layout shows candidate b on the left to this assignment.
-- instructions_version: the project's instructions the claim was given under (NULL: none).
CREATE OR REPLACE FUNCTION taskroute_claim(
    p_expert uuid, p_skills text[], p_project uuid, p_gold_draw float8
) RETURNS TABLE (
    outcome text, assignment_id uuid, lease_until timestamptz, task_id uuid, project_id uuid,
    skill text, priority integer, item_id uuid, customer_id uuid, payload jsonb,
    payload_key text, payload_bytes integer, released jsonb, candidates_swapped boolean,
    instructions_version integer
)
-- ROWS 1: it returns one row; at the default guess (1000) the planner joined the callers'
-- look-ups by hashing whole tables instead of probing them by key.
LANGUAGE plpgsql ROWS 1 AS $fn$
#variable_conflict use_column
DECLARE
    v_status text;
    v_row record;
    v_claim record;
    v_released jsonb := '[]';
    v_paths record;
BEGIN
    released := v_released;
    IF p_project IS NOT NULL THEN
        {{ routing_project_scope(p_project) }} INTO v_status;
        IF NOT FOUND THEN
            outcome := 'no_project';
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    -- Locks the expert row to commit: two racing claims of one expert run one after the other.
    {{ expert_touch(p_expert) }} INTO v_status;
    IF v_status IS DISTINCT FROM 'active' THEN
        outcome := 'inactive';
        RETURN NEXT;
        RETURN;
    END IF;
    -- Named skills the expert does not hold (paused ones are held) are a caller's mistake,
    -- not "no work": reported in `skill`, comma-separated.
    IF p_skills IS NOT NULL THEN
        {{ skills_not_held(p_expert, p_skills) }} INTO skill;
        IF skill IS NOT NULL THEN
            outcome := 'unknown_skill';
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    {{ assignment_active_for_expert(p_expert) }} INTO v_claim;
    IF FOUND AND v_claim.lease_live THEN
        outcome := 'held';
    ELSE
        -- Only when the expert's claim expired (v_claim found, lease not live): the release
        -- is a tasks UPDATE, which fires the task-count trigger even when it changes no row.
        IF FOUND THEN
            FOR v_row IN {{ lease_release_own(p_expert) }} LOOP
                v_released := v_released || jsonb_build_object(
                    'skill', v_row.skill, 'project_id', v_row.project_id, 'status', v_row.status,
                    'min_quality', v_row.min_quality);
                -- a slot out of retries may have been its project's last work
                IF v_row.status = 'failed' THEN
                    PERFORM taskroute_project_settle(v_row.project_id, true);
                END IF;
            END LOOP;
        END IF;
        released := v_released;
        {{ claim_paths(p_expert, p_skills, p_project) }} INTO v_paths;
        IF v_paths.gold THEN
            {{ gold_claim(p_expert, p_skills, p_project, p_gold_draw) }} INTO v_claim;
        END IF;
        IF NOT v_paths.gold OR NOT FOUND THEN
            IF v_paths.takeover THEN
                {{ task_claim(p_expert, p_skills, p_project) }} INTO v_claim;
                IF v_claim.prev_assignment IS NOT NULL THEN
                    {{ assignment_expire(v_claim.prev_assignment) }};
                END IF;
            ELSE
                {{ task_claim_open(p_expert, p_skills) }} INTO v_claim;
            END IF;
        END IF;
        outcome := CASE WHEN FOUND THEN 'claimed' ELSE 'none' END;
        -- Nothing free, but work held for a moment by others: the caller asks again shortly
        -- instead of telling the expert there is nothing (resolvers/claims.py).
        IF outcome = 'none' AND {{ open_work_held_by_others(p_expert, p_skills, p_project) }} THEN
            outcome := 'busy';
        END IF;
    END IF;
    IF outcome NOT IN ('none', 'busy') THEN
        {{ audit_insert(p_expert, v_claim.customer_id, v_claim.project_id, v_claim.task_id, 'claim') }};
        assignment_id := v_claim.assignment_id;
        lease_until := v_claim.lease_until;
        task_id := v_claim.task_id;
        project_id := v_claim.project_id;
        skill := v_claim.skill;
        priority := v_claim.priority;
        item_id := v_claim.item_id;
        customer_id := v_claim.customer_id;
        payload := v_claim.payload;
        payload_key := v_claim.payload_key;
        payload_bytes := v_claim.payload_bytes;
        candidates_swapped := v_claim.candidates_swapped;
        instructions_version := v_claim.instructions_version;
    END IF;
    RETURN NEXT;
END
$fn$;

-- Extends the expert's live lease and records their presence.
-- outcome: 'extended' | 'not_found' (no such assignment, or another expert's) | 'submitted'
--          | 'canceled' (live, but the project was canceled) | 'expired'.
CREATE OR REPLACE FUNCTION taskroute_heartbeat(p_assignment uuid, p_expert uuid)
RETURNS TABLE (outcome text, lease_until timestamptz, has_high_priority_tasks boolean)
-- ROWS 1: it returns one row; at the default guess (1000) the planner joined the callers'
-- look-ups by hashing whole tables instead of probing them by key.
LANGUAGE plpgsql ROWS 1 AS $fn$
#variable_conflict use_column
DECLARE
    v_row record;
BEGIN
    -- Presence first: the expert row before the task row, the claim's lock order.
    {{ expert_seen(p_expert) }};
    -- The assignment's lease alone, or both rows once the task's lower bound is due
    -- (queries/claims.sql, at the top).
    {{ assignment_heartbeat(p_assignment, p_expert) }} INTO v_row;
    IF NOT FOUND THEN
        {{ assignment_heartbeat_both(p_assignment, p_expert) }} INTO v_row;
    END IF;
    IF FOUND THEN
        outcome := 'extended';
        lease_until := v_row.lease_until;
        has_high_priority_tasks := v_row.has_high_priority_tasks;
        RETURN NEXT;
        RETURN;
    END IF;
    {{ assignment_get(p_assignment) }} INTO v_row;
    outcome := CASE
        WHEN NOT FOUND OR v_row.expert_id <> p_expert THEN 'not_found'
        WHEN v_row.status = 'submitted' THEN 'submitted'
        WHEN v_row.status = 'active' AND v_row.lease_live THEN 'canceled'
        ELSE 'expired' END;
    RETURN NEXT;
END
$fn$;

-- Stores an answer exactly once and does everything that follows from it in the same
-- transaction: the task is done, the payout line written under the on_submit policy (one per
-- assignment, ever; under on_acceptance / on_review the acceptance writes it later), the
-- onboarding count moves, and then either the gold answer is scored (and the expert maybe
-- paused) or the item's result is recomputed (agreement, adjudication, change feed) and the
-- project completed if that was its last work (functions/projects.sql).
-- outcome: 'stored' | 'already' (a repeated submit: the first receipt; answer_differs when
--          its answer is not the stored one, which stands) | 'not_found'
--          | 'expired' (the lease ended or was taken over).
-- An answer given sooner than the project's min_seconds_per_task after the claim (database
-- clock) is stored with too_fast; under too_fast_policy 'exclude' it is not paid at submit nor
-- auto-approved (it waits for the customer's review) and, on gold, scored as wrong.
-- opened: tasks this submit opened ([{skill, project_id, min_quality}]) for wake-up hints.
-- pay_status: what the project's payment policy will do ('paid' | 'pending_review' |
-- 'pending_resolution'); the same for gold and real work, so it tells nothing about gold.
CREATE OR REPLACE FUNCTION taskroute_submit(p_assignment uuid, p_expert uuid, p_answer jsonb)
RETURNS TABLE (
    outcome text, receipt_id uuid, submitted_at timestamptz, pay_cents integer,
    project_id uuid, opened jsonb, pay_status text, answer_differs boolean
)
-- ROWS 1: it returns one row; at the default guess (1000) the planner joined the callers'
-- look-ups by hashing whole tables instead of probing them by key.
LANGUAGE plpgsql ROWS 1 AS $fn$
#variable_conflict use_column
DECLARE
    v_found record;
    v_task record;
    v_current record;
    v_stored record;
    v_policy text;
    v_correct boolean;
    v_fast boolean;
    v_excluded boolean;
    v_review record;
    v_row record;
BEGIN
    opened := '[]';
    answer_differs := false;
    {{ assignment_get(p_assignment) }} INTO v_found;
    IF NOT FOUND OR v_found.expert_id <> p_expert THEN
        outcome := 'not_found';
        RETURN NEXT;
        RETURN;
    END IF;
    project_id := v_found.project_id;
    v_policy := v_found.payment_policy;
    pay_status := v_found.pay_status;
    -- Task first, then assignment: the same lock order as the claim and the sweeper.
    {{ task_lock(v_found.task_id) }} INTO v_task;
    {{ assignment_lock(p_assignment) }} INTO v_current;
    -- A repeated submit (or a racing one that got here first): the first receipt.
    IF v_current.status = 'submitted' THEN
        outcome := 'already';
        answer_differs := v_current.answer IS DISTINCT FROM p_answer;
        receipt_id := v_current.receipt_id;
        submitted_at := v_current.submitted_at;
        pay_cents := v_current.pay_cents;
        RETURN NEXT;
        RETURN;
    END IF;
    IF {{ claim_lost(v_current, v_task, p_assignment) }} THEN
        outcome := 'expired';
        RETURN NEXT;
        RETURN;
    END IF;
    -- A review task: the reviewer is paid per review and the verdict decides the reviewed
    -- answer (functions/reviews.sql). Only a review task asks (task_lock reads the kind).
    IF v_task.kind = 'review' THEN
        SELECT * INTO v_review FROM taskroute_review_submit(p_assignment, p_expert, p_answer);
        IF FOUND THEN
            PERFORM taskroute_project_settle(v_found.project_id, true);
            outcome := 'stored';
            receipt_id := v_review.receipt_id;
            submitted_at := v_review.submitted_at;
            pay_cents := v_review.pay_cents;
            opened := v_review.opened;
            pay_status := 'paid';
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    v_fast := v_found.min_seconds_per_task IS NOT NULL AND taskroute_now()
              < v_current.claimed_at + make_interval(secs => v_found.min_seconds_per_task);
    v_excluded := v_fast AND v_found.too_fast_policy = 'exclude';
    IF v_excluded THEN
        -- left for the customer's review: never paid at submit, never auto-approved
        v_policy := 'on_review';
        pay_status := 'pending_review';
    END IF;
    {{ assignment_submit(p_assignment, p_answer, v_found.project_pay_cents, v_policy, v_fast) }} INTO v_stored;
    {{ task_done(v_found.task_id, p_assignment) }};
    -- Paid at submit only under on_submit; otherwise the acceptance pays (queries/ledger.sql).
    IF v_policy = 'on_submit' THEN
        {{ payout_insert(p_assignment, p_expert, v_found.project_id, v_found.project_pay_cents) }};
    END IF;

    {{ expert_skill_task_done(p_expert, v_task.skill) }};
    IF v_task.kind = 'gold' THEN
        v_correct := taskroute_gold_correct(p_answer, v_task.gold_answer, v_task.answer_field)
                     AND NOT v_excluded;
        -- on_acceptance: decided (and paid if correct) when real work would be
        PERFORM taskroute_gold_submitted(p_assignment);
        opened := taskroute_score_gold(p_expert, v_task.skill, v_correct, v_task.project_id);
    ELSE
        opened := taskroute_resolve_item(v_task.item_id, false);
        -- on_review with review by experts: the answer's review task (queries/reviews.sql)
        IF v_policy = 'on_review' THEN
            FOR v_row IN {{ review_open(p_assignment) }} LOOP
                opened := opened || jsonb_build_object(
                    'skill', v_row.skill, 'project_id', v_row.project_id,
                    'min_quality', v_row.min_quality);
            END LOOP;
        END IF;
        -- The last slot done (and no adjudication or refill opened): completed.
        PERFORM taskroute_project_settle(v_task.project_id, true);
    END IF;
    outcome := 'stored';
    receipt_id := v_stored.receipt_id;
    submitted_at := v_stored.submitted_at;
    pay_cents := v_stored.pay_cents;
    RETURN NEXT;
END
$fn$;
