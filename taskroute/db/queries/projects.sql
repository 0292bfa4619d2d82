-- Projects, their items and the tasks (claimable slots) made from them.

-- name: project_insert
-- $1 customer_id, $2 name, $3 status, $4 priority, $5 deadline, $6 lease_seconds,
-- $7 pay_cents, $8 min_quality, $9 redundancy, $10 max_retries, $11 heartbeat_timeout_seconds,
-- $12 answer_schema (NULL: any JSON answer), $13 payment_policy, $14 auto_approve_seconds,
-- $15 override_seconds, $16 pay_adjudicated_disagreements (issue 20)
INSERT INTO projects (customer_id, name, status, priority, deadline, lease_seconds,
                      pay_cents, min_quality, redundancy, max_retries, heartbeat_timeout_seconds,
                      answer_schema, payment_policy, auto_approve_seconds, override_seconds,
                      pay_adjudicated_disagreements)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
RETURNING *;

-- name: project_get
-- $1 project_id, $2 customer_id (NULL: any, for admins)
SELECT * FROM projects WHERE id = $1 AND ($2::uuid IS NULL OR customer_id = $2);

-- name: items_insert
-- $1 project_id; parallel arrays $2 ids, $3 skills, $4 external ids, $5 inline payloads
-- (JSON text), $6 payload keys, $7 payload sizes, $8 gold answers (JSON text).
-- Payloads and gold travel as JSON text: as jsonb[] elements, a payload that is itself a JSON
-- array was taken by the driver for another dimension of the array parameter.
-- Re-sending an external id is a no-op: only newly stored items come back.
INSERT INTO items (id, project_id, skill, external_id, payload, payload_key, payload_bytes,
                   gold_answer)
SELECT u.id, $1, u.skill, u.external_id, u.payload::jsonb, u.payload_key, u.payload_bytes,
       u.gold::jsonb
FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[],
            $8::text[]) AS u(id, skill, external_id, payload, payload_key, payload_bytes, gold)
ON CONFLICT (project_id, external_id) DO NOTHING
RETURNING id;

-- name: items_set_answer_schema
-- $1 item ids, $2 their answer schemas (each replaces the project's for that item). Run in
-- the transaction that inserted the items, before any of their tasks can be claimed.
UPDATE items i SET answer_schema = u.answer_schema
FROM unnest($1::uuid[], $2::jsonb[]) AS u(id, answer_schema)
WHERE i.id = u.id;

-- name: tasks_insert
-- $1 project_id, $2 item ids, $3 status ('open' or 'pending'), $4 skills, $5 task priorities.
-- One task per redundancy slot. eff_priority orders project priority (plus a deadline bump)
-- before task priority (see routing_eff_priority in migration 0004_routing).
INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, min_quality,
                   max_retries, status)
SELECT u.item_id, p.id, u.skill, u.priority,
       routing_eff_priority(p.priority, p.deadline_bumped, u.priority), p.min_quality,
       p.max_retries, $3
FROM projects p
CROSS JOIN unnest($2::uuid[], $4::text[], $5::int[]) AS u(item_id, skill, priority)
-- dynamic overlap: a weighted-resolution project with min_answers starts items with that many
-- slots; taskroute_resolve_item (functions/quality.sql) adds more up to the redundancy
CROSS JOIN generate_series(1, coalesce(
    (SELECT least(p.redundancy, q.min_answers) FROM project_quality q
     WHERE q.project_id = p.id AND q.resolution = 'weighted'), p.redundancy))
WHERE p.id = $1
  -- gold items get no slots: they are served from the gold pool (quality.sql: gold_claim)
  AND NOT EXISTS (SELECT 1 FROM items g WHERE g.id = u.item_id AND g.gold_answer IS NOT NULL);

-- name: project_cancel
-- $1 project_id, $2 customer_id. No new claims: open and pending tasks are canceled; claimed
-- ones keep their lease and may still be submitted (and are paid).
WITH p AS (
    UPDATE projects SET status = 'canceled', canceled_at = taskroute_now()
    WHERE id = $1 AND customer_id = $2 AND status <> 'canceled'
    RETURNING id
)
UPDATE tasks t SET status = 'canceled'
FROM p WHERE t.project_id = p.id AND t.status IN ('open', 'pending');

-- name: project_progress
-- $1 project_id. Counts of tasks by state (gold servings are not customer work).
SELECT count(*) AS total,
       count(*) FILTER (WHERE status IN ('open', 'pending')) AS open,
       count(*) FILTER (WHERE status = 'claimed') AS claimed,
       count(*) FILTER (WHERE status = 'done') AS done,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status = 'canceled') AS canceled
FROM tasks WHERE project_id = $1 AND kind <> 'gold';
