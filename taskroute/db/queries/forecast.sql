-- Deadline forecasts and risk alerts (issues 7, 17). Times are the database's taskroute_now(), or the
-- clock a simulator passes.

-- name: forecast_skills
-- $1 project_id (NULL: every active project with a deadline, and the completed ones still
-- at risk), $2 presence window seconds,
-- $3 clock (NULL: taskroute_now()). One row per (project, skill) of the target projects.
-- remaining = open/pending slots + in-flight (claimed) slots.
-- A present expert is an active expert seen (claim, heartbeat) within the presence window or
-- holding a live lease. Each present expert splits their time equally among every
-- (project, skill) with work left that they qualify for (skill active, quality >= the
-- project's min_quality): `experts` / `shares` (parallel arrays) list the row's present
-- experts and their shares; their pace comes from forecast_cycles.
WITH clock AS (SELECT coalesce($3::timestamptz, taskroute_now()) AS now_),
target AS (
    SELECT t.project_id, t.skill, p.min_quality, p.deadline,
           count(*) FILTER (WHERE t.status IN ('open', 'pending')) AS open,
           count(*) FILTER (WHERE t.status = 'claimed') AS in_flight,
           count(*) FILTER (WHERE t.status = 'done') AS done,
           count(*) AS total
    FROM projects p
    JOIN tasks t ON t.project_id = p.id
    WHERE ($1::uuid IS NULL AND p.deadline IS NOT NULL
           -- a project completed while at risk is judged once more: it recovered (issue 13)
           AND (p.status = 'active'
                OR p.status = 'completed'
                   AND p.id IN (SELECT r.project_id FROM project_risk r
                                WHERE r.state = 'at_risk')))
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

-- name: forecast_cycles
-- $1 skills, $2 history window seconds, $3 idle cap seconds, $4 clock (NULL: taskroute_now()).
-- Pace measured from the work itself: for each submission of these skills in the window, the
-- seconds it cost its expert (`cycle`): from the expert's previous submission (any skill)
-- when they claimed within `idle cap` of it (the time between tasks is part of working), else
-- from the claim (they were away: a break is not pace). Newest first, at most 30 per
-- (expert, skill); `age` in seconds before the clock.
WITH clock AS (SELECT coalesce($4::timestamptz, taskroute_now()) AS now_),
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

-- name: advisory_xact_lock
-- $1 key. Waits for the lock (released at commit); for explicit, on-demand runs of a job.
SELECT pg_advisory_xact_lock($1);

-- name: risk_get
-- $1 project_id.
SELECT state, changed_at, evaluated_at FROM project_risk WHERE project_id = $1;

-- name: risk_lock
-- $1 project_id. The row the evaluator reads and rewrites.
SELECT state FROM project_risk WHERE project_id = $1 FOR UPDATE;

-- name: risk_upsert
-- $1 project_id, $2 state. changed_at moves only when the state does.
INSERT INTO project_risk (project_id, state) VALUES ($1, $2)
ON CONFLICT (project_id) DO UPDATE
SET state = EXCLUDED.state,
    evaluated_at = taskroute_now(),
    changed_at = CASE WHEN project_risk.state = EXCLUDED.state
                      THEN project_risk.changed_at ELSE taskroute_now() END;

-- name: alert_insert
-- $1 project_id, $2 kind ('at_risk' | 'recovered'), $3 message, $4 remaining, $5 eta,
-- $6 deadline.
INSERT INTO project_alerts (project_id, kind, message, remaining, eta, deadline)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING *;

-- name: alerts_for_project
-- $1 project_id, $2 max rows. Newest first.
SELECT * FROM project_alerts WHERE project_id = $1 ORDER BY seq DESC LIMIT $2;

-- name: alert_latest_seq
-- $1 project_id. 0 when the project has no alert.
SELECT coalesce(max(seq), 0) FROM project_alerts WHERE project_id = $1;

-- name: db_now
-- The database's clock, which every forecast uses.
SELECT taskroute_now();
