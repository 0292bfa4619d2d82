-- An expert's own work and earnings (`me { expert { work earnings } }`, resolvers/my_work.py).
-- Every read starts from the expert's id on a per-expert index; a page reads at most its
-- rows (plus those a status filter skips on the expert's own index).

-- name: expert_work_columns
-- The row of one submitted assignment as the expert sees it: its pay state from the review
-- state and the ledger (the payment line by UNIQUE assignment_id, its reversal by UNIQUE
-- reverses_id). 'paid' | 'pending' (undecided) | 'rejected' | 'reversed' (paid, then
-- clawed back).
SELECT a.id AS assignment_id, a.project_id, a.task_id, a.submitted_at, a.pay_cents,
       a.review_status, a.reviewed_at, a.instructions_version, a.too_fast,
       CASE WHEN a.review_status = 'rejected' THEN a.review_reason END AS rejection_reason,
       CASE WHEN r.id IS NOT NULL THEN 'reversed'
            WHEN a.review_status = 'rejected' THEN 'rejected'
            WHEN a.review_status = 'submitted' THEN 'pending'
            ELSE 'paid' END AS pay_state,
       coalesce(pl.amount_cents, 0) + coalesce(r.amount_cents, 0) AS paid_cents,
       CASE WHEN a.review_status = 'submitted' AND pr.payment_policy = 'on_review'
            THEN a.submitted_at + make_interval(secs => pr.auto_approve_seconds) END
           AS auto_approval_at
FROM assignments a
JOIN projects pr ON pr.id = a.project_id
LEFT JOIN payouts pl ON pl.assignment_id = a.id AND pl.kind = 'payment'
LEFT JOIN payouts r ON r.reverses_id = pl.id

-- name: expert_work_page
-- $1 expert_id, $2 before submitted_at, $3 before id, $4 max rows. Newest first, on
-- assignments_expert_submitted.
SELECT * FROM ({{ expert_work_columns }}
    WHERE a.expert_id = $1 AND a.status = 'submitted'
      AND (a.submitted_at, a.id) < ($2::timestamptz, $3::uuid)
    ORDER BY a.submitted_at DESC, a.id DESC
    LIMIT $4) w
ORDER BY submitted_at DESC, assignment_id DESC;

-- name: expert_work_page_pending
-- $1 expert_id, $2 before submitted_at, $3 before id, $4 max rows. Undecided work only
-- (assignments_expert_review_pending: as many rows as the expert has undecided).
SELECT * FROM ({{ expert_work_columns }}
    WHERE a.expert_id = $1 AND a.review_status = 'submitted'
      AND (a.submitted_at, a.id) < ($2::timestamptz, $3::uuid)
    ORDER BY a.submitted_at DESC, a.id DESC
    LIMIT $4) w
ORDER BY submitted_at DESC, assignment_id DESC;

-- name: expert_work_page_rejected
-- $1 expert_id, $2 before submitted_at, $3 before id, $4 max rows. Rejected work only
-- (assignments_expert_rejected).
SELECT * FROM ({{ expert_work_columns }}
    WHERE a.expert_id = $1 AND a.review_status = 'rejected'
      AND (a.submitted_at, a.id) < ($2::timestamptz, $3::uuid)
    ORDER BY a.submitted_at DESC, a.id DESC
    LIMIT $4) w
ORDER BY submitted_at DESC, assignment_id DESC;

-- name: expert_work_page_paid
-- $1 expert_id, $2 before submitted_at, $3 before id, $4 max rows. Paid work (accepted, or
-- paid at submit), on assignments_expert_submitted, skipping the expert's other rows.
SELECT * FROM ({{ expert_work_columns }}
    WHERE a.expert_id = $1 AND a.status = 'submitted'
      AND (a.review_status IS NULL OR a.review_status = 'accepted')
      AND (a.submitted_at, a.id) < ($2::timestamptz, $3::uuid)
    ORDER BY a.submitted_at DESC, a.id DESC
    LIMIT $4) w
WHERE pay_state = 'paid'
ORDER BY submitted_at DESC, assignment_id DESC;

-- name: expert_earnings
-- $1 expert_id. Totals: from the ledger (payouts_expert) paid (payments net of reversals)
-- and bonuses; from the expert's undecided work (assignments_expert_review_pending) what is
-- pending and when the first on_review answer is approved automatically; from the rejected
-- work (assignments_expert_rejected) what was refused.
SELECT
    (SELECT coalesce(sum(amount_cents), 0) FROM payouts
     WHERE expert_id = $1 AND kind IN ('payment', 'reversal'))::bigint AS paid_cents,
    (SELECT coalesce(sum(amount_cents), 0) FROM payouts
     WHERE expert_id = $1 AND kind = 'bonus')::bigint AS bonus_cents,
    (SELECT coalesce(sum(a.pay_cents), 0) FROM assignments a
     WHERE a.expert_id = $1 AND a.review_status = 'submitted')::bigint AS pending_cents,
    (SELECT coalesce(sum(a.pay_cents), 0) FROM assignments a
     WHERE a.expert_id = $1 AND a.review_status = 'rejected')::bigint AS rejected_cents,
    (SELECT min(a.submitted_at + make_interval(secs => p.auto_approve_seconds))
     FROM assignments a JOIN projects p ON p.id = a.project_id
     WHERE a.expert_id = $1 AND a.review_status = 'submitted'
       AND p.payment_policy = 'on_review'
       AND NOT (a.too_fast AND p.too_fast_policy = 'exclude')) AS next_auto_approval_at;

-- name: expert_bonuses
-- $1 expert_id, $2 max rows. The bonus lines, newest first (payouts_expert, newest seq back).
SELECT id, project_id, amount_cents, reason, created_at
FROM payouts
WHERE expert_id = $1 AND kind = 'bonus'
ORDER BY seq DESC
LIMIT $2;
