-- Routing: the periodic job that keeps what the claim orders by up to date
-- (deadline bumps, fairness boosts, skill scarcity), presence, and their read side.
-- Every job query takes the clock as $1 (NULL: taskroute_now()) so the routing simulator in
-- bench/routing.py can drive the same SQL on simulated time.

-- name: routing_deadline_bump
-- $1 clock (NULL: taskroute_now()), $2 window in seconds, $3 unbump slack in (0, 1], and the
-- forecast (taskroute/resolvers/forecast.py) of every active project with a deadline: $4 ids,
-- $5 their ETAs (NULL: unknown), $6 whether the forecast stands on evidence (parallel arrays).
-- Two views of each project that exists (created by the clock):
-- - the forecast: the project's remaining work at the measured pace of the experts present,
--   each sharing their time among the work they qualify for: late = the capacity is short;
-- - its realised rate: its own tasks done over the window (only once it is a window old):
--   late = it does not get the share the forecast assumed (priority serves others first).
-- Bump when either is late (an unknown ETA with evidence: nobody present holds a skill it
-- needs), the deadline is still ahead, and the queue says a lift is needed and can help
-- (`lift`); unbump when remaining work is gone, the deadline has passed, or both views
-- finish within `slack` of the time left (hysteresis, so a project on the edge does not
-- flap). Each change is recorded in
-- project_priority_events (rate and forecast_finish: the realised view, else the forecast)
-- and rewrites eff_priority of the project's unfinished tasks, keeping fairness boosts. Lock
-- order: project rows, then their tasks (as project_cancel).
WITH clock AS (SELECT coalesce($1::timestamptz, taskroute_now()) AS now_),
forecast AS (
    SELECT * FROM unnest($4::uuid[], $5::timestamptz[], $6::boolean[]) AS u(id, eta, evidence)
),
state AS (
    SELECT p.id, p.deadline, p.deadline_bumped, clock.now_, f.eta,
           coalesce(f.evidence, false) AS evidence,
           p.created_at <= clock.now_ - make_interval(secs => $2) AS seasoned,
           -- from the maintained counts (task_counts.sql): a count of the backlog read half the
           -- table when a project's backlog was that large a share (test_capacity_explain)
           (SELECT coalesce(sum(c.n), 0) FROM ({{ task_counts_of(p.id) }}) c
            WHERE c.status IN ('open', 'claimed', 'pending'))::int AS remaining,
           (SELECT count(*) FROM assignments a
            WHERE a.project_id = p.id AND a.submitted_at > clock.now_ - make_interval(secs => $2)
              AND a.submitted_at <= clock.now_)::float8 / $2::float8 AS rate
    FROM clock, projects p
    LEFT JOIN forecast f ON f.id = p.id
    -- a bumped project that completed (or was canceled) is still unbumped
    WHERE (p.status = 'active' OR p.deadline_bumped)
      AND p.deadline IS NOT NULL AND p.created_at <= clock.now_
),
views AS (
    SELECT s.*,
           CASE WHEN s.rate > 0
                THEN s.now_ + make_interval(secs => s.remaining / s.rate) END AS realised,
           s.now_ + (s.deadline - s.now_) * $3::float8 AS comfortable
    FROM state s
),
skill_rate AS (
    -- Each skill's realised rate: its tasks submitted over the window, per second of the
    -- window (or of the time since the first of them was claimed, when that is shorter).
    SELECT t.skill,
           count(*)::float8
           / greatest(least($2::float8, extract(epoch FROM c.now_ - min(a.claimed_at))), 1.0)
               AS per_second
    FROM clock c, assignments a JOIN tasks t ON t.id = a.task_id
    -- status: the partial index of submitted work (assignments_submitted_recent)
    WHERE a.status = 'submitted'
      AND a.submitted_at > c.now_ - make_interval(secs => $2) AND a.submitted_at <= c.now_
    GROUP BY t.skill, c.now_
),
lift AS (
    -- Whether a bump is needed and whether it can help, per skill of the project's open
    -- tasks: its own open tasks and the others' queued ahead of them, against what the skill
    -- does (its realised rate) before the deadline. Needed: in some skill, at its own level
    -- the queue is longer than that (or the skill has no rate yet). Futile: in some skill even
    -- lifted (one class level; a HIGH project in a scarce skill ahead of every unbumped row:
    -- routing_scarce_lift) it is: the lift would then only delay the others' work (a LOW
    -- project lifted in a scarce skill and still late behind the NORMAL backlog of a common
    -- one: `tight-low`, bench/RESULTS.md). At the lifted level only the rows older than the
    -- project's last open task count: the newer ones would queue behind it (claim order is
    -- level, then age), so counting them refused bumps that would have saved the deadline.
    -- Counts are bounded by what the rate can do before the deadline (LIMIT). Projects that
    -- could be bumped only.
    SELECT v.id,
           bool_or(r.per_second IS NULL OR o.own + ahead.base > r.per_second * o.left_)
               AS needed,
           bool_or(r.per_second IS NOT NULL AND o.own + ahead.lifted > r.per_second * o.left_)
               AS futile
    FROM views v
    JOIN projects p ON p.id = v.id
    CROSS JOIN LATERAL (
        SELECT c.skill, sum(c.n)::int AS own,
               extract(epoch FROM v.deadline - v.now_)::float8 AS left_
        FROM ({{ task_counts_of(v.id) }}) c
        WHERE c.status = 'open' GROUP BY c.skill HAVING sum(c.n) > 0
    ) o
    LEFT JOIN skill_scarcity sc ON sc.skill = o.skill
    LEFT JOIN skill_rate r ON r.skill = o.skill
    CROSS JOIN LATERAL (
        SELECT routing_eff_priority(p.priority, false, 0) AS base,
               CASE WHEN coalesce(sc.scarce, false) THEN routing_scarce_lift(p.priority, 0)
                    ELSE routing_eff_priority(p.priority, true, 0) END AS lifted,
               greatest(ceil(coalesce(r.per_second, 0) * o.left_)::int - o.own, 0) + 1 AS cap
    ) lv
    CROSS JOIN LATERAL (
        -- The others' queued ahead, at most `cap` (more makes no difference): every open task
        -- of the skill at or above the base level, less the project's own there; lifted, every
        -- one above the level plus the others' at it that are older than the project's last
        -- open task. Each counted in an index of open tasks alone (the claim's, and the
        -- project's), never the table.
        SELECT
            (SELECT count(*)::int FROM (
                SELECT 1 FROM tasks t
                WHERE t.skill = o.skill AND t.status = 'open' AND t.eff_priority >= lv.base
                LIMIT lv.cap + mine.base
            ) w) - mine.base AS base,
            (SELECT count(*)::int FROM (
                SELECT 1 FROM tasks t
                WHERE t.skill = o.skill AND t.status = 'open' AND t.eff_priority > lv.lifted
                LIMIT lv.cap + mine.above
            ) w) - mine.above
            + (SELECT count(*)::int FROM (
                SELECT 1 FROM tasks t
                WHERE t.skill = o.skill AND t.status = 'open' AND t.eff_priority = lv.lifted
                  AND t.seq < mine.last_seq AND t.project_id <> v.id
                LIMIT lv.cap
            ) w) AS lifted
        FROM (
            SELECT count(*) FILTER (WHERE t.eff_priority >= lv.base)::int AS base,
                   count(*) FILTER (WHERE t.eff_priority > lv.lifted)::int AS above,
                   max(t.seq) AS last_seq
            FROM tasks t
            WHERE t.project_id = v.id AND t.skill = o.skill AND t.status = 'open'
        ) mine
    ) ahead
    WHERE NOT v.deadline_bumped AND v.remaining > 0 AND v.deadline > v.now_
    GROUP BY v.id
),
decided AS (
    SELECT v.*,
           CASE WHEN NOT v.deadline_bumped AND v.remaining > 0
                     AND v.deadline > v.now_
                     -- no `lift` row: no open task, nothing a bump could lift (all claimed,
                     -- or pending); such bumps flapped at 1-2 tasks left (bench/RESULTS.md)
                     AND coalesce(l.needed, false) AND NOT coalesce(l.futile, false)
                     AND ((v.evidence AND (v.eta IS NULL OR v.eta > v.deadline))
                          OR (v.seasoned AND (v.realised IS NULL OR v.realised > v.deadline)))
                THEN 'bump'
                -- once the deadline has passed, a lift can no longer make it
                WHEN v.deadline_bumped
                     AND (v.remaining = 0 OR v.deadline <= v.now_
                          OR (v.eta <= v.comfortable
                              AND (NOT v.seasoned OR v.realised <= v.comfortable)))
                THEN 'unbump' END AS kind
    FROM views v
    LEFT JOIN lift l ON l.id = v.id
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
    SELECT d.id, d.kind, d.remaining, d.rate,
           CASE WHEN d.seasoned THEN d.realised ELSE d.eta END, d.deadline, d.now_
    FROM decided d WHERE d.kind IS NOT NULL
),
retasked AS (
    UPDATE tasks t
    SET eff_priority =
        -- One class level; in a scarce skill (as the previous run measured it) a bumped HIGH
        -- project goes ahead of every unbumped row, the customers' integer priorities
        -- included (routing_scarce_lift: below HIGH a higher lift there would pass the classes
        -- above). Set at the bump, and by
        -- `relifted` for a skill measured scarce only after the bump.
        CASE WHEN c.deadline_bumped
                  AND coalesce((SELECT sc.scarce FROM skill_scarcity sc
                                WHERE sc.skill = t.skill), false)
             THEN routing_scarce_lift(c.priority, t.priority)
             ELSE routing_eff_priority(c.priority, c.deadline_bumped, t.priority) END
        + CASE WHEN t.eff_priority >= routing_fair_threshold() THEN routing_fair_boost()
               ELSE 0 END
    FROM changed c
    WHERE t.project_id = c.id AND t.status IN ('open', 'claimed', 'pending')
),
relifted AS (
    -- A project bumped before one of its skills was measured scarce gets the lift there now:
    -- set at the bump only, it was lost when the bump came first (the forecast's bump can
    -- come in the routing run before the one that measures the skill scarce). Once: a lifted
    -- row no longer matches (nor does a project below HIGH's: its lift is its one level).
    -- Projects changing in this run are left to `retasked`.
    UPDATE tasks t
    -- (Fairness-boosted rows sit above any lift and are left as they are.)
    SET eff_priority = routing_scarce_lift(p.priority, t.priority)
    FROM projects p, skill_scarcity sc
    WHERE p.deadline_bumped AND p.status = 'active'
      AND NOT EXISTS (SELECT 1 FROM decided d WHERE d.id = p.id AND d.kind IS NOT NULL)
      AND t.project_id = p.id AND t.skill = sc.skill AND sc.scarce
      AND t.status IN ('open', 'claimed', 'pending')
      AND t.eff_priority < routing_scarce_lift(p.priority, t.priority)
)
SELECT d.id AS project_id, d.kind, d.remaining, d.rate,
       CASE WHEN d.seasoned THEN d.realised ELSE d.eta END AS finish, d.deadline
FROM decided d WHERE d.kind IS NOT NULL;

-- name: routing_fair_boost
-- $1 clock (NULL: taskroute_now()), $2 window in seconds, $3 class names, $4 their shares
-- (parallel).
-- Fairness where someone is actually starving. A skill is saturated when more of
-- its work waits open than its experts claimed in the whole window (they cannot keep up); in
-- a saturated skill, a priority class with open work there (in projects without a deadline)
-- is short when its claims in the window fell below `share` of the skill's claims (counting
-- the next one). Only short classes are owed: each of their projects without a deadline and
-- with open work in the skill is due an even split of the class's share, and a project below
-- its due gets its next best open tasks (by the usual order) boosted ahead of all unboosted
-- rows, enough to cover the shortfall plus one claim ahead; boosts not yet claimed count as
-- paid. Unsaturated skills and classes at their share get nothing, so boosts never reorder
-- work that everyone gets to anyway. Bounded writes: only owed rows change; the saturation
-- test counts at most `claims in the window` open rows.
WITH clock AS (SELECT coalesce($1::timestamptz, taskroute_now()) AS now_),
shares AS (SELECT * FROM unnest($3::text[], $4::float8[]) AS u(cls, share)),
recent AS (
    SELECT t.skill, a.project_id, count(*)::int AS n
    FROM clock, assignments a JOIN tasks t ON t.id = a.task_id
    WHERE a.claimed_at > clock.now_ - make_interval(secs => $2) AND a.claimed_at <= clock.now_
    GROUP BY t.skill, a.project_id
),
totals AS (SELECT skill, sum(n)::int AS total FROM recent GROUP BY skill),
saturated AS (
    SELECT tt.skill, tt.total FROM totals tt
    WHERE (SELECT count(*) FROM (SELECT 1 FROM tasks t
                                 WHERE t.skill = tt.skill AND t.status = 'open'
                                 LIMIT tt.total) w) >= tt.total
),
competing AS (
    -- Projects with a deadline are owed what the deadline needs, not a share: the deadline
    -- bump lifts them when the forecast (or their own pace) says they would miss it.
    SELECT sa.skill, sa.total, p.id AS project_id, routing_class(p.priority) AS cls
    FROM saturated sa CROSS JOIN projects p
    WHERE p.status = 'active' AND p.deadline IS NULL
      -- OFFSET 0: one probe of tasks_open_project per (skill, project); pulled up into a
      -- semi-join the planner hashed every open task (tests/db/test_plans_on_a_churned_table.py)
      AND EXISTS (SELECT 1 FROM tasks t
                  WHERE t.project_id = p.id AND t.skill = sa.skill AND t.status = 'open'
                  OFFSET 0)
),
class_got AS (
    SELECT r.skill, routing_class(p.priority) AS cls, sum(r.n)::int AS got
    FROM recent r JOIN projects p ON p.id = r.project_id
    GROUP BY r.skill, routing_class(p.priority)
),
short AS (
    SELECT DISTINCT c.skill, c.cls
    FROM competing c
    JOIN shares sh ON sh.cls = c.cls
    LEFT JOIN class_got g ON g.skill = c.skill AND g.cls = c.cls
    WHERE coalesce(g.got, 0) < sh.share * (c.total + 1)  -- as `owed`: one claim ahead
),
due AS (
    SELECT c.skill, c.project_id, c.total,
           sh.share / count(*) OVER (PARTITION BY c.skill, c.cls) AS floor_share,
           coalesce(r.n, 0) AS got,
           (SELECT count(*) FROM tasks t
            WHERE t.project_id = c.project_id AND t.skill = c.skill AND t.status = 'open'
              AND t.eff_priority >= routing_fair_threshold())::int AS pending_boosts
    FROM competing c
    JOIN short USING (skill, cls)
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

-- name: routing_class_lift
-- $1 clock (NULL: taskroute_now()), $2 window in seconds, $3 the projects' least share inside
-- their class.
-- Fairness inside a class, where the integer priority is otherwise a strict order: in a
-- saturated skill (as routing_fair_boost), each project without a deadline and with open work
-- there is due `$3 / n` of its class's claims in the skill over the window (counting the next
-- one), n being the class's projects competing there (two at least: alone, a project gets the
-- class's every claim), once the class got a claim there in the window. A project below its due gets just enough of its next open tasks (by
-- the usual order) lifted to the top of its class (routing_class_lift: ahead of the class's
-- other rows, behind every row of the class above), plus one ahead; lifts not yet claimed
-- count as paid. So a project that got nothing in the window is lifted by the first pass that
-- sees it, and the next expert asking in that skill takes its task unless the classes above
-- have work there. Where experts keep up nothing is lifted, and priority orders the class.
-- Run after routing_fair_boost (which it leaves alone: rows boosted across classes are above).
WITH clock AS (SELECT coalesce($1::timestamptz, taskroute_now()) AS now_),
recent AS (
    SELECT t.skill, a.project_id, count(*)::int AS n
    FROM clock, assignments a JOIN tasks t ON t.id = a.task_id
    WHERE a.claimed_at > clock.now_ - make_interval(secs => $2) AND a.claimed_at <= clock.now_
    GROUP BY t.skill, a.project_id
),
totals AS (SELECT skill, sum(n)::int AS total FROM recent GROUP BY skill),
saturated AS (
    SELECT tt.skill FROM totals tt
    WHERE (SELECT count(*) FROM (SELECT 1 FROM tasks t
                                 WHERE t.skill = tt.skill AND t.status = 'open'
                                 LIMIT tt.total) w) >= tt.total
),
competing AS (
    SELECT sa.skill, p.id AS project_id, p.priority, routing_class(p.priority) AS cls,
           count(*) OVER (PARTITION BY sa.skill, routing_class(p.priority)) AS rivals
    FROM saturated sa CROSS JOIN projects p
    WHERE p.status = 'active' AND p.deadline IS NULL
      -- OFFSET 0: one probe of tasks_open_project per (skill, project) (as routing_fair_boost)
      AND EXISTS (SELECT 1 FROM tasks t
                  WHERE t.project_id = p.id AND t.skill = sa.skill AND t.status = 'open'
                  OFFSET 0)
),
class_got AS (
    SELECT r.skill, routing_class(p.priority) AS cls, sum(r.n)::int AS got
    FROM recent r JOIN projects p ON p.id = r.project_id
    GROUP BY r.skill, routing_class(p.priority)
),
owed AS (
    SELECT c.skill, c.project_id, c.priority,
           (ceil($3::float8 / c.rivals * (coalesce(g.got, 0) + 1)) - coalesce(r.n, 0)
            - (SELECT count(*) FROM tasks t
               WHERE t.project_id = c.project_id AND t.skill = c.skill AND t.status = 'open'
                 AND t.eff_priority >= routing_class_lift(c.priority, -1000)))::int AS n
    FROM competing c
    LEFT JOIN class_got g ON g.skill = c.skill AND g.cls = c.cls
    LEFT JOIN recent r ON r.skill = c.skill AND r.project_id = c.project_id
    -- a class served nothing in the window is short as a class (routing_fair_boost's
    -- business), not unfair among its projects: lifting one of them would only pass the
    -- deadline-bumped work that took its turn
    WHERE c.rivals > 1 AND $3::float8 > 0 AND g.got > 0
      -- a deadline first: while a deadline-bumped project has open work at this class's
      -- level in the skill, nothing is lifted past it (the bump ends with its deadline)
      AND NOT EXISTS (
          SELECT 1 FROM projects b
          WHERE b.deadline_bumped AND b.status = 'active'
            AND routing_class(routing_eff_priority(b.priority, true, 0) / 10000) = c.cls
            AND EXISTS (SELECT 1 FROM tasks t
                        WHERE t.project_id = b.id AND t.skill = c.skill AND t.status = 'open'
                        OFFSET 0))
),
lifted AS (
    UPDATE tasks t SET eff_priority = routing_class_lift(o.priority, t.priority)
    FROM owed o
    CROSS JOIN LATERAL (
        SELECT t2.id FROM tasks t2
        WHERE t2.project_id = o.project_id AND t2.skill = o.skill AND t2.status = 'open'
          AND t2.eff_priority < routing_class_lift(o.priority, -1000)
        ORDER BY t2.eff_priority DESC, t2.seq
        LIMIT o.n
        FOR UPDATE SKIP LOCKED
    ) pick
    WHERE o.n > 0 AND t.id = pick.id
    RETURNING t.skill, t.project_id
)
SELECT skill, project_id, count(*)::int AS lifted FROM lifted GROUP BY skill, project_id;

-- name: routing_scarcity_refresh
-- $1 clock (NULL: taskroute_now()), $2 active window in seconds: experts seen (or created)
-- within it count as active (not a holder whose heartbeats stopped: presence_overdue). $3
-- skills and $4 their typical seconds per task (parallel; from the forecasts' measured pace; a skill missing gets the median of those given, or 1: counting
-- tasks), $5 scarcity ratio. Rewrites skill_scarcity: per skill, active qualified experts,
-- open backlog in tasks and in seconds of work, and whether the skill is scarce: its other
-- active holders (an expert deciding asks who else could do the work) per second of backlog
-- are below $5 x the same figure over all skills with backlog. Skills with neither experts
-- nor backlog disappear.
WITH clock AS (SELECT coalesce($1::timestamptz, taskroute_now()) AS now_),
typical AS (SELECT * FROM unnest($3::text[], $4::float8[]) AS u(skill, seconds)),
fallback AS (
    SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds), 1.0) AS seconds
    FROM typical
),
backlog AS (
    SELECT skill, count(*)::int AS n FROM tasks WHERE status = 'open' GROUP BY skill
),
helpers AS (
    SELECT es.skill, count(*)::int AS n
    FROM clock, expert_skills es JOIN experts e ON e.id = es.expert_id
    WHERE es.status = 'active' AND e.status = 'active'
      AND coalesce(e.last_seen_at, e.created_at) > clock.now_ - make_interval(secs => $2)
      -- a holder whose heartbeats stopped (presence_overdue) is gone, though its lease runs;
      -- one probe of its live claim (assignments_one_active)
      AND NOT EXISTS (SELECT 1 FROM assignments a JOIN projects p ON p.id = a.project_id
                      WHERE a.expert_id = e.id AND a.status = 'active'
                        AND a.lease_until > clock.now_
                        AND presence_overdue(e.last_seen_at, a.claimed_at,
                                             p.heartbeat_timeout_seconds, p.lease_seconds,
                                             clock.now_))
    GROUP BY es.skill
),
measured AS (
    SELECT coalesce(b.skill, h.skill) AS skill, coalesce(h.n, 0) AS active_experts,
           coalesce(b.n, 0) AS open_backlog, ty.seconds AS typical_seconds,
           coalesce(b.n, 0) * coalesce(ty.seconds, fb.seconds) AS backlog_seconds
    FROM fallback fb, backlog b
    FULL JOIN helpers h ON h.skill = b.skill
    LEFT JOIN typical ty ON ty.skill = coalesce(b.skill, h.skill)
),
overall AS (
    -- other holders per second of backlog over every skill with backlog
    SELECT sum(greatest(active_experts - 1, 0))::float8 / nullif(sum(backlog_seconds), 0)
               AS helpers_per_second
    FROM measured WHERE backlog_seconds > 0
),
upserted AS (
    INSERT INTO skill_scarcity
        (skill, active_experts, open_backlog, typical_seconds, backlog_seconds, scarce,
         updated_at)
    SELECT m.skill, m.active_experts, m.open_backlog, m.typical_seconds, m.backlog_seconds,
           coalesce(m.backlog_seconds > 0
                    AND greatest(m.active_experts - 1, 0) / m.backlog_seconds
                        < $5::float8 * o.helpers_per_second, false),
           clock.now_
    FROM measured m, overall o, clock
    ON CONFLICT (skill) DO UPDATE
    SET active_experts = EXCLUDED.active_experts, open_backlog = EXCLUDED.open_backlog,
        typical_seconds = EXCLUDED.typical_seconds, backlog_seconds = EXCLUDED.backlog_seconds,
        scarce = EXCLUDED.scarce, updated_at = EXCLUDED.updated_at
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
-- Every claim, read once from a claimed index (as many rows as live claims and leases not
-- swept yet, whatever the history), then the silent ones among them whose lease (the
-- assignment's: the task row's is a lower bound, queries/claims.sql) still runs; their task
-- and assignment rows are locked by primary key. Written in one join, a planner that took the live claims for a handful
-- (stale statistics) walked the project's whole status index once per claim (643,204 rows
-- for 802 claims).
live AS MATERIALIZED (
    SELECT t.id, t.assignment_id, t.project_id
    FROM tasks t
    WHERE t.status = 'claimed'
),
silent AS (
    SELECT l.id, l.assignment_id
    FROM live l
    CROSS JOIN clock
    JOIN assignments a ON a.id = l.assignment_id
    JOIN experts e ON e.id = a.expert_id
    JOIN projects p ON p.id = l.project_id
    -- (a live claim's assignment is active: no status literal, or the planner may rescan
    -- assignments_one_active for each claim)
    WHERE a.lease_until >= clock.now_
      AND greatest(e.last_seen_at, a.claimed_at) < clock.now_
          - make_interval(secs => least(p.heartbeat_timeout_seconds, p.lease_seconds))
),
gone AS (
    -- still held by the same claim, its lease still running, rechecked on the locked rows (no
    -- status literal: the primary keys, not a claimed index)
    SELECT t.id, t.assignment_id
    FROM silent s
    JOIN tasks t ON t.id = s.id AND t.assignment_id = s.assignment_id
    JOIN assignments a ON a.id = t.assignment_id
    CROSS JOIN clock
    WHERE t.lease_until IS NOT NULL AND a.lease_until >= clock.now_
    FOR UPDATE OF t, a SKIP LOCKED
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
-- No parameters. Scarce skills first, then fewest other active experts per second of backlog.
SELECT skill, active_experts, open_backlog, backlog_seconds, typical_seconds, scarce, updated_at
FROM skill_scarcity
ORDER BY scarce DESC,
         greatest(active_experts - 1, 0)::real / greatest(backlog_seconds, 1), skill;

-- name: routing_expert_presence
-- $1 expert_id.
SELECT id, status, last_seen_at FROM experts WHERE id = $1;

-- name: routing_bump_planning
-- No parameters; inside the routing job's transaction, around routing_deadline_bump only. The
-- bump rewrites a bumped project's backlog; when that backlog is a large share of `tasks`
-- the planner prefers a Seq Scan (or a bitmap over every page) that reads the done rows too,
-- so a job whose cost must not grow with history would grow with it
-- (test_capacity_explain, test_capacity_plans: one project, 100k open and 100k done tasks).
-- set_config(..., true) is SET LOCAL, as one statement (every named query prepares).
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true);

-- name: routing_bump_planning_done
-- No parameters; after routing_deadline_bump: the planner's defaults again for the rest of
-- the job's transaction.
SELECT set_config(name, reset_val, true) FROM pg_settings
WHERE name IN ('enable_seqscan', 'enable_bitmapscan');
