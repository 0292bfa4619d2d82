-- Deadline forecasts and risk alerts. Times are taskroute_now(), or
-- the clock a simulator passes.

-- name: forecast_counts
-- $1 project_id (NULL: every active project with a deadline, and the completed ones still at
-- risk), $2 clock (NULL: taskroute_now()). One
-- row per (project, skill) of the target projects, from the maintained counts (task_counts.sql): an index probe per
-- project, whatever the history. open = open + pending slots, in_flight = claimed slots.
WITH target AS (
    SELECT p.id, p.deadline, p.min_quality
    FROM projects p
    WHERE ($1::uuid IS NULL AND p.deadline IS NOT NULL
           -- a project completed while at risk is judged once more: it recovered
           AND (p.status = 'active'
                OR p.status = 'completed'
                   AND p.id IN (SELECT r.project_id FROM project_risk r
                                WHERE r.state = 'at_risk')))
       OR p.id = $1
),
counts AS (
    SELECT c.project_id, c.skill, c.status, c.n
    FROM target t, LATERAL ({{ task_counts_of(t.id) }}) c
)
SELECT t.id AS project_id, c.skill, t.deadline, t.min_quality,
       coalesce(sum(c.n) FILTER (WHERE c.status IN ('open', 'pending')), 0)::int AS open,
       coalesce(sum(c.n) FILTER (WHERE c.status = 'claimed'), 0)::int AS in_flight,
       coalesce(sum(c.n) FILTER (WHERE c.status = 'done'), 0)::int AS done,
       sum(c.n)::int AS total,
       coalesce(sum(c.n) FILTER (WHERE c.status IN ('open', 'pending', 'claimed')), 0)::int
           AS remaining,
       coalesce($2::timestamptz, taskroute_now()) AS evaluated_at
FROM target t
JOIN counts c ON c.project_id = t.id
GROUP BY t.id, c.skill, t.deadline, t.min_quality
HAVING sum(c.n) > 0
ORDER BY t.id, c.skill;

-- name: forecast_experts
-- $1 presence window seconds, $2 clock (NULL: taskroute_now()), $3 skills (NULL: all). The present
-- experts holding any of the skills, one row each, with what the forecast needs:
-- - present: active, and seen (claim, heartbeat) within the window or holding a live lease
--   (`working`); resolvers/forecast.py also drops those idle for many of their own cycles;
-- - skills / qualities: their active skills (parallel arrays);
-- - demands: how many (project, skill) with work left (active projects) they qualify for
--   (skill held, quality >= the project's min_quality): their time is split among them;
-- - p_*: their kept submissions as expert_pace has them (newest first: skills, microseconds
--   from the claim, submission times in microseconds) and the clock: resolvers/forecast.py
--   `Kept` takes the history window and the cycles from them (no arithmetic per
--   submission here: it was most of a forecast's time).
WITH clock AS (SELECT coalesce($2::timestamptz, taskroute_now()) AS now_),
present AS (
    -- `working`: one probe per expert of their one live claim (assignments_one_active). The
    -- former `OR e.id IN (every live claim)` was rescanned for each expert when stale
    -- statistics made the live claims look few (360,400 index rows for 850 experts).
    -- `fresh`: NULL without a live claim, else whether its heartbeats still come
    -- (presence_overdue): a holder gone silent (tab closed) is not present at all, though
    -- seen within the window and while the lease still runs.
    SELECT e.id, e.last_seen_at, coalesce(w.fresh, false) AS working
    FROM experts e
    CROSS JOIN clock
    CROSS JOIN LATERAL (
        SELECT bool_or(NOT presence_overdue(e.last_seen_at, a.claimed_at,
                                            p.heartbeat_timeout_seconds, p.lease_seconds,
                                            clock.now_)) AS fresh
        FROM assignments a JOIN projects p ON p.id = a.project_id
        WHERE a.expert_id = e.id AND a.status = 'active' AND a.lease_until > clock.now_
    ) w
    WHERE e.status = 'active'
      AND (w.fresh OR (w.fresh IS NULL
                       AND e.last_seen_at >= clock.now_ - make_interval(secs => $1)))
),
held AS (
    SELECT es.expert_id, es.skill, es.quality
    FROM present e
    JOIN expert_skills es ON es.expert_id = e.id AND es.status = 'active'
),
left_by_skill AS (
    -- (skill, min_quality) -> projects with work left in that skill
    SELECT w.skill, p.min_quality, count(*) AS projects
    FROM (SELECT c.project_id, c.skill
          FROM ({{ task_counts_all }}) c
          WHERE c.status IN ('open', 'pending', 'claimed')
            AND c.skill IN (SELECT skill FROM held)
          GROUP BY c.project_id, c.skill
          HAVING sum(c.n) > 0) w
    JOIN projects p ON p.id = w.project_id AND p.status = 'active'
    GROUP BY w.skill, p.min_quality
),
demands AS (
    SELECT h.expert_id, coalesce(sum(l.projects), 0)::int AS demands
    FROM held h
    LEFT JOIN left_by_skill l ON l.skill = h.skill AND h.quality >= l.min_quality
    GROUP BY h.expert_id
),
asked AS (
    SELECT e.id, e.last_seen_at, e.working
    FROM present e
    WHERE $3::text[] IS NULL
       OR e.id IN (SELECT expert_id FROM held WHERE skill = ANY ($3::text[]))
),
skills_of AS (
    SELECT h.expert_id, array_agg(h.skill ORDER BY h.skill) AS skills,
           array_agg(h.quality::float8 ORDER BY h.skill) AS qualities
    FROM held h
    WHERE h.expert_id IN (SELECT id FROM asked)
    GROUP BY h.expert_id
)
SELECT e.id AS expert_id, e.last_seen_at, e.working, s.skills, s.qualities, d.demands,
       coalesce(ep.skills, '{}') AS p_skills,
       coalesce(ep.claim_us, '{}') AS p_claim_us,
       coalesce(ep.submitted_us, '{}') AS p_submitted_us,
       clock.now_ AS clock
FROM clock
CROSS JOIN asked e
JOIN skills_of s ON s.expert_id = e.id
JOIN demands d ON d.expert_id = e.id
LEFT JOIN expert_pace ep ON ep.expert_id = e.id
ORDER BY e.id;

-- name: forecast_demand
-- $1 skills. Every active project's work left in these skills, one row per (skill,
-- min_quality, project) with open (open + pending) and in-flight (claimed) slots, from the
-- maintained counts (task_counts.sql): what the experts holding the skills share their time
-- among (resolvers/forecast.py `_allocate`), whether or not the project has a deadline.
SELECT w.skill, p.min_quality, w.project_id, w.open, w.in_flight
FROM (SELECT c.project_id, c.skill,
             coalesce(sum(c.n) FILTER (WHERE c.status IN ('open', 'pending')), 0)::int AS open,
             coalesce(sum(c.n) FILTER (WHERE c.status = 'claimed'), 0)::int AS in_flight
      FROM ({{ task_counts_all }}) c
      WHERE c.status IN ('open', 'pending', 'claimed') AND c.skill = ANY ($1::text[])
      GROUP BY c.project_id, c.skill
      HAVING sum(c.n) > 0) w
JOIN projects p ON p.id = w.project_id AND p.status = 'active'
ORDER BY w.skill, p.min_quality, w.project_id;

-- name: forecast_skill_history
-- $1 skills, $2 history window seconds, $3 clock (NULL: taskroute_now()).
-- Experts, present or not, who submitted within the window and whose kept submissions include
-- one of the skills: the measured pace of a skill nobody present has worked in yet (its prior,
-- and how many experts a deadline needs). Only asked for such skills; expert_pace has one row
-- per expert. Their kept submissions as forecast_experts ships them.
WITH clock AS (SELECT coalesce($3::timestamptz, taskroute_now()) AS now_)
SELECT ep.expert_id, ep.skills AS p_skills, ep.claim_us AS p_claim_us,
       ep.submitted_us AS p_submitted_us, clock.now_ AS clock
FROM clock, expert_pace ep
WHERE ep.skills && $1::text[]
  AND ep.submitted_us[1]
      > (extract(epoch FROM clock.now_ - make_interval(secs => $2)) * 1000000)::bigint
ORDER BY ep.expert_id;

-- name: forecast_in_flight
-- $1 project ids, $2 skills (parallel arrays: the (project, skill) pairs whose tasks are all
-- claimed), $3 clock (NULL: taskroute_now()). Each claimed task of those pairs: who holds it,
-- for how many seconds they have (`age`), and whether the lease is live (an expired one is
-- the claim's to retake, and so is one whose holder's heartbeats stopped: presence_overdue).
-- Once nothing is left to claim the work ends with these tasks, so
-- resolvers/forecast.py takes each holder's own pace and conditions on the age; one index
-- probe per pair (tasks_project_skill_live), then the assignment by its key.
WITH clock AS (SELECT coalesce($3::timestamptz, taskroute_now()) AS now_)
SELECT t.project_id, t.skill, a.expert_id,
       greatest(extract(epoch FROM clock.now_ - a.claimed_at), 0)::float8 AS age,
       t.lease_until > clock.now_
       AND NOT presence_overdue(e.last_seen_at, a.claimed_at, p.heartbeat_timeout_seconds,
                                p.lease_seconds, clock.now_) AS live
FROM clock
CROSS JOIN unnest($1::uuid[], $2::text[]) AS want(project_id, skill)
JOIN tasks t ON t.project_id = want.project_id AND t.skill = want.skill
            AND t.status = 'claimed'
JOIN assignments a ON a.id = t.assignment_id
JOIN experts e ON e.id = a.expert_id
JOIN projects p ON p.id = t.project_id
ORDER BY t.project_id, t.skill, a.expert_id;

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

-- name: alerts_page
-- $1 project_id, $2 the seq a page continues below (NULL: from the newest), $3 max rows.
-- Newest first.
SELECT * FROM project_alerts
WHERE project_id = $1 AND ($2::bigint IS NULL OR seq < $2)
ORDER BY seq DESC LIMIT $3;

-- name: alert_latest_seq
-- $1 project_id. 0 when the project has no alert.
SELECT coalesce(max(seq), 0) FROM project_alerts WHERE project_id = $1;

-- name: db_now
-- The database's clock, which every forecast uses.
SELECT taskroute_now();

-- name: quality_policy_defaults
-- No parameters. The quality policy a new project starts with (the column defaults of
-- project_quality), as text: a quote's gold and adjudication overhead.
SELECT c.column_name, pg_get_expr(d.adbin, d.adrelid) AS value
FROM information_schema.columns c
JOIN pg_attribute a ON a.attrelid = 'project_quality'::regclass AND a.attname = c.column_name
JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.table_schema = current_schema() AND c.table_name = 'project_quality'
  AND c.column_name IN ('gold_ratio', 'adjudicate');

-- name: quote_adjudication_rate
-- $1 customer_id. The share of this customer's resolved items that needed an adjudicator
-- (NULL: none resolved yet): a quote's expected adjudications per item. A bounded sample
-- (any 10000 resolved items): a request never reads the whole history.
SELECT (count(*) FILTER (WHERE s.method = 'adjudicated'))::float8 / nullif(count(*), 0)
FROM (SELECT r.method
      FROM projects p JOIN item_results r ON r.project_id = p.id AND r.status = 'resolved'
      WHERE p.customer_id = $1
      LIMIT 10000) s;
