-- The claim loop: claim, heartbeat, submit, and returning expired leases to the pool.
-- Lock order everywhere: the task row first, then its assignment (no deadlocks).
--
-- The lease: a live claim's lease ends at its assignment's lease_until. The task
-- row's lease_until is a lower bound of it: a claim writes both, a heartbeat moves only the
-- assignment's (a HOT update: no index entry, no task-count trigger) until the task's is
-- within half a lease of passing, then both (assignment_heartbeat_both). So "the task's
-- lease passed" (the claimed-lease indexes) finds every expired claim and possibly some
-- live ones: whatever ends a lease as expired locks the task and the assignment and checks
-- the assignment's lease_until (FOR UPDATE rechecks it on the newest row), and a heartbeat
-- updates the assignment under its row lock, so the two never both win.

-- name: expert_touch
-- $1 expert_id. Locks the expert row for the rest of the claim transaction, so two racing
-- claims of one expert run one after the other, and records presence.
UPDATE experts SET last_seen_at = taskroute_now() WHERE id = $1 RETURNING status;

-- name: assignment_active_for_expert
-- $1 expert_id. The expert's active claim, if any (a page refresh gets the same one back
-- while lease_live; an expired one is what lease_release_own returns to the pool, so a claim
-- finding none skips that statement). The task by primary key: an active assignment's task
-- is claimed, and no status literal lets a claimed index that stale statistics think empty
-- be scanned instead (assignment_heartbeat). candidates_swapped and instructions_version as
-- claim_take returns them.
SELECT a.id AS assignment_id, a.lease_until, t.id AS task_id, t.project_id, t.skill,
       t.priority, t.item_id, i.payload, i.payload_key, i.payload_bytes, p.customer_id,
       a.lease_until > taskroute_now() AS lease_live, a.candidates_swapped,
       a.instructions_version
FROM assignments a
JOIN tasks t ON t.id = a.task_id AND t.assignment_id = a.id
JOIN items i ON i.id = a.item_id
JOIN projects p ON p.id = a.project_id
WHERE a.expert_id = $1 AND a.status = 'active';

-- fragment: claim_skills
-- $1 expert_id, $2 skills to restrict to (NULL: every skill the expert holds). The `my_skills`
-- rows of task_claim and task_claim_open: eligible_skills with what orders them (below).
SELECT s.*, coalesce(sc.scarce, false) AS scarce,
       sc.backlog_seconds / greatest(sc.active_experts, 1) AS drain_seconds
FROM ({{ eligible_skills($1, $2) }}) s
LEFT JOIN skill_scarcity sc ON sc.skill = s.skill

-- fragment: claim_open_any
-- $1 expert_id, $2 project scope or NULL (a guard: this branch probes only unscoped claims).
-- Per skill of my_skills, the best open task of the skill index the expert may take.
SELECT s.scarce, s.drain_seconds, c.*
FROM my_skills s
CROSS JOIN LATERAL (
    SELECT t.id, t.eff_priority, t.seq, t.assignment_id AS prev_assignment
    FROM tasks t
    WHERE $2::uuid IS NULL AND t.status = 'open' AND t.skill = s.skill
      AND {{ task_eligible(t, s, $1) }}
    ORDER BY t.eff_priority DESC, t.seq
    LIMIT 1
    FOR UPDATE SKIP LOCKED
) c

-- fragment: claim_take
-- $1 expert_id, $2 skills (NULL: every skill the expert holds). The CTEs after `candidate`:
-- the best candidate across skills is claimed (a fresh assignment id and lease) and the
-- assignment inserted; `prev_assignment` names the expired lease it took over, if any, which
-- the caller marks expired (assignment_expire: only a takeover runs it). Without named skills a
-- scarce skill comes first (skill_scarcity.scarce, kept by the routing job: few other active
-- holders per second of its backlog), so experts holding a rare skill with backlog take it
-- before common work others can do; between two scarce skills, the one whose backlog takes its
-- holders longest (seconds of backlog per active holder: the skill that would drain last);
-- then eff_priority, then FIFO. Unmeasured skills are not scarce.
-- The assignment records the project's instructions version current at the claim, and
-- returns it with `candidates_swapped` (the pairwise layout's order, drawn by its default).
best AS (
    SELECT * FROM candidate
    -- An expert holding two scarce skills serves the one that would drain last: priority
    -- across them let a bumped project's task in one bottleneck (lifted ahead of every
    -- unbumped row there) keep its shared holder from a rarer skill's whole backlog
    -- (bench/RESULTS.md, `specialists`). Within a skill, priority still decides.
    ORDER BY ($2::text[] IS NULL AND scarce) DESC,
             CASE WHEN $2::text[] IS NULL AND scarce THEN drain_seconds END DESC NULLS LAST,
             eff_priority DESC, seq
    LIMIT 1
),
claimed AS (
    UPDATE tasks t
    SET status = 'claimed',
        assignment_id = gen_random_uuid(),
        lease_until = taskroute_now() + make_interval(secs => p.lease_seconds),
        -- taking over an expired lease counts that lease as a failed attempt
        attempts = t.attempts + (t.status = 'claimed')::int
    FROM best c, projects p
    WHERE t.id = c.id AND p.id = t.project_id
    RETURNING t.id AS task_id, t.item_id, t.project_id, t.skill, t.priority,
              t.assignment_id, t.lease_until, c.prev_assignment, p.customer_id,
              p.instructions_version
),
inserted AS (
    INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, lease_until,
                             instructions_version)
    SELECT assignment_id, task_id, item_id, project_id, $1, lease_until, instructions_version
    FROM claimed
    RETURNING id, candidates_swapped, instructions_version
)
SELECT c.assignment_id, c.lease_until, c.task_id, c.project_id, c.skill, c.priority,
       c.item_id, c.customer_id, i.payload, i.payload_key, i.payload_bytes,
       n.candidates_swapped, n.instructions_version, c.prev_assignment
FROM claimed c JOIN inserted n ON n.id = c.assignment_id JOIN items i ON i.id = c.item_id

-- name: task_claim
-- $1 expert_id, $2 skills to restrict to (NULL: every skill the expert holds),
-- $3 project_id to restrict to (NULL: any project).
-- For each skill the expert may claim in (eligible_skills), probe the partial indexes (open
-- tasks; claimed tasks whose lease expired and may be retried) for the best row the expert
-- may take (task_eligible), skipping rows other claims hold (SKIP LOCKED), then take the
-- best across skills (claim_take).
-- The open-task probe has two branches with constant guards on $3 (only one runs): the
-- skill index for unscoped claims, the project index for scoped ones.
-- Status values are literals so the planner can match the partial indexes.
-- Runs inside taskroute_claim (functions/claims.sql) when the claim is scoped or an expired
-- lease may be taken over (claim_paths), else task_claim_open does; EXPLAIN tests run it alone.
WITH my_skills AS ({{ claim_skills($1, $2) }}),
candidate AS (
    {{ claim_open_any($1, $3) }}
    UNION ALL
    SELECT s.scarce, s.drain_seconds, c.*
    FROM my_skills s
    CROSS JOIN LATERAL (
        SELECT t.id, t.eff_priority, t.seq, t.assignment_id AS prev_assignment
        FROM tasks t
        WHERE $3::uuid IS NOT NULL AND t.project_id = $3::uuid
          AND t.status = 'open' AND t.skill = s.skill
          AND {{ task_eligible(t, s, $1) }}
        ORDER BY t.eff_priority DESC, t.seq
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) c
    UNION ALL
    SELECT s.scarce, s.drain_seconds, c.*
    FROM my_skills s
    CROSS JOIN LATERAL (
        -- the task's lease (a lower bound) passed, and the lease itself, its assignment's
        SELECT t.id, t.eff_priority, t.seq, t.assignment_id AS prev_assignment
        FROM tasks t
        JOIN assignments pa ON pa.id = t.assignment_id
        WHERE t.status = 'claimed' AND t.skill = s.skill AND t.lease_until < taskroute_now()
          AND pa.lease_until < taskroute_now()
          AND t.attempts < t.max_retries AND {{ task_in_scope(t, $3) }}
          AND {{ task_eligible(t, s, $1) }}
          -- a flagged item's slot is canceled by the sweeper, never taken over
          AND NOT EXISTS (SELECT 1 FROM items fi
                          WHERE fi.id = t.item_id AND fi.flagged_at IS NOT NULL)
        ORDER BY t.lease_until
        LIMIT 1
        FOR UPDATE OF t, pa SKIP LOCKED
    ) c
),
{{ claim_take($1, $2) }};

-- name: task_claim_open
-- $1 expert_id, $2 skills to restrict to (NULL: every skill the expert holds).
-- task_claim for an unscoped claim with no expired lease to take over (claim_paths): its
-- first branch alone, the same rows in the same order. Executor start-up of task_claim's
-- plan, three branches deep, was the largest single cost of a claim (bench/RESULTS.md).
WITH my_skills AS ({{ claim_skills($1, $2) }}),
candidate AS ({{ claim_open_any($1, NULL) }}),
{{ claim_take($1, $2) }};

-- name: assignment_expire
-- $1 assignment_id: the expired lease a claim took over (claim_take's prev_assignment), which
-- the claim holds locked. By primary key alone, the status settled in SET (see
-- leases_return_to_pool).
UPDATE assignments a
SET status = CASE WHEN a.status = 'active' THEN 'expired' ELSE a.status END
WHERE a.id = $1;

-- name: claim_paths
-- $1 expert_id, $2 skills (NULL: all), $3 project scope (NULL: any). Which statements the
-- claim needs, asked in one pass over the skills the expert may claim in: `gold`, whether
-- gold_claim could serve anything (gold_possible); `takeover`, whether it needs task_claim
-- rather than task_claim_open: a scoped claim, or a claimed task of one of those skills whose
-- task lease (a lower bound of its assignment's) passed. Per skill, one index probe of each
-- (gold_pool_serve, tasks_claimed_lease).
SELECT coalesce(bool_or({{ gold_possible(s, $3) }}), false) AS gold,
       $3::uuid IS NOT NULL OR coalesce(bool_or(EXISTS (
           SELECT 1 FROM tasks t
           WHERE t.status = 'claimed' AND t.skill = s.skill
             AND t.lease_until < taskroute_now()
       )), false) AS takeover
FROM ({{ eligible_skills($1, $2) }}) s;

-- name: leases_release_expired
-- $1 max rows, $2 expert_id (NULL: everyone's). The sweeper's: rows another transaction holds
-- are skipped (a claim releasing its own expert's lease, or the next sweep, takes them).
WITH expired AS (
    SELECT t.id, t.assignment_id
    FROM tasks t
    JOIN assignments a ON a.id = t.assignment_id
    WHERE t.status = 'claimed' AND t.lease_until < taskroute_now()
      AND a.lease_until < taskroute_now()
      AND ($2::uuid IS NULL OR a.expert_id = $2)
    ORDER BY t.lease_until
    LIMIT $1
    FOR UPDATE OF t, a SKIP LOCKED
),
{{ leases_return_to_pool }}

-- fragment: lease_release_own
-- $1 expert_id. The claim's: the expert's own claim whose lease ended (at most one: one
-- active assignment per expert), found from the expert's active assignment (the unique
-- assignments_one_active probe) and its task by primary key. The sweeper's form above, with
-- its optional expert, has no index condition on the expert in a cached plan: it walked
-- every live claim (assignments_one_active, 2,000 rows at 2,000 claims) per claim.
-- The claim waits for the row (`FOR UPDATE OF t`): with SKIP LOCKED, a sweep holding it let
-- the claim go on while the old assignment was still 'active', and its new one broke
-- assignments_one_active. A sweep that got there first cleared assignment_id: no row.
-- The assignment is locked too (after the task: the lock order) and its lease checked on
-- the newest row: a heartbeat extends the assignment's lease only (see the top of the file).
WITH expired AS (
    SELECT t.id, a.id AS assignment_id
    FROM assignments a
    JOIN tasks t ON t.id = a.task_id AND t.assignment_id = a.id
    WHERE a.expert_id = $1 AND a.status = 'active' AND a.lease_until < taskroute_now()
    FOR UPDATE OF t, a
),
{{ leases_return_to_pool }}

-- fragment: leases_return_to_pool
-- The rest of a statement whose first CTE is `expired` (id, assignment_id: claimed tasks whose
-- lease ended, locked): returns them to the pool: open again, failed once `max_retries`
-- leases expired, canceled if the project was or the item was flagged meanwhile (its open
-- slots were canceled then: queries/releases.sql, item_flag_if_bad); their assignments
-- expire. The assignment is named by primary key alone (its status is settled in SET): a
-- status literal in the WHERE let the planner scan assignments_one_active, which stale
-- statistics think empty.
released AS (
    UPDATE tasks t
    SET status = CASE WHEN p.status = 'canceled' OR i.flagged_at IS NOT NULL THEN 'canceled'
                      WHEN t.attempts >= t.max_retries THEN 'failed'
                      ELSE 'open' END,
        attempts = t.attempts + 1,
        assignment_id = NULL,
        lease_until = NULL
    FROM expired e, projects p, items i
    WHERE t.id = e.id AND p.id = t.project_id AND i.id = t.item_id
    RETURNING t.id, t.skill, t.project_id, t.status, t.min_quality, e.assignment_id
),
expire_assignments AS (
    UPDATE assignments a
    SET status = CASE WHEN a.status = 'active' THEN 'expired' ELSE a.status END
    FROM released r
    WHERE a.id = r.assignment_id
)
SELECT id, skill, project_id, status, min_quality FROM released;

-- name: assignment_get
-- $1 assignment_id. With what the submit needs of its project (its pay and payment policy).
SELECT a.*, a.lease_until > taskroute_now() AS lease_live, p.customer_id,
       p.pay_cents AS project_pay_cents, p.status AS project_status,
       p.min_seconds_per_task, p.too_fast_policy, p.payment_policy,
       {{ pay_status(p.payment_policy) }} AS pay_status
FROM assignments a JOIN projects p ON p.id = a.project_id
WHERE a.id = $1;

-- fragment: open_work_held_by_others
-- $1 expert_id, $2 skills (text[]; NULL: all), $3 project scope (uuid; NULL: any).
-- After a claim found nothing: whether an open task this expert may take exists all the same,
-- skipped because another transaction holds it (a claim in flight, or a submit's completion
-- probe, which share-locks an open slot until it commits). A plain read, so it waits for
-- nobody; one index probe per skill, like the claim's own.
EXISTS (
    SELECT 1
    FROM ({{ eligible_skills($1, $2) }}) s
    CROSS JOIN LATERAL (
        SELECT 1 FROM tasks t
        WHERE t.status = 'open' AND t.skill = s.skill AND {{ task_in_scope(t, $3) }}
          AND {{ task_eligible(t, s, $1) }}
        LIMIT 1
    ) w
)

-- fragment: has_higher_priority_work
-- $1 expert_id, $2 the held task's base priority (an expression). hasHighPriorityTasks: an
-- open task this expert may take (task_eligible) whose base priority (routing_base_priority:
-- class, deadline bump and task priority; never a fairness boost) is above the held task's.
-- A gold serving carries the base priority of the real work it imitates, so the flag reads
-- the same on gold as on that work. One index probe per skill (tasks_open_claim, from the top
-- down to the held priority).
EXISTS (
    SELECT 1
    FROM ({{ eligible_skills($1, NULL) }}) s
    CROSS JOIN LATERAL (
        SELECT 1 FROM tasks t
        WHERE t.status = 'open' AND t.skill = s.skill AND t.eff_priority > $2
          AND routing_base_priority(t.eff_priority) > $2
          AND {{ task_eligible(t, s, $1) }}
        ORDER BY t.eff_priority DESC
        LIMIT 1
    ) higher
)

-- name: assignment_heartbeat
-- $1 assignment_id, $2 expert_id. Extends a live lease on the assignment row alone (a HOT
-- update; see the top of the file) while the task row's lower bound is more than half a
-- lease away; no row when the lease already expired, the claim is not this expert's, it was
-- submitted, the project was canceled, or the task's bound is due (then
-- assignment_heartbeat_both moves both). The assignment is read by primary key and locked
-- (FOR NO KEY UPDATE, the update's own lock: the checks below see its newest row, whatever
-- committed meanwhile), its task by primary key, read only: a heartbeat that does not move
-- the task's bound takes no lock on it, and every path that ends a live lease locks the
-- assignment too. No status literal
-- on the tables: a partial index analysed while nearly empty (assignments_one_active, the
-- claimed ones) looked empty to the planner, which then scanned every live claim
-- (~1,000 buffers at 1,800 claims).
WITH held AS (
    SELECT id, task_id, expert_id, status, project_id, lease_until
    FROM assignments WHERE id = $1
    FOR NO KEY UPDATE
)
UPDATE assignments a
SET lease_until = taskroute_now() + make_interval(secs => p.lease_seconds)
FROM held h, tasks t, projects p,
     LATERAL (SELECT routing_base_priority(t.eff_priority) AS base) b
WHERE a.id = h.id AND h.expert_id = $2 AND h.status = 'active'
  AND h.lease_until > taskroute_now()
  AND t.id = h.task_id AND t.assignment_id = h.id
  AND t.lease_until >= taskroute_now() + make_interval(secs => p.lease_seconds / 2.0)
  -- completed: a gold serving may outlive the project's last real slot
  AND p.id = h.project_id AND p.status IN ('active', 'completed')
RETURNING a.id, a.lease_until, t.skill,
    {{ has_higher_priority_work($2, b.base) }} AS has_high_priority_tasks;

-- name: assignment_heartbeat_both
-- $1 assignment_id, $2 expert_id. assignment_heartbeat when the task row's lower bound is
-- within half a lease of passing: extends the lease on both rows, task row first, then the
-- assignment (the lock order). Once per half lease per claim. The task is found by primary
-- key and rechecked under its lock: still held by this claim (a takeover or a sweep moved or
-- cleared assignment_id) and not ended (a submit or release cleared lease_until); every path
-- that changes a live assignment's status locks the task first, so the assignment read here
-- is current. No status literal on tasks (see assignment_heartbeat).
WITH held AS MATERIALIZED (
    SELECT id, task_id, expert_id, status, project_id, lease_until
    FROM assignments WHERE id = $1
),
extended AS (
    UPDATE tasks t
    SET lease_until = taskroute_now() + make_interval(secs => p.lease_seconds)
    FROM held a, projects p
    WHERE a.expert_id = $2 AND a.status = 'active' AND a.lease_until > taskroute_now()
      AND t.id = a.task_id AND t.assignment_id = a.id AND t.lease_until IS NOT NULL
      AND p.id = a.project_id AND p.status IN ('active', 'completed')
    RETURNING a.id, t.lease_until, t.skill, routing_base_priority(t.eff_priority) AS base
)
UPDATE assignments a SET lease_until = e.lease_until
FROM extended e WHERE a.id = e.id
RETURNING a.id, a.lease_until, e.skill,
    {{ has_higher_priority_work($2, e.base) }} AS has_high_priority_tasks;

-- name: task_lock
-- $1 task_id. Serialises submits and claims of one task; `kind` tells a review task. With what
-- scoring and resolution need after a submit (the item's gold answer, the compared field).
SELECT t.status, t.assignment_id, t.lease_until, t.kind, t.skill, t.item_id, t.project_id,
       i.gold_answer, q.answer_field
FROM tasks t
JOIN items i ON i.id = t.item_id
JOIN project_quality q ON q.project_id = t.project_id
WHERE t.id = $1
FOR UPDATE OF t;

-- name: assignment_lock
-- $1 assignment_id.
SELECT *, lease_until > taskroute_now() AS lease_live FROM assignments WHERE id = $1 FOR UPDATE;

-- fragment: claim_lost
-- $1 the assignment (assignment_lock's row), $2 its task (task_lock's row), $3 the assignment
-- id. True when the expert may no longer act on the claim: it ended, its lease ran out, or
-- the task was taken over (a sweep and a new claim). Submit and release ask the same question.
($1.status <> 'active' OR NOT $1.lease_live
 OR $2.assignment_id IS DISTINCT FROM $3 OR $2.status <> 'claimed')

-- name: assignment_submit
-- $1 assignment_id, $2 answer, $3 pay_cents, $4 payment_policy, $5 too_fast (answered
-- sooner than the project's min_seconds_per_task after the claim). Stores the answer and the
-- receipt, and opens the review: accepted at once under on_submit (the payment line follows
-- in the same transaction), else undecided (queries/ledger.sql decides it later). The caller
-- holds the row locked and checked it is live (assignment_lock), so it is named by primary
-- key alone: no status literal for a partial index (assignments_one_active) to match.
UPDATE assignments
SET status = 'submitted', answer = $2, submitted_at = taskroute_now(), receipt_id = gen_random_uuid(),
    pay_cents = $3, too_fast = $5,
    review_status = CASE WHEN $4::text = 'on_submit' THEN 'accepted' ELSE 'submitted' END,
    reviewed_at = CASE WHEN $4::text = 'on_submit' THEN taskroute_now() END,
    reviewed_by = CASE WHEN $4::text = 'on_submit' THEN 'policy' END
WHERE id = $1
RETURNING receipt_id, submitted_at, pay_cents;

-- name: task_done
-- $1 task_id, $2 assignment_id. The caller holds the row (task_lock) and checked that this
-- live assignment holds it (so it is claimed); no status literal, so the primary key is the
-- only index that fits (see assignment_heartbeat on the claimed indexes and stale statistics).
-- finished_at is set here, so the tasks_finished trigger (functions/projects.sql) is skipped.
UPDATE tasks SET status = 'done', lease_until = NULL, finished_at = taskroute_now()
WHERE id = $1 AND assignment_id = $2;

-- name: payout_insert
-- $1 assignment_id, $2 expert_id, $3 project_id, $4 amount. One line per assignment, ever.
INSERT INTO payouts (assignment_id, expert_id, project_id, amount_cents)
VALUES ($1, $2, $3, $4)
ON CONFLICT (assignment_id) DO NOTHING;

-- name: audit_insert
-- $1 expert_id, $2 customer_id, $3 project_id, $4 task_id, $5 action.
INSERT INTO audit_log (expert_id, customer_id, project_id, task_id, action)
VALUES ($1, $2, $3, $4, $5);

-- fragment: claim_context
-- $1 the claimed item's id, $2 its task's id. What a claim carries beside its row, joined by
-- primary key: `x` the answer schema (the item's, else the project's) and the project's
-- layout, `r` for a review task the answer under review (queries/reviews.sql). Shared by the
-- claim and the held-claim answer (queries/held_claims.sql), so both return the same columns.
LEFT JOIN LATERAL (
    SELECT coalesce(i.answer_schema, p.answer_schema) AS answer_schema, p.layout,
           p.candidate_keys
    FROM items i JOIN projects p ON p.id = i.project_id
    WHERE i.id = $1
) x ON true
LEFT JOIN LATERAL (
    SELECT ra.answer AS reviewed_answer, ra.candidates_swapped AS reviewed_swapped
    FROM expert_reviews er JOIN assignments ra ON ra.id = er.reviewed_id
    WHERE er.task_id = $2
) r ON true

-- name: claim_call
-- $1 expert_id, $2 skills (NULL: all), $3 project scope (NULL: any), $4 gold draw in [0,1).
-- The whole claim, one round trip, with what it carries (claim_context: rows that existed
-- before the call, read by primary key in the same statement).
SELECT c.*, x.answer_schema, x.layout, x.candidate_keys, r.reviewed_answer,
       r.reviewed_swapped
FROM taskroute_claim($1, $2, $3, $4) AS c
{{ claim_context(c.item_id, c.task_id) }};

-- name: heartbeat_call
-- $1 assignment_id, $2 expert_id. Its own transaction, committed without waiting for the WAL
-- flush (synchronous_commit is read at commit, so where the set_config stands does not
-- matter): a heartbeat only moves a lease's end, and one lost in a crash leaves the lease
-- where the previous heartbeat put it. A third of the hot path's commits stop queueing on
-- the flush behind claims and submits, which stay durable.
SELECT h.* FROM taskroute_heartbeat($1, $2) AS h, set_config('synchronous_commit', 'off', true);

-- name: submit_call
-- $1 assignment_id, $2 expert_id, $3 answer (jsonb).
SELECT * FROM taskroute_submit($1, $2, $3);

-- name: submit_unless_schema_call
-- $1 assignment_id, $2 expert_id, $3 answer (jsonb). `submit_call` unless the
-- assignment's item or project has an answer schema; then the function does NOT run (OFFSET 0
-- keeps the subquery whole, so its WHERE is a one-time gate before the function scan) and the
-- row carries the schema: the caller checks the answer in Python, then sends `submit_call`.
-- Projects without a schema keep their one round trip.
-- A review task's answer is always checked (a verdict, and a correction that must match the
-- schema): `review` is true and the function does not run either.
WITH s AS MATERIALIZED (
    SELECT (SELECT coalesce(i.answer_schema, p.answer_schema)
            FROM assignments a
            JOIN items i ON i.id = a.item_id
            JOIN projects p ON p.id = a.project_id
            WHERE a.id = $1 AND a.expert_id = $2) AS answer_schema,
           EXISTS (SELECT 1 FROM assignments a JOIN expert_reviews er ON er.task_id = a.task_id
                   WHERE a.id = $1 AND a.expert_id = $2) AS review
)
SELECT s.answer_schema, s.review, r.*
FROM s
LEFT JOIN LATERAL (
    SELECT * FROM taskroute_submit($1, $2, $3)
    WHERE s.answer_schema IS NULL AND NOT s.review OFFSET 0
) AS r ON true;

-- name: skills_not_held
-- $1 expert_id, $2 skills a claim names. Those the expert does not hold (active or paused),
-- comma-separated; NULL when they hold them all. One primary-key probe per named skill.
SELECT string_agg(n.skill, ', ' ORDER BY n.skill)
FROM unnest($2::text[]) AS n(skill)
WHERE NOT EXISTS (SELECT 1 FROM expert_skills es WHERE es.expert_id = $1 AND es.skill = n.skill);
