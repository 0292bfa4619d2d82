-- A claim the admission gate would refuse (db/admission.py) is answered anyway when its expert
-- already holds a live claim: the answer is that claim, and finding it is one probe of the
-- expert's live assignment (assignments_one_active), run outside the claim line (PROTECT) and
-- without the claim's expert-row lock. A double click must never turn a held task into
-- "come back later".

-- name: experts_holding_claims
-- $1 expert ids (uuid[]). Those of them who hold a live claim (the door's question,
-- graphql_http.py), one row each; asked for every refusal waiting at one moment at once
-- (db/batched_probe.py).
SELECT x.expert_id
FROM unnest($1::uuid[]) AS x(expert_id)
WHERE EXISTS (
    SELECT 1 FROM assignments a
    WHERE a.expert_id = x.expert_id AND a.status = 'active' AND a.lease_until > taskroute_now()
);

-- name: claim_held
-- $1 expert_id. The expert's live claim as claim_call returns it (outcome 'held', no released
-- leases), or no row; nothing written (the claim's own path also records presence and an
-- audit row: heartbeats record presence, and the claim was recorded when it was made). An
-- expert no longer active gets no row, as from the claim.
-- The same columns as claim_call: the layout's order, the instructions' version and, for a
-- review task, the answer under review.
SELECT 'held' AS outcome, h.*, '[]'::jsonb AS released, x.answer_schema, x.layout,
       x.candidate_keys, r.reviewed_answer, r.reviewed_swapped
FROM ({{ assignment_active_for_expert($1) }}) h
JOIN experts e ON e.id = $1 AND e.status = 'active'
{{ claim_context(h.item_id, h.task_id) }};

-- name: claims_held
-- $1 expert ids (uuid[]). claim_held for each of them at once, with the expert's id: the
-- answer to every repeated claim waiting at one moment (db/batched_probe.py).
SELECT x.expert_id, c.*
FROM unnest($1::uuid[]) AS x(expert_id)
CROSS JOIN LATERAL ({{ claim_held(x.expert_id) }}) c;
