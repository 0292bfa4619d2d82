-- SQL of the forecast-accuracy bench (bench/forecast_bench.py --accuracy). Claims and submits
-- are the application's own one-round-trip functions (claim_call, submit_call); these blocks
-- only build the world and restamp what those calls wrote with the simulated clock, which
-- runs ahead of the wall clock (so every lease the real calls check is still live).

-- name: fa_project
-- $1 customer_id, $2 name, $3 deadline, $4 created_at (simulated).
INSERT INTO projects (customer_id, name, deadline, created_at) VALUES ($1, $2, $3, $4)
RETURNING id;

-- name: fa_tasks
-- $1 project_id, $2 skill, $3 how many. Open tasks, one slot per item.
WITH made AS (
    INSERT INTO items (project_id, skill, payload)
    SELECT $1, $2, jsonb_build_object('n', g) FROM generate_series(1, $3) g
    RETURNING id
)
INSERT INTO tasks (item_id, project_id, skill, status)
SELECT id, $1, $2, 'open' FROM made;

-- name: fa_expert
-- $1 name, $2 skills, $3 created_at (simulated).
WITH e AS (INSERT INTO experts (name, created_at) VALUES ($1, $3) RETURNING id),
s AS (INSERT INTO expert_skills (expert_id, skill) SELECT e.id, u FROM e, unnest($2::text[]) u)
SELECT id FROM e;

-- name: fa_stamp_claim
-- $1 assignment_id, $2 expert_id, $3 simulated time. The claim happened at $3.
WITH a AS (
    UPDATE assignments SET claimed_at = $3::timestamptz, lease_until = $3::timestamptz + interval '30 minutes'
    WHERE id = $1 RETURNING task_id
),
t AS (UPDATE tasks SET lease_until = $3::timestamptz + interval '30 minutes' FROM a WHERE tasks.id = a.task_id)
UPDATE experts SET last_seen_at = $3 WHERE id = $2;

-- name: fa_stamp_submit
-- $1 assignment_id, $2 expert_id, $3 simulated time. The submit happened at $3.
WITH a AS (UPDATE assignments SET submitted_at = $3 WHERE id = $1)
UPDATE experts SET last_seen_at = $3 WHERE id = $2;

-- name: fa_leave
-- $1 expert_id, $2 simulated time. The expert logs off: seen for the last time at $2.
UPDATE experts SET last_seen_at = $2 WHERE id = $1;

-- name: fa_progress
-- $1 project_id. Done and total slots.
SELECT count(*) FILTER (WHERE status = 'done')::int AS done, count(*)::int AS total
FROM tasks WHERE project_id = $1;
