-- The payout ledger's read side and reversals (the table itself is append-only).

-- name: payouts_page
-- $1 expert_id (NULL: any), $2 project_id (NULL: any), $3 after seq (0: from the start),
-- $4 max rows. Oldest first, by the ledger's own sequence.
SELECT p.*, r.id AS reversed_by
FROM payouts p
LEFT JOIN payouts r ON r.reverses_id = p.id
WHERE ($1::uuid IS NULL OR p.expert_id = $1)
  AND ($2::uuid IS NULL OR p.project_id = $2)
  AND p.seq > $3
ORDER BY p.seq
LIMIT $4;

-- name: payout_get
-- $1 payout id.
SELECT p.*, pr.customer_id FROM payouts p JOIN projects pr ON pr.id = p.project_id
WHERE p.id = $1;

-- name: payout_reverse
-- $1 payout id, $2 reason. Writes the reversal line (the negated amount); a payment line is
-- reversed at most once (UNIQUE reverses_id refuses a second one). No row: not a payment.
INSERT INTO payouts (expert_id, project_id, amount_cents, kind, reverses_id, reason)
SELECT expert_id, project_id, -amount_cents, 'reversal', id, $2
FROM payouts
WHERE id = $1 AND kind = 'payment'
RETURNING *, NULL::uuid AS reversed_by;

-- name: expert_balance
-- $1 expert_id, $2 project_id (NULL: every project). Paid and reversed come from the ledger;
-- pending is submitted work not decided yet (no ledger line until it is accepted).
SELECT count(*) FILTER (WHERE kind = 'payment')::int AS payments,
       count(*) FILTER (WHERE kind = 'reversal')::int AS reversals,
       coalesce(sum(amount_cents) FILTER (WHERE kind = 'payment'), 0)::bigint AS paid_cents,
       coalesce(-sum(amount_cents) FILTER (WHERE kind = 'reversal'), 0)::bigint
           AS reversed_cents,
       coalesce(sum(amount_cents), 0)::bigint AS balance_cents,
       (SELECT count(*) FROM assignments a
        WHERE a.expert_id = $1 AND a.review_status = 'submitted'
          AND ($2::uuid IS NULL OR a.project_id = $2))::int AS pending,
       (SELECT coalesce(sum(a.pay_cents), 0) FROM assignments a
        WHERE a.expert_id = $1 AND a.review_status = 'submitted'
          AND ($2::uuid IS NULL OR a.project_id = $2))::bigint AS pending_cents
FROM payouts
WHERE expert_id = $1 AND ($2::uuid IS NULL OR project_id = $2);

-- name: project_payout_totals
-- $1 project_id. Per expert: the ledger's totals and balance, and the undecided work.
WITH l AS (
    SELECT expert_id,
           count(*) FILTER (WHERE kind = 'payment')::int AS payments,
           count(*) FILTER (WHERE kind = 'reversal')::int AS reversals,
           coalesce(sum(amount_cents) FILTER (WHERE kind = 'payment'), 0)::bigint AS paid_cents,
           coalesce(-sum(amount_cents) FILTER (WHERE kind = 'reversal'), 0)::bigint
               AS reversed_cents,
           coalesce(sum(amount_cents), 0)::bigint AS balance_cents
    FROM payouts WHERE project_id = $1 GROUP BY expert_id
),
w AS (
    SELECT expert_id, count(*)::int AS pending, sum(pay_cents)::bigint AS pending_cents
    FROM assignments
    WHERE project_id = $1 AND review_status = 'submitted'
    GROUP BY expert_id
)
SELECT coalesce(l.expert_id, w.expert_id) AS expert_id,
       coalesce(l.payments, 0) AS payments, coalesce(l.reversals, 0) AS reversals,
       coalesce(l.paid_cents, 0) AS paid_cents, coalesce(l.reversed_cents, 0) AS reversed_cents,
       coalesce(l.balance_cents, 0) AS balance_cents,
       coalesce(w.pending, 0) AS pending, coalesce(w.pending_cents, 0) AS pending_cents
FROM l FULL JOIN w ON w.expert_id = l.expert_id
ORDER BY 1;

-- name: pending_page
-- $1 expert_id (NULL: any), $2 project_id (NULL: any), $3 max rows. Undecided submitted work
-- (the CSV's `pending` rows after the ledger lines): no ledger line exists for it yet.
SELECT a.id AS assignment_id, a.expert_id, a.project_id, a.pay_cents, a.submitted_at
FROM assignments a
WHERE a.review_status = 'submitted'
  AND ($1::uuid IS NULL OR a.expert_id = $1) AND ($2::uuid IS NULL OR a.project_id = $2)
ORDER BY a.submitted_at, a.id
LIMIT $3;

-- ---------------------------------------------------------------------------------------
-- Acceptance. Review states of a submitted assignment: 'submitted' (undecided),
-- 'accepted' (exactly one payment line, written by the statement that accepts), 'rejected'
-- (no payment line; a payment made before a rejection by retraction gets a reversal line).
-- Every deciding statement changes only undecided rows (review_status = 'submitted'), so a
-- repeated or racing decision changes nothing; the payment insert is ON CONFLICT
-- (assignment_id) DO NOTHING besides. Rows are locked in id order (deadlock-free among
-- batches); the quality decision at resolution skips rows another transaction holds: every
-- holder of an undecided row's lock is deciding that very row (a review, the auto-approval
-- job, a retraction).

-- name: project_payment_policy
-- $1 project_id. The policy and what a receipt says will happen.
SELECT payment_policy, pay_adjudicated_disagreements, status,
       {{ pay_status(payment_policy) }} AS pay_status
FROM projects WHERE id = $1;

-- fragment: pay_status
-- $1 a project's payment_policy. What a receipt says will happen to the answer's pay.
CASE $1 WHEN 'on_submit' THEN 'paid'
        WHEN 'on_review' THEN 'pending_review'
        ELSE 'pending_resolution' END

-- name: assignments_decide
-- $1 assignment ids, $2 'accepted' | 'rejected', $3 by, $4 reason. Decides the undecided
-- ones among them; each accepted one gets its payment line. Returns the decided ids.
WITH locked AS (
    SELECT id FROM assignments
    WHERE id = ANY ($1::uuid[]) AND review_status = 'submitted'
    ORDER BY id FOR UPDATE
),
d AS (
    UPDATE assignments a
    SET review_status = $2::text, reviewed_at = taskroute_now(), reviewed_by = $3::text,
        review_reason = $4::text
    FROM locked l
    WHERE a.id = l.id AND a.review_status = 'submitted'
    RETURNING a.id, a.expert_id, a.project_id, a.pay_cents
),
paid AS (
    INSERT INTO payouts (assignment_id, expert_id, project_id, amount_cents)
    SELECT id, expert_id, project_id, pay_cents FROM d WHERE $2::text = 'accepted'
    ON CONFLICT (assignment_id) DO NOTHING
    RETURNING assignment_id
)
SELECT d.id FROM d LEFT JOIN paid ON paid.assignment_id = d.id;

-- name: assignments_override
-- $1 assignment ids, $2 by, $3 reason. A rejection turned into an acceptance (and its
-- payment line), within the project's override window. Rejections by retraction are the
-- admin's and stay. Returns the accepted ids.
WITH locked AS (
    SELECT a.id FROM assignments a JOIN projects p ON p.id = a.project_id
    WHERE a.id = ANY ($1::uuid[]) AND a.review_status = 'rejected'
      AND a.reviewed_by <> 'retraction'
      AND a.reviewed_at + make_interval(secs => p.override_seconds) > taskroute_now()
    ORDER BY a.id FOR UPDATE OF a
),
d AS (
    UPDATE assignments a
    SET review_status = 'accepted', reviewed_at = taskroute_now(), reviewed_by = $2::text,
        review_reason = $3::text
    FROM locked l
    WHERE a.id = l.id AND a.review_status = 'rejected'
    RETURNING a.id, a.expert_id, a.project_id, a.pay_cents
),
paid AS (
    INSERT INTO payouts (assignment_id, expert_id, project_id, amount_cents)
    SELECT id, expert_id, project_id, pay_cents FROM d
    ON CONFLICT (assignment_id) DO NOTHING
    RETURNING assignment_id
)
SELECT d.id FROM d LEFT JOIN paid ON paid.assignment_id = d.id;

-- name: assignments_decide_resolved
-- $1 item_id, $2 answer_field, $3 the resolved answer, $4 pay disagreements too (an
-- adjudicated item under pay_adjudicated_disagreements). on_acceptance: every undecided valid
-- answer of a resolved item is accepted when it agrees with the result (compared like
-- resolution compares: taskroute_answer_key), else rejected; accepted ones are paid.
WITH locked AS (
    SELECT a.id FROM assignments a JOIN tasks t ON t.id = a.task_id
    WHERE a.item_id = $1 AND a.review_status = 'submitted' AND a.retracted_at IS NULL
      AND t.kind IN ('normal', 'adjudication')
      -- a too-fast answer under too_fast_policy 'exclude' waits for the customer
      AND NOT (a.too_fast AND EXISTS (SELECT 1 FROM projects p
                                      WHERE p.id = a.project_id
                                        AND p.too_fast_policy = 'exclude'))
    ORDER BY a.id FOR UPDATE OF a SKIP LOCKED
),
v AS (
    SELECT a.id, coalesce(taskroute_answer_key(a.answer, $2::text)
                          = taskroute_answer_key($3::jsonb, $2::text), false) AS agrees
    FROM assignments a JOIN locked l ON l.id = a.id
),
d AS (
    UPDATE assignments a
    SET review_status = CASE WHEN v.agrees OR $4::boolean THEN 'accepted' ELSE 'rejected' END,
        reviewed_at = taskroute_now(), reviewed_by = 'quality',
        review_reason = CASE WHEN v.agrees THEN 'agrees with the resolved answer'
                             WHEN $4::boolean THEN 'disagrees with the adjudicated answer;'
                                                   ' paid by the project''s policy'
                             ELSE 'disagrees with the resolved answer' END
    FROM v
    WHERE a.id = v.id AND a.review_status = 'submitted'
    RETURNING a.id, a.expert_id, a.project_id, a.pay_cents, a.review_status
)
INSERT INTO payouts (assignment_id, expert_id, project_id, amount_cents)
SELECT id, expert_id, project_id, pay_cents FROM d WHERE review_status = 'accepted'
ON CONFLICT (assignment_id) DO NOTHING;

-- name: gold_twin_before
-- $1 a gold assignment just submitted. No row unless the project pays on_acceptance and the
-- answer is undecided. twin_id / twin_status: its twin, the latest real answer of the same
-- project and skill another expert submitted before it (another expert's: linking to one of
-- the expert's own undecided answers would decide both at the same instant, which real work
-- almost never is). own_decided: the expert's own latest real answer there is decided (the
-- fallback when nobody else answered yet, e.g. an expert alone on a redundancy-1 project).
SELECT o.id AS twin_id, o.review_status AS twin_status,
       coalesce(m.review_status <> 'submitted', false) AS own_decided
FROM assignments g
JOIN tasks gt ON gt.id = g.task_id
JOIN projects p ON p.id = g.project_id AND p.payment_policy = 'on_acceptance'
LEFT JOIN LATERAL (
    SELECT r.id, r.review_status
    FROM assignments r JOIN tasks rt ON rt.id = r.task_id
    WHERE r.project_id = g.project_id AND r.submitted_at <= g.submitted_at
      AND r.status = 'submitted' AND r.expert_id <> g.expert_id
      AND rt.kind = 'normal' AND rt.skill = gt.skill
    ORDER BY r.submitted_at DESC
    LIMIT 1
) o ON true
LEFT JOIN LATERAL (
    SELECT r.review_status
    FROM assignments r JOIN tasks rt ON rt.id = r.task_id
    WHERE r.expert_id = g.expert_id AND r.project_id = g.project_id
      AND r.status = 'submitted' AND rt.kind = 'normal' AND rt.skill = gt.skill
    ORDER BY r.claimed_at DESC
    LIMIT 1
) m ON true
WHERE g.id = $1 AND g.review_status = 'submitted'

-- name: gold_exposure_wait
-- $1 gold assignment_id, $2 its twin (NULL: none yet). The answer waits for its decision.
UPDATE gold_exposures SET pending = true, decide_with = $2 WHERE assignment_id = $1;

-- name: assignments_decide_gold
-- $1 gold assignment ids. on_acceptance: each undecided one is accepted (and paid) when it is
-- correct, else rejected, with the reasons real work gets (an expert reading their reviews
-- cannot tell gold by the wording). No-op for other policies or decided assignments.
WITH v AS (
    SELECT a.id, taskroute_gold_correct(a.answer, i.gold_answer, q.answer_field) AS ok
    FROM assignments a
    JOIN items i ON i.id = a.item_id
    JOIN project_quality q ON q.project_id = a.project_id
    JOIN projects p ON p.id = a.project_id AND p.payment_policy = 'on_acceptance'
    WHERE a.id = ANY ($1::uuid[]) AND a.review_status = 'submitted'
    ORDER BY a.id
    FOR UPDATE OF a
),
d AS (
    UPDATE assignments a
    SET review_status = CASE WHEN v.ok THEN 'accepted' ELSE 'rejected' END,
        reviewed_at = taskroute_now(), reviewed_by = 'quality',
        review_reason = CASE WHEN v.ok THEN 'agrees with the resolved answer'
                             ELSE 'disagrees with the resolved answer' END
    FROM v
    WHERE a.id = v.id AND a.review_status = 'submitted'
    RETURNING a.id, a.expert_id, a.project_id, a.pay_cents, a.review_status
),
done AS (
    UPDATE gold_exposures x SET pending = false
    WHERE x.assignment_id = ANY ($1::uuid[]) AND x.pending
)
INSERT INTO payouts (assignment_id, expert_id, project_id, amount_cents)
SELECT id, expert_id, project_id, pay_cents FROM d WHERE review_status = 'accepted'
ON CONFLICT (assignment_id) DO NOTHING;

-- name: gold_twins_link
-- $1 max rows. The auto-approval job: a waiting gold answer without a twin gets the first real
-- answer of the same project and skill another expert submitted after it. SKIP LOCKED: a
-- decision in progress is left to finish.
WITH waiting AS (
    SELECT x.expert_id, x.item_id, g.project_id, g.submitted_at, g.expert_id AS gold_expert,
           gt.skill
    FROM gold_exposures x
    JOIN assignments g ON g.id = x.assignment_id
    JOIN tasks gt ON gt.id = g.task_id
    WHERE x.pending AND x.decide_with IS NULL
    LIMIT $1
    FOR UPDATE OF x SKIP LOCKED
)
UPDATE gold_exposures x SET decide_with = twin.id
FROM waiting w
CROSS JOIN LATERAL (
    SELECT r.id
    FROM assignments r JOIN tasks rt ON rt.id = r.task_id
    WHERE r.project_id = w.project_id AND r.submitted_at >= w.submitted_at
      AND r.status = 'submitted' AND r.expert_id <> w.gold_expert
      AND rt.kind = 'normal' AND rt.skill = w.skill
    ORDER BY r.submitted_at
    LIMIT 1
) twin
WHERE x.expert_id = w.expert_id AND x.item_id = w.item_id;

-- name: gold_decisions_due
-- $1 max rows. The auto-approval job: waiting gold answers whose twin is decided already (it
-- was decided while they were being linked, so its trigger did not see them), or that can no
-- longer get one (the project is not active: completed or canceled).
SELECT x.assignment_id
FROM gold_exposures x
JOIN assignments g ON g.id = x.assignment_id
JOIN projects p ON p.id = g.project_id
LEFT JOIN assignments r ON r.id = x.decide_with
WHERE x.pending
  AND (r.review_status IS DISTINCT FROM 'submitted' AND r.id IS NOT NULL
       OR (x.decide_with IS NULL AND p.status <> 'active'))
LIMIT $1;

-- name: gold_decide_call
-- $1 gold assignment ids (functions/quality.sql taskroute_gold_decide).
SELECT taskroute_gold_decide($1::uuid[]);

-- name: assignments_decide_canceled
-- $1 project_id, $2 item_id (NULL: every item). Cancel keeps its promise (on_acceptance):
-- an answer whose item can no longer resolve (the project was canceled, no slot of the item
-- is still claimed) is accepted: the expert did the work asked; the customer stopped it.
WITH locked AS (
    SELECT a.id FROM assignments a JOIN projects p ON p.id = a.project_id
    WHERE a.project_id = $1 AND ($2::uuid IS NULL OR a.item_id = $2)
      AND a.review_status = 'submitted' AND a.retracted_at IS NULL
      AND p.status = 'canceled' AND p.payment_policy = 'on_acceptance'
      AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.item_id = a.item_id AND t.status = 'claimed')
      AND NOT EXISTS (SELECT 1 FROM item_results r
                      WHERE r.item_id = a.item_id AND r.status = 'resolved')
    ORDER BY a.id FOR UPDATE OF a SKIP LOCKED
),
d AS (
    UPDATE assignments a
    SET review_status = 'accepted', reviewed_at = taskroute_now(), reviewed_by = 'canceled',
        review_reason = 'the project was canceled before the item resolved'
    FROM locked l
    WHERE a.id = l.id AND a.review_status = 'submitted'
    RETURNING a.id, a.expert_id, a.project_id, a.pay_cents
)
INSERT INTO payouts (assignment_id, expert_id, project_id, amount_cents)
SELECT id, expert_id, project_id, pay_cents FROM d
ON CONFLICT (assignment_id) DO NOTHING;

-- name: assignments_auto_approve
-- $1 max rows. on_review: work not reviewed within the project's auto-approval delay is
-- accepted (and paid); a gold answer is decided by its correctness instead (customers never
-- see gold). Canceled projects too: cancel does not void submitted work. SKIP LOCKED: rows a
-- review is deciding right now are left to it. Returns what was decided.
WITH due AS (
    SELECT a.id,
           t.kind <> 'gold' OR taskroute_gold_correct(a.answer, i.gold_answer, q.answer_field)
               AS ok
    FROM assignments a
    JOIN projects p ON p.id = a.project_id
    JOIN tasks t ON t.id = a.task_id
    JOIN items i ON i.id = a.item_id
    JOIN project_quality q ON q.project_id = a.project_id
    WHERE a.review_status = 'submitted' AND p.payment_policy = 'on_review'
      AND a.submitted_at + make_interval(secs => p.auto_approve_seconds) <= taskroute_now()
      -- a too-fast answer under too_fast_policy 'exclude' waits for the customer
      AND NOT (a.too_fast AND p.too_fast_policy = 'exclude')
    ORDER BY a.submitted_at
    LIMIT $1
    FOR UPDATE OF a SKIP LOCKED
),
d AS (
    UPDATE assignments a
    SET review_status = CASE WHEN due.ok THEN 'accepted' ELSE 'rejected' END,
        reviewed_at = taskroute_now(), reviewed_by = 'auto',
        review_reason = CASE WHEN due.ok THEN 'not reviewed within the auto-approval delay'
                             ELSE 'incorrect answer' END
    FROM due
    WHERE a.id = due.id AND a.review_status = 'submitted'
    RETURNING a.id, a.expert_id, a.project_id, a.pay_cents, a.review_status
),
paid AS (
    INSERT INTO payouts (assignment_id, expert_id, project_id, amount_cents)
    SELECT id, expert_id, project_id, pay_cents FROM d WHERE review_status = 'accepted'
    ON CONFLICT (assignment_id) DO NOTHING
)
SELECT id, project_id, review_status FROM d;

-- name: assignments_reject_retracted
-- $1 assignment ids, $2 reason, $3 clawback (bool). Retracted answers are rejected: the
-- undecided ones always (never paid), the accepted ones with a clawback (whose payment gets a
-- reversal line from payouts_clawback in the same transaction). Without a clawback a payment
-- already made stands, and so does its acceptance.
UPDATE assignments
SET review_status = 'rejected', reviewed_at = taskroute_now(), reviewed_by = 'retraction',
    review_reason = $2::text
WHERE id = ANY ($1::uuid[])
  AND (review_status = 'submitted' OR ($3::boolean AND review_status = 'accepted'));

-- name: reviews_of
-- $1 assignment ids. Review state with what authorises reading it (expert, customer).
SELECT a.id, a.expert_id, a.project_id, p.customer_id, a.review_status, a.reviewed_at,
       a.reviewed_by, a.review_reason, a.submitted_at, a.pay_cents, p.payment_policy,
       t.kind AS task_kind, a.answer, a.too_fast, a.candidates_swapped, p.layout,
       CASE WHEN a.review_status = 'rejected' AND a.reviewed_by <> 'retraction'
            THEN a.reviewed_at + make_interval(secs => p.override_seconds) END
           AS override_until
FROM assignments a
JOIN projects p ON p.id = a.project_id
JOIN tasks t ON t.id = a.task_id
WHERE a.id = ANY ($1::uuid[]);

-- name: reviews_page
-- $1 project_id, $2 review_status (NULL: any), $3 after (submitted_at), $4 after id, $5 max
-- rows. A customer's review list: submitted work of a project, oldest first, never gold
-- (nor an expert reviewer's reviews: they are paid per review, never decided by customers).
SELECT a.id, a.expert_id, a.project_id, p.customer_id, a.review_status, a.reviewed_at,
       a.reviewed_by, a.review_reason, a.submitted_at, a.pay_cents, p.payment_policy,
       t.kind AS task_kind, a.answer, a.too_fast, a.candidates_swapped, p.layout,
       CASE WHEN a.review_status = 'rejected' AND a.reviewed_by <> 'retraction'
            THEN a.reviewed_at + make_interval(secs => p.override_seconds) END
           AS override_until
FROM assignments a
JOIN projects p ON p.id = a.project_id
JOIN tasks t ON t.id = a.task_id
WHERE a.project_id = $1 AND a.review_status IS NOT NULL AND t.kind NOT IN ('gold', 'review')
  AND ($2::text IS NULL OR a.review_status = $2)
  AND (a.submitted_at, a.id) > ($3::timestamptz, $4::uuid)
ORDER BY a.submitted_at, a.id
LIMIT $5;

-- name: bonus_insert
-- $1 project_id, $2 expert_id, $3 amount_cents, $4 reason, $5 idempotency key. A bonus line,
-- only for an expert who submitted work in the project (assignments_expert_project), once per
-- (project, key): a repeated or racing grant with the key writes nothing (payouts_bonus_once;
-- the racer waits for the first insert's outcome) and the caller reads the line (bonus_get).
INSERT INTO payouts (expert_id, project_id, amount_cents, kind, reason, idempotency_key)
SELECT $2, $1, $3, 'bonus', $4, $5
WHERE EXISTS (SELECT 1 FROM assignments a
              WHERE a.expert_id = $2 AND a.project_id = $1 AND a.status = 'submitted')
ON CONFLICT (project_id, idempotency_key) WHERE kind = 'bonus' DO NOTHING
RETURNING *, NULL::uuid AS reversed_by;

-- name: bonus_get
-- $1 project_id, $2 idempotency key.
SELECT *, NULL::uuid AS reversed_by FROM payouts
WHERE project_id = $1 AND kind = 'bonus' AND idempotency_key = $2;
