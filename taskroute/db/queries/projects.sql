-- Projects, their items and the tasks (claimable slots) made from them.

-- name: project_insert
-- $1 customer_id, $2 name, $3 status, $4 priority, $5 deadline, $6 lease_seconds,
-- $7 pay_cents, $8 min_quality, $9 redundancy, $10 max_retries, $11 heartbeat_timeout_seconds,
-- $12 answer_schema (NULL: any JSON answer), $13 payment_policy, $14 auto_approve_seconds,
-- $15 override_seconds, $16 pay_adjudicated_disagreements,
-- $17 payload retention in seconds, $18 flag_after_bad_item_releases, $19 max_items_per_expert,
-- $20 min_seconds_per_task, $21 too_fast_policy, $22 layout, $23 candidate_keys,
-- $24 expert_review, $25 review_pay_cents, $26 pay_corrected
INSERT INTO projects (customer_id, name, status, priority, deadline, lease_seconds,
                      pay_cents, min_quality, redundancy, max_retries, heartbeat_timeout_seconds,
                      answer_schema, payment_policy, auto_approve_seconds, override_seconds,
                      pay_adjudicated_disagreements, payload_retention,
                      flag_after_bad_item_releases, max_items_per_expert, min_seconds_per_task,
                      too_fast_policy, layout, candidate_keys, expert_review, review_pay_cents,
                      pay_corrected)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
        make_interval(secs => $17::bigint), $18, $19, $20, $21, $22, $23, $24, $25, $26)
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
-- before task priority (see routing_eff_priority in functions/routing.sql).
INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, min_quality,
                   max_retries, status)
SELECT u.item_id, p.id, u.skill, u.priority,
       routing_eff_priority(p.priority, p.deadline_bumped, u.priority), p.min_quality,
       p.max_retries, $3::text
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

-- fragment: project_task_counts
-- $1 project_id. Counts of the project's tasks by state; gold servings are not customer work.
-- From the maintained counts (task_counts.sql: index probes, exact in any snapshot), not a
-- recount of the project's tasks, which read every one of them, done ones included.
SELECT coalesce(sum(c.n), 0)::bigint AS total,
       coalesce(sum(c.n) FILTER (WHERE c.status IN ('open', 'pending')), 0)::bigint AS open,
       coalesce(sum(c.n) FILTER (WHERE c.status = 'claimed'), 0)::bigint AS claimed,
       coalesce(sum(c.n) FILTER (WHERE c.status = 'done'), 0)::bigint AS done,
       coalesce(sum(c.n) FILTER (WHERE c.status = 'failed'), 0)::bigint AS failed,
       coalesce(sum(c.n) FILTER (WHERE c.status = 'canceled'), 0)::bigint AS canceled
FROM ({{ task_counts_of($1) }}) c WHERE NOT c.gold

-- name: project_progress
-- $1 project_id. Counts of tasks by state (gold servings are not customer work), and the
-- project's status in the same snapshot ('completed' with its time).
SELECT p.status, p.completed_at, c.*
FROM projects p
CROSS JOIN LATERAL (
    {{ project_task_counts(p.id) }}
) c
WHERE p.id = $1;

-- Completion: a project is 'completed' while it has customer work (slots that are
-- not gold servings) and none of it is left: no slot pending, open or claimed, no background
-- ingest queued. functions/projects.sql: taskroute_project_settle moves the status, in the
-- transaction that ends the last slot or adds work.

-- fragment: project_settle_lock_key
-- $1 project_id. The advisory-lock key that orders completion against new work (two int4s).
2052915213, hashtext($1::uuid::text)

-- fragment: project_work_left
-- $1 project_id. A predicate: work remains (tasks_project_status probes, then the few
-- ingest jobs of the project).
(EXISTS (SELECT 1 FROM tasks t
         WHERE t.project_id = $1 AND t.status IN ('pending', 'open', 'claimed')
           AND t.kind <> 'gold')
 OR EXISTS (SELECT 1 FROM ingest_jobs j
            WHERE j.project_id = $1 AND j.state IN ('queued', 'running', 'retrying')))

-- name: project_settle_lock
-- $1 project_id. Taken first by transactions that add work (before project_lock_share:
-- a completing submit holds this lock and then updates the project row).
SELECT pg_advisory_xact_lock({{ project_settle_lock_key($1) }});

-- name: project_settle
-- $1 project_id. Run holding the settle lock, as a statement of its own: its snapshot is
-- taken after the lock was granted, so it sees every transaction that held the lock before.
-- Completed when there is work and none is left, else active (ingesting and canceled
-- projects stay as they are). Returns the new status when it changed.
UPDATE projects p
SET status = s.status,
    completed_at = CASE WHEN s.status = 'completed' THEN taskroute_now() END
FROM (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.project_id = $1 AND t.kind <> 'gold')
                     AND NOT {{ project_work_left($1) }}
                THEN 'completed' ELSE 'active' END AS status
) s
WHERE p.id = $1 AND p.status IN ('active', 'completed') AND p.status <> s.status
RETURNING p.status

-- name: project_work_probe_open
-- $1 project_id. One open slot of the project that no other transaction is changing, locked FOR
-- SHARE to commit (see taskroute_project_settle): the one claims will take last (the far end of
-- tasks_open_project: last skill, lowest priority, newest), so a claim rarely wants the row
-- held here, and no submit waits for it. The near end is also where the claimed slots leave
-- dead index entries behind until a vacuum; the far end has none to walk.
SELECT t.id FROM tasks t
WHERE t.project_id = $1 AND t.status = 'open' AND t.kind <> 'gold'
ORDER BY t.skill DESC, t.eff_priority ASC, t.seq DESC
LIMIT 1
FOR SHARE SKIP LOCKED

-- name: project_work_probe_claimed
-- $1 project_id. The same for pending and claimed slots, once no open one is free. A claimed
-- slot locked here makes its expert's submit wait for this transaction: the last resort.
SELECT t.id FROM tasks t
WHERE t.project_id = $1 AND t.status IN ('pending', 'claimed') AND t.kind <> 'gold'
LIMIT 1
FOR SHARE SKIP LOCKED

-- name: projects_settle_call
-- $1 project ids, sorted (the lock order), $2 probe first (bool). taskroute_project_settle
-- for each, in the array's order.
SELECT taskroute_project_settle(u.p, $2) FROM unnest($1::uuid[]) WITH ORDINALITY AS u(p, n)
ORDER BY u.n;

-- Burn-down: the project's remaining work over time, rebuilt from each slot's
-- created_at (+1) and finished_at (-1), gold servings left out.

-- name: project_history_span
-- $1 project_id. From the project's creation to when it completed (or now), and now.
SELECT created_at AS since, coalesce(completed_at, taskroute_now()) AS until, taskroute_now() AS now
FROM projects WHERE id = $1;

-- name: project_remaining_history
-- $1 project_id, $2 bucket seconds, $3 first bucket, $4 last bucket (bucket b covers
-- [b * $2, (b + 1) * $2) seconds after the epoch). Per bucket the slots added and finished in
-- it and the remaining work at its end. Two probes of the project's tasks, whatever the range.
WITH ev AS (
    SELECT floor(extract(epoch FROM t.created_at) / $2)::bigint AS b, 1 AS added, 0 AS finished
    FROM tasks t WHERE t.project_id = $1 AND t.kind <> 'gold'
    UNION ALL
    SELECT floor(extract(epoch FROM t.finished_at) / $2)::bigint, 0, 1
    FROM tasks t
    WHERE t.project_id = $1 AND t.kind <> 'gold' AND t.finished_at IS NOT NULL
),
per AS (
    SELECT b, sum(added)::int AS added, sum(finished)::int AS finished FROM ev GROUP BY b
),
before AS (
    SELECT coalesce(sum(added - finished), 0)::int AS n FROM per WHERE b < $3::bigint
)
SELECT g.b AS bucket,
       coalesce(per.added, 0) AS added,
       coalesce(per.finished, 0) AS finished,
       (before.n + sum(coalesce(per.added, 0) - coalesce(per.finished, 0))
                   OVER (ORDER BY g.b))::int AS remaining
FROM generate_series($3::bigint, $4::bigint) AS g(b)
CROSS JOIN before
LEFT JOIN per ON per.b = g.b
ORDER BY g.b;
