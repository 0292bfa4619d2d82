-- SQL of the routing simulator (bench/routing.py). The claim under test is the application's
-- own `task_claim`; these blocks only stand in for the parts of the world the simulator
-- owns: arrivals, simulated timestamps, completions, and the baseline policy.

-- name: bench_clock_default
-- No parameters. The routing job's windows run on simulated time, so claims must be stamped
-- with it: in the simulator's own database only, assignments.claimed_at defaults to the
-- session's simulated clock (set by bench_release and bench_complete), else now().
ALTER TABLE assignments ALTER COLUMN claimed_at
    SET DEFAULT coalesce(nullif(current_setting('bench.clock', true), '')::timestamptz, now());

-- name: bench_release
-- $1 project_id, $2 simulated time. A project's tasks arrive (become claimable); the
-- session's simulated clock moves to $2.
WITH p AS (UPDATE projects SET created_at = $2 WHERE id = $1),
opened AS (UPDATE tasks SET status = 'open' WHERE project_id = $1 AND status = 'pending')
SELECT set_config('bench.clock', $2::timestamptz::text, false);

-- name: bench_complete
-- $1 assignment_id, $2 simulated time, $3 expert_id. The expert submits (no payment lines:
-- the ledger is not what this simulates); the session's simulated clock moves to $2.
WITH a AS (
    UPDATE assignments SET status = 'submitted', submitted_at = $2, answer = '{}'
    WHERE id = $1 AND status = 'active'
    RETURNING task_id
),
t AS (
    UPDATE tasks SET status = 'done', lease_until = NULL
    FROM a WHERE tasks.id = a.task_id AND tasks.status = 'claimed'
),
seen AS (UPDATE experts SET last_seen_at = $2 WHERE id = $3)
SELECT set_config('bench.clock', $2::timestamptz::text, false);

-- name: bench_baseline_claim
-- $1 expert_id, $2 skills (NULL: all), $3 project_id (unused scope, same signature as
-- task_claim). Plain priority-then-FIFO: across the expert's skills the open task with the
-- highest static priority, then the oldest; no scarcity, no fairness, no deadline bumps.
WITH my_skills AS (
    SELECT es.skill FROM expert_skills es
    WHERE es.expert_id = $1 AND es.status = 'active'
      AND ($2::text[] IS NULL OR es.skill = ANY ($2::text[]))
),
candidate AS (
    SELECT c.* FROM my_skills s
    CROSS JOIN LATERAL (
        SELECT t.id, t.eff_priority, t.seq FROM tasks t
        WHERE t.status = 'open' AND t.skill = s.skill
          AND ($3::uuid IS NULL OR t.project_id = $3::uuid)
        ORDER BY t.eff_priority DESC, t.seq
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) c
),
best AS (SELECT * FROM candidate ORDER BY eff_priority DESC, seq LIMIT 1),
claimed AS (
    UPDATE tasks t SET status = 'claimed', assignment_id = gen_random_uuid(),
                       lease_until = now() + interval '7 days'
    FROM best b WHERE t.id = b.id
    RETURNING t.id AS task_id, t.item_id, t.project_id, t.assignment_id, t.lease_until
),
inserted AS (
    INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, lease_until)
    SELECT assignment_id, task_id, item_id, project_id, $1, lease_until FROM claimed
)
SELECT assignment_id, task_id, item_id, project_id FROM claimed;
