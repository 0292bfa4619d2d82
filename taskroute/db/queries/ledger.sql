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
-- $1 expert_id, $2 project_id (NULL: every project).
SELECT count(*) FILTER (WHERE kind = 'payment')::int AS payments,
       count(*) FILTER (WHERE kind = 'reversal')::int AS reversals,
       coalesce(sum(amount_cents) FILTER (WHERE kind = 'payment'), 0)::bigint AS paid_cents,
       coalesce(-sum(amount_cents) FILTER (WHERE kind = 'reversal'), 0)::bigint
           AS reversed_cents,
       coalesce(sum(amount_cents), 0)::bigint AS balance_cents
FROM payouts
WHERE expert_id = $1 AND ($2::uuid IS NULL OR project_id = $2);

-- name: project_payout_totals
-- $1 project_id. Totals and the balance of each expert paid by the project.
SELECT expert_id,
       count(*) FILTER (WHERE kind = 'payment')::int AS payments,
       count(*) FILTER (WHERE kind = 'reversal')::int AS reversals,
       coalesce(sum(amount_cents) FILTER (WHERE kind = 'payment'), 0)::bigint AS paid_cents,
       coalesce(-sum(amount_cents) FILTER (WHERE kind = 'reversal'), 0)::bigint
           AS reversed_cents,
       coalesce(sum(amount_cents), 0)::bigint AS balance_cents
FROM payouts
WHERE project_id = $1
GROUP BY expert_id
ORDER BY expert_id;
