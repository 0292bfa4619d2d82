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

-- name: fa_seen
-- $1 expert_id, $2 simulated time. The expert was seen at $2 without a claim: they log off,
-- or their claim found nothing.
UPDATE experts SET last_seen_at = $2 WHERE id = $1;

-- name: fa_analyze
-- Statistics for the planner after a scenario's world is built (autovacuum may be off).
ANALYZE;

-- name: fa_alerts
-- $1 project_id, $2 kind ('at_risk' | 'recovered'). How many such alerts it has.
SELECT count(*)::int FROM project_alerts WHERE project_id = $1 AND kind = $2;

-- name: fa_progress
-- $1 project_id. Done and total slots.
SELECT count(*) FILTER (WHERE status = 'done')::int AS done, count(*)::int AS total
FROM tasks WHERE project_id = $1;

-- The forecast before issue 16, kept here as the speed bench's baseline (bench/forecast_bench.py
-- without --accuracy times it next to the maintained counts): it recounts the project's tasks
-- and walks the submission history on every ask. Verbatim but for the names.

-- name: fb_baseline_skills
-- $1 project_id (NULL: every active project with a deadline), $2 presence window seconds,
-- $3 clock (NULL: now()). One row per (project, skill) of the target projects.
-- remaining = open/pending slots + in-flight (claimed) slots.
-- A present expert is an active expert seen (claim, heartbeat) within the presence window or
-- holding a live lease. Each present expert splits their time equally among every
-- (project, skill) with work left that they qualify for (skill active, quality >= the
-- project's min_quality): `experts` / `shares` (parallel arrays) list the row's present
-- experts and their shares; their pace comes from forecast_cycles.
WITH clock AS (SELECT coalesce($3::timestamptz, now()) AS now_),
target AS (
    SELECT t.project_id, t.skill, p.min_quality, p.deadline,
           count(*) FILTER (WHERE t.status IN ('open', 'pending')) AS open,
           count(*) FILTER (WHERE t.status = 'claimed') AS in_flight,
           count(*) FILTER (WHERE t.status = 'done') AS done,
           count(*) AS total
    FROM projects p
    JOIN tasks t ON t.project_id = p.id
    WHERE ($1::uuid IS NULL AND p.status = 'active' AND p.deadline IS NOT NULL)
       OR p.id = $1
    GROUP BY t.project_id, t.skill, p.min_quality, p.deadline
),
present AS (
    SELECT e.id
    FROM experts e, clock
    WHERE e.status = 'active'
      AND (e.last_seen_at >= clock.now_ - make_interval(secs => $2)
           OR EXISTS (SELECT 1 FROM assignments a
                      WHERE a.expert_id = e.id AND a.status = 'active'
                        AND a.lease_until > clock.now_))
),
present_skills AS (
    SELECT es.expert_id, es.skill, es.quality
    FROM present e
    JOIN expert_skills es ON es.expert_id = e.id AND es.status = 'active'
),
demand AS MATERIALIZED (
    -- every (project, skill) with work left that a present expert holds the skill for
    SELECT p.id AS project_id, s.skill, p.min_quality
    FROM projects p
    CROSS JOIN (SELECT DISTINCT skill FROM present_skills) s
    WHERE p.status = 'active'
      AND EXISTS (SELECT 1 FROM tasks t
                  WHERE t.project_id = p.id AND t.skill = s.skill
                    AND t.status IN ('open', 'pending', 'claimed'))
),
shares AS (
    SELECT ps.expert_id, d.project_id, d.skill,
           1.0 / count(*) OVER (PARTITION BY ps.expert_id) AS share
    FROM present_skills ps
    JOIN demand d ON d.skill = ps.skill AND ps.quality >= d.min_quality
),
capacity AS (
    SELECT project_id, skill, count(*) AS active_experts, sum(share) AS expert_equiv,
           array_agg(expert_id ORDER BY expert_id) AS experts,
           array_agg(share::float8 ORDER BY expert_id) AS shares
    FROM shares
    GROUP BY project_id, skill
)
SELECT tg.project_id, tg.skill, tg.deadline,
       tg.open::int, tg.in_flight::int, tg.done::int, tg.total::int,
       (tg.open + tg.in_flight)::int AS remaining,
       coalesce(c.active_experts, 0)::int AS active_experts,
       coalesce(c.expert_equiv, 0)::float8 AS expert_equiv,
       coalesce(c.experts, '{}') AS experts,
       coalesce(c.shares, '{}') AS shares,
       clock.now_ AS evaluated_at
FROM clock, target tg
LEFT JOIN capacity c ON c.project_id = tg.project_id AND c.skill = tg.skill
ORDER BY tg.project_id, tg.skill;

-- name: fb_baseline_cycles
-- $1 skills, $2 history window seconds, $3 idle cap seconds, $4 clock (NULL: now()).
-- Pace measured from the work itself: for each submission of these skills in the window, the
-- seconds it cost its expert (`cycle`): from the expert's previous submission (any skill)
-- when they claimed within `idle cap` of it (the time between tasks is part of working), else
-- from the claim (they were away: a break is not pace). Newest first, at most 30 per
-- (expert, skill); `age` in seconds before the clock.
WITH clock AS (SELECT coalesce($4::timestamptz, now()) AS now_),
mine AS (
    SELECT a.expert_id, t.skill, a.claimed_at, a.submitted_at,
           lag(a.submitted_at) OVER (PARTITION BY a.expert_id ORDER BY a.submitted_at) AS prev
    FROM clock, assignments a
    JOIN tasks t ON t.id = a.task_id
    WHERE a.status = 'submitted'
      AND a.submitted_at > clock.now_ - make_interval(secs => $2)
      AND a.submitted_at <= clock.now_
      AND a.expert_id IN (SELECT a2.expert_id FROM assignments a2 JOIN tasks t2
                              ON t2.id = a2.task_id
                          WHERE t2.skill = ANY ($1::text[]) AND a2.status = 'submitted'
                            AND a2.submitted_at > clock.now_ - make_interval(secs => $2))
),
ranked AS (
    SELECT m.expert_id, m.skill,
           extract(epoch FROM m.submitted_at
                   - CASE WHEN m.prev IS NOT NULL AND m.prev <= m.claimed_at
                               AND m.claimed_at - m.prev <= make_interval(secs => $3)
                          THEN m.prev ELSE m.claimed_at END)::float8 AS cycle,
           extract(epoch FROM clock.now_ - m.submitted_at)::float8 AS age,
           row_number() OVER (PARTITION BY m.expert_id, m.skill
                              ORDER BY m.submitted_at DESC) AS rank
    FROM mine m, clock
    WHERE m.skill = ANY ($1::text[])
)
SELECT expert_id, skill, greatest(cycle, 0.001) AS cycle, age
FROM ranked WHERE rank <= 30
ORDER BY expert_id, skill, rank;
