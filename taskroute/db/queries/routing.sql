-- Routing (issue 6): the periodic job that keeps what the claim orders by up to date
-- (deadline bumps, fairness boosts, skill scarcity), presence, and their read side.
-- Every job query takes the clock as $1 (NULL: taskroute_now()) so the routing simulator in
-- bench/routing.py can drive the same SQL on simulated time.

-- name: routing_deadline_bump
-- $1 clock (NULL: taskroute_now()), $2 forecast window in seconds, $3 unbump slack in (0, 1].
-- Forecast per active project with a deadline: remaining tasks / tasks done per second over
-- the window. Bump when the forecast misses the deadline (or nothing progressed in a whole
-- window); unbump when remaining work is gone or the forecast finishes within `slack` of the
-- time left (hysteresis, so a project on the edge does not flap). Each change is recorded in
-- project_priority_events and rewrites eff_priority of the project's unfinished tasks,
-- keeping fairness boosts. Lock order: project rows, then their tasks (as project_cancel).
WITH clock AS (SELECT coalesce($1::timestamptz, taskroute_now()) AS now_),
state AS (
    SELECT p.id, p.deadline, p.deadline_bumped, clock.now_,
           (SELECT count(*) FROM tasks t
            WHERE t.project_id = p.id AND t.status IN ('open', 'claimed', 'pending'))::int
               AS remaining,
           (SELECT count(*) FROM assignments a
            WHERE a.project_id = p.id AND a.submitted_at > clock.now_ - make_interval(secs => $2)
              AND a.submitted_at <= clock.now_)::float8 / $2::float8 AS rate
    FROM projects p, clock
    WHERE p.deadline IS NOT NULL
      -- a bumped project that completed still gets its unbump (remaining = 0)
      AND (p.status = 'active' OR (p.status = 'completed' AND p.deadline_bumped))
      -- a forecast needs a whole window of history
      AND (p.deadline_bumped OR p.created_at <= clock.now_ - make_interval(secs => $2))
),
forecast AS (
    SELECT s.*,
           CASE WHEN s.rate > 0
                THEN s.now_ + make_interval(secs => s.remaining / s.rate) END AS finish
    FROM state s
),
decided AS (
    SELECT f.*,
           CASE WHEN NOT f.deadline_bumped AND f.remaining > 0
                     AND (f.finish IS NULL OR f.finish > f.deadline) THEN 'bump'
                WHEN f.deadline_bumped
                     AND (f.remaining = 0
                          OR f.finish <= f.now_ + (f.deadline - f.now_) * $3::float8)
                THEN 'unbump' END AS kind
    FROM forecast f
),
changed AS (
    UPDATE projects p SET deadline_bumped = (d.kind = 'bump')
    FROM decided d
    WHERE p.id = d.id AND d.kind IS NOT NULL
    RETURNING p.id, p.priority, p.deadline_bumped
),
logged AS (
    INSERT INTO project_priority_events
        (project_id, kind, remaining, rate_per_second, forecast_finish, deadline, at)
    SELECT d.id, d.kind, d.remaining, d.rate, d.finish, d.deadline, d.now_
    FROM decided d WHERE d.kind IS NOT NULL
),
retasked AS (
    UPDATE tasks t
    SET eff_priority = routing_eff_priority(c.priority, c.deadline_bumped, t.priority)
        + CASE WHEN t.eff_priority >= routing_fair_threshold() THEN routing_fair_boost()
               ELSE 0 END
    FROM changed c
    WHERE t.project_id = c.id AND t.status IN ('open', 'claimed', 'pending')
)
SELECT d.id AS project_id, d.kind, d.remaining, d.rate, d.finish, d.deadline
FROM decided d WHERE d.kind IS NOT NULL;

-- name: routing_fair_boost
-- $1 clock (NULL: taskroute_now()), $2 window in seconds, $3 class names, $4 their shares (parallel).
-- Fairness under saturation: in each skill that saw claims in the window, every priority
-- class with open work is owed `share` of the skill's claims, split evenly among that
-- class's projects there. A project below its due gets its next best open tasks (by the
-- usual order) boosted ahead of all unboosted rows, enough to cover the shortfall plus one
-- claim ahead; boosts not yet claimed count as paid. Bounded writes: only owed rows change.
WITH clock AS (SELECT coalesce($1::timestamptz, taskroute_now()) AS now_),
shares AS (SELECT * FROM unnest($3::text[], $4::float8[]) AS u(cls, share)),
recent AS (
    SELECT t.skill, a.project_id, count(*)::int AS n
    FROM clock, assignments a JOIN tasks t ON t.id = a.task_id
    WHERE a.claimed_at > clock.now_ - make_interval(secs => $2) AND a.claimed_at <= clock.now_
    GROUP BY t.skill, a.project_id
),
totals AS (SELECT skill, sum(n)::int AS total FROM recent GROUP BY skill),
competing AS (
    SELECT tt.skill, tt.total, p.id AS project_id, routing_class(p.priority) AS cls
    FROM totals tt CROSS JOIN projects p
    WHERE p.status = 'active'
      AND EXISTS (SELECT 1 FROM tasks t
                  WHERE t.project_id = p.id AND t.skill = tt.skill AND t.status = 'open')
),
due AS (
    SELECT c.skill, c.project_id, c.total,
           sh.share / count(*) OVER (PARTITION BY c.skill, c.cls) AS floor_share,
           coalesce(r.n, 0) AS got,
           (SELECT count(*) FROM tasks t
            WHERE t.project_id = c.project_id AND t.skill = c.skill AND t.status = 'open'
              AND t.eff_priority >= routing_fair_threshold())::int AS pending_boosts
    FROM competing c
    JOIN shares sh ON sh.cls = c.cls
    LEFT JOIN recent r ON r.skill = c.skill AND r.project_id = c.project_id
),
owed AS (
    SELECT skill, project_id,
           (ceil(floor_share * (total + 1)) - got - pending_boosts)::int AS n
    FROM due
    WHERE floor_share > 0
),
boosted AS (
    UPDATE tasks t SET eff_priority = t.eff_priority + routing_fair_boost()
    FROM owed o
    CROSS JOIN LATERAL (
        SELECT t2.id FROM tasks t2
        WHERE t2.project_id = o.project_id AND t2.skill = o.skill AND t2.status = 'open'
          AND t2.eff_priority < routing_fair_threshold()
        ORDER BY t2.eff_priority DESC, t2.seq
        LIMIT o.n
        FOR UPDATE SKIP LOCKED
    ) pick
    WHERE o.n > 0 AND t.id = pick.id
    RETURNING t.skill, t.project_id
)
SELECT skill, project_id, count(*)::int AS boosted FROM boosted GROUP BY skill, project_id;

-- name: routing_scarcity_refresh
-- $1 clock (NULL: taskroute_now()), $2 active window in seconds: experts seen (or created) within it
-- count as active. Rewrites skill_scarcity: per skill, active qualified experts and open
-- backlog (one pass over the open-task index); skills with neither disappear.
WITH clock AS (SELECT coalesce($1::timestamptz, taskroute_now()) AS now_),
backlog AS (
    SELECT skill, count(*)::int AS n FROM tasks WHERE status = 'open' GROUP BY skill
),
helpers AS (
    SELECT es.skill, count(*)::int AS n
    FROM clock, expert_skills es JOIN experts e ON e.id = es.expert_id
    WHERE es.status = 'active' AND e.status = 'active'
      AND coalesce(e.last_seen_at, e.created_at) > clock.now_ - make_interval(secs => $2)
    GROUP BY es.skill
),
measured AS (
    SELECT coalesce(b.skill, h.skill) AS skill, coalesce(h.n, 0) AS active_experts,
           coalesce(b.n, 0) AS open_backlog
    FROM backlog b FULL JOIN helpers h ON h.skill = b.skill
),
upserted AS (
    INSERT INTO skill_scarcity (skill, active_experts, open_backlog, updated_at)
    SELECT m.skill, m.active_experts, m.open_backlog, clock.now_ FROM measured m, clock
    ON CONFLICT (skill) DO UPDATE
    SET active_experts = EXCLUDED.active_experts, open_backlog = EXCLUDED.open_backlog,
        updated_at = EXCLUDED.updated_at
)
DELETE FROM skill_scarcity s WHERE NOT EXISTS (SELECT 1 FROM measured m WHERE m.skill = s.skill);

-- name: leases_expire_absent
-- $1 clock (NULL: taskroute_now()). Experts silent (no claim, no heartbeat: last_seen_at) for longer than
-- the project's heartbeat timeout lose their live lease now, however long the lease still
-- runs: both rows get lease_until in the past, so the leases_release_expired that follows in
-- the same transaction returns the task to the pool (an attempt, and a wake-up). The timeout
-- is capped by the lease length: the lease stays the upper bound on one task. The cut is at
-- the earlier of the clock and taskroute_now(), so the real-time release below sees it expired.
-- Task rows first, then assignments (the lock order).
WITH clock AS (SELECT coalesce($1::timestamptz, taskroute_now()) AS now_),
gone AS (
    SELECT t.id, t.assignment_id
    FROM clock, tasks t
    JOIN assignments a ON a.id = t.assignment_id
    JOIN experts e ON e.id = a.expert_id
    JOIN projects p ON p.id = t.project_id
    WHERE t.status = 'claimed' AND t.lease_until >= clock.now_ AND a.status = 'active'
      AND greatest(e.last_seen_at, a.claimed_at) < clock.now_
          - make_interval(secs => least(p.heartbeat_timeout_seconds, p.lease_seconds))
    FOR UPDATE OF t SKIP LOCKED
),
cut AS (
    UPDATE tasks t SET lease_until = least(clock.now_, taskroute_now()) - interval '1 microsecond'
    FROM gone g, clock WHERE t.id = g.id
    RETURNING t.assignment_id, t.lease_until
)
UPDATE assignments a SET lease_until = c.lease_until
FROM cut c WHERE a.id = c.assignment_id
RETURNING a.id;

-- name: expert_seen
-- $1 expert_id. Presence from heartbeats (claims record it in expert_touch).
UPDATE experts SET last_seen_at = taskroute_now() WHERE id = $1;

-- name: routing_project_state
-- $1 project_id. Routing facts shown on a project.
SELECT p.deadline_bumped, routing_class(p.priority) AS priority_class
FROM projects p WHERE p.id = $1;

-- name: routing_project_events
-- $1 project_id. The project's recorded bumps and unbumps, oldest first.
SELECT kind, remaining, rate_per_second, forecast_finish, deadline, at
FROM project_priority_events WHERE project_id = $1 ORDER BY seq;

-- name: routing_project_scope
-- $1 project_id. Whether a project exists (claims may be scoped to it).
SELECT status FROM projects WHERE id = $1;

-- name: tasks_set_required_caps
-- $1 item ids, $2 required capability tags per item, comma-joined ('' for none).
-- Run right after tasks_insert for the items that require tags (all slots of the item).
UPDATE tasks t SET required_caps = string_to_array(u.caps, ',')
FROM unnest($1::uuid[], $2::text[]) AS u(item_id, caps)
WHERE t.item_id = u.item_id AND u.caps <> '';

-- name: routing_scarcity_list
-- No parameters. Scarcest first: fewest active experts per open task.
SELECT skill, active_experts, open_backlog, updated_at
FROM skill_scarcity
ORDER BY active_experts::real / greatest(open_backlog, 1), skill;

-- name: routing_expert_presence
-- $1 expert_id.
SELECT id, status, last_seen_at FROM experts WHERE id = $1;
