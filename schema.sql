-- The schema the migrations produce (taskroute/db/migrations, then db/functions), as
-- pg_dump prints it. Generated: .venv/bin/python scripts/schema_sql.py. Do not edit.

--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: assignments_decide_gold_twins(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.assignments_decide_gold_twins() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM taskroute_gold_decide(array_agg(x.assignment_id))
    FROM gold_exposures x WHERE x.pending AND x.decide_with = NEW.id
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

--
-- Name: credentials_notify_invalidation(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.credentials_notify_invalidation() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('taskroute_credentials', '*');
        RETURN NULL;
    END IF;
    -- OLD's hash is the one caches hold; an UPDATE of the hash itself makes NEW's a new key,
    -- which no cache holds (the primary key was unused until now, and misses are not cached).
    PERFORM pg_notify('taskroute_credentials', encode(OLD.token_hash, 'hex'));
    RETURN NULL;
END $$;

--
-- Name: experts_notify_status(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.experts_notify_status() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('taskroute_credentials', NEW.id::text);
    RETURN NULL;
END $$;

--
-- Name: gold_pool_add(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.gold_pool_add() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO gold_pool (item_id, project_id, skill)
    VALUES (NEW.id, NEW.project_id, NEW.skill) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

--
-- Name: payouts_append_only(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payouts_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'payouts is an append-only ledger: write a reversal line instead';
END $$;

--
-- Name: project_quality_default(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.project_quality_default() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO project_quality (project_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

--
-- Name: routing_fair_boost(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.routing_fair_boost() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN 100000000;

--
-- Name: routing_fair_threshold(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.routing_fair_threshold() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN 50000000;

--
-- Name: routing_base_priority(integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.routing_base_priority(eff_priority integer) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN (eff_priority >= public.routing_fair_threshold()) THEN (eff_priority - public.routing_fair_boost()) ELSE eff_priority END;

--
-- Name: routing_class(integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.routing_class(project_priority integer) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN (project_priority >= 100) THEN 'high'::text WHEN (project_priority <= '-100'::integer) THEN 'low'::text ELSE 'normal'::text END;

--
-- Name: routing_eff_priority(integer, boolean, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.routing_eff_priority(project_priority integer, bumped boolean, task_priority integer) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ((CASE WHEN (NOT bumped) THEN project_priority WHEN (project_priority < 100) THEN LEAST((project_priority + 100), 99) ELSE (project_priority + 100) END * 10000) + task_priority);

--
-- Name: routing_scarce_lift(integer, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.routing_scarce_lift(project_priority integer, task_priority integer) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN (public.routing_eff_priority(project_priority, true, task_priority) + CASE WHEN (project_priority >= 100) THEN (2100 * 10000) ELSE 0 END);

--
-- Name: taskroute_answer_key(jsonb, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_answer_key(p_answer jsonb, p_field text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN (p_field IS NULL) THEN p_answer WHEN (jsonb_typeof(p_answer) = 'object'::text) THEN (p_answer -> p_field) ELSE NULL::jsonb END;

--
-- Name: taskroute_claim(uuid, text[], uuid, double precision); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_claim(p_expert uuid, p_skills text[], p_project uuid, p_gold_draw double precision) RETURNS TABLE(outcome text, assignment_id uuid, lease_until timestamp with time zone, task_id uuid, project_id uuid, skill text, priority integer, item_id uuid, customer_id uuid, payload jsonb, payload_key text, payload_bytes integer, released jsonb)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    v_status text;
    v_row record;
    v_claim record;
    v_released jsonb := '[]';
    v_gold boolean;
BEGIN
    released := v_released;
    IF p_project IS NOT NULL THEN
        -- p_project project_id. Whether a project exists (claims may be scoped to it).
SELECT status FROM projects WHERE id = p_project INTO v_status;
        IF NOT FOUND THEN
            outcome := 'no_project';
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    -- Locks the expert row to commit: two racing claims of one expert run one after the other.
    -- p_expert expert_id. Locks the expert row for the rest of the claim transaction, so two racing
-- claims of one expert run one after the other, and records presence.
UPDATE experts SET last_seen_at = taskroute_now() WHERE id = p_expert RETURNING status INTO v_status;
    IF v_status IS DISTINCT FROM 'active' THEN
        outcome := 'inactive';
        RETURN NEXT;
        RETURN;
    END IF;
    -- p_expert expert_id. The expert's live claim, if any (a page refresh gets the same one back).
-- The task by primary key: a live assignment's task is claimed, and no status literal lets a
-- claimed index that stale statistics think empty be scanned instead (assignment_heartbeat).
SELECT a.id AS assignment_id, a.lease_until, t.id AS task_id, t.project_id, t.skill,
       t.priority, t.item_id, i.payload, i.payload_key, i.payload_bytes, p.customer_id
FROM assignments a
JOIN tasks t ON t.id = a.task_id AND t.assignment_id = a.id
JOIN items i ON i.id = a.item_id
JOIN projects p ON p.id = a.project_id
WHERE a.expert_id = p_expert AND a.status = 'active' AND a.lease_until > taskroute_now() INTO v_claim;
    IF FOUND THEN
        outcome := 'held';
    ELSE
        FOR v_row IN -- p_expert expert_id. The claim's: the expert's own claim whose lease ended (at most one: one
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
    WHERE a.expert_id = p_expert AND a.status = 'active' AND a.lease_until < taskroute_now()
    FOR UPDATE OF t, a
),
-- The rest of a statement whose first CTE is `expired` (id, assignment_id: claimed tasks whose
-- lease ended, locked): returns them to the pool: open again, failed once `max_retries`
-- leases expired, canceled if the project was; their assignments expire. The assignment is
-- named by primary key alone (its status is settled in SET): a status literal in the WHERE
-- let the planner scan assignments_one_active, which stale statistics think empty.
released AS (
    UPDATE tasks t
    SET status = CASE WHEN p.status = 'canceled' THEN 'canceled'
                      WHEN t.attempts >= t.max_retries THEN 'failed'
                      ELSE 'open' END,
        attempts = t.attempts + 1,
        assignment_id = NULL,
        lease_until = NULL
    FROM expired e, projects p
    WHERE t.id = e.id AND p.id = t.project_id
    RETURNING t.id, t.skill, t.project_id, t.status, t.min_quality, e.assignment_id
),
expire_assignments AS (
    UPDATE assignments a
    SET status = CASE WHEN a.status = 'active' THEN 'expired' ELSE a.status END
    FROM released r
    WHERE a.id = r.assignment_id
)
SELECT id, skill, project_id, status, min_quality FROM released LOOP
            v_released := v_released || jsonb_build_object(
                'skill', v_row.skill, 'project_id', v_row.project_id, 'status', v_row.status,
                'min_quality', v_row.min_quality);
            -- a slot out of retries may have been its project's last work (issue 13)
            IF v_row.status = 'failed' THEN
                PERFORM taskroute_project_settle(v_row.project_id, true);
            END IF;
        END LOOP;
        released := v_released;
        -- p_expert expert_id, p_skills skills to restrict to (NULL: all the expert holds), p_project project to restrict
-- to (NULL: any). Whether gold_claim could serve anything at all: an unretired gold item of
-- a skill the expert may claim in (of that project, when scoped). One gold_pool_serve probe
-- per skill. The claim runs gold_claim only then: its writing CTEs fire their tables'
-- statement triggers even when they write nothing (a third of an empty claim's work, where
-- no project has gold).
SELECT EXISTS (
    SELECT 1
    FROM (-- p_expert expert_id, p_skills skills to restrict to (text[]; NULL: every skill the expert holds).
-- A row source: the skills the expert may claim in now, i.e. an active (not paused) skill of
-- an active expert. Columns: skill, quality (what a task's min_quality is compared with),
-- capabilities (the expert's tags), tasks_done (drives the onboarding gold share).
SELECT es.skill, es.quality, e.capabilities, es.tasks_done
FROM expert_skills es
JOIN experts e ON e.id = es.expert_id
WHERE es.expert_id = p_expert AND es.status = 'active' AND e.status = 'active'
  AND (p_skills::text[] IS NULL OR es.skill = ANY (p_skills::text[]))) s
    WHERE EXISTS (
        SELECT 1 FROM gold_pool g
        WHERE g.skill = s.skill AND g.retired_at IS NULL
          AND (p_project::uuid IS NULL OR g.project_id = p_project::uuid)
    )
) AS possible INTO v_gold;
        IF v_gold THEN
            -- p_expert expert_id, p_skills skills to restrict to (NULL: all the expert holds), p_project project to restrict
-- to (NULL: any), p_gold_draw a uniform draw in [0,1).
-- Serves one gold item as a freshly created task row, claimed at once, shaped like task_claim's
-- answer. A (project, skill) serves gold only while it has open work the expert may take
-- (task_eligible: gold is mixed into real work, never all that is left), and only when the
-- draw falls under its gold share. Under the sequential pause rule, the suspect share until
-- the expert is cleared: until the pause test's evidence is clear_evidence times in their
-- favour (pause_llr <= -ln(clear_evidence); a new expert, at 0, starts as a suspect: more
-- gold, a sooner decision either way); the lower proven share once it is as sure of "good" as
-- a pause would need to be of "bad" (pause_llr <= ln(pause_risk)). Otherwise the onboarding
-- share during the expert's first `exploration_tasks` tasks of the skill, else gold_ratio.
-- A project with gold_ratio 0 serves gold during onboarding only (no steady budget to
-- reallocate). Which share applies depends only on answers already scored, so the pause
-- test's guarantee holds however the gold is allocated. Never an item this
-- expert has seen; least-exposed first, ties at random; retired at `gold_max_exposures`.
-- Indistinguishable from that real work: the serving copies the priority and the base
-- effective priority (no fairness boost) of the task the expert would get next there, so
-- neither the claim nor a heartbeat's hasHighPriorityTasks tells them apart.
-- The task has max_retries 0: an expired gold lease fails, it is never reopened or taken over.
WITH my_skills AS (-- p_expert expert_id, p_skills skills to restrict to (text[]; NULL: every skill the expert holds).
-- A row source: the skills the expert may claim in now, i.e. an active (not paused) skill of
-- an active expert. Columns: skill, quality (what a task's min_quality is compared with),
-- capabilities (the expert's tags), tasks_done (drives the onboarding gold share).
SELECT es.skill, es.quality, e.capabilities, es.tasks_done
FROM expert_skills es
JOIN experts e ON e.id = es.expert_id
WHERE es.expert_id = p_expert AND es.status = 'active' AND e.status = 'active'
  AND (p_skills::text[] IS NULL OR es.skill = ANY (p_skills::text[]))),
served AS (
    SELECT gp.project_id, s.skill, w.priority, w.eff_priority
    FROM my_skills s
    JOIN (SELECT DISTINCT project_id, skill FROM gold_pool WHERE retired_at IS NULL) gp
      ON gp.skill = s.skill
    JOIN projects p ON p.id = gp.project_id AND p.status = 'active'
                       AND (p_project::uuid IS NULL OR p.id = p_project::uuid)
    JOIN project_quality q ON q.project_id = p.id
    JOIN expert_skills ev ON ev.expert_id = p_expert AND ev.skill = s.skill
    CROSS JOIN LATERAL (
        SELECT t.priority, routing_base_priority(t.eff_priority) AS eff_priority
        FROM tasks t
        WHERE t.project_id = p.id AND t.status = 'open' AND t.skill = s.skill
          AND -- t alias of the task row, s alias of an eligible_skills row, p_expert expert_id.
-- The task is of that skill, asks no more quality than the expert has in it and no capability
-- tag the expert lacks, belongs to an active project (not ingesting, not canceled), and is
-- not an item the expert already holds or answered (redundancy needs independent experts).
-- The caller states which rows it probes (status, and scope via task_in_scope): that picks
-- the partial index. The project check is EXISTS: a scalar subquery compared with 'active'
-- gets the planner's default selectivity (0.5%), which made it sort every open task of the
-- skill instead of walking the index to the first match (15 ms instead of 1 ms per claim).
-- OFFSET 0 keeps it a per-row check: pulled up into a semi-join, the planner walked every
-- active project's tasks instead of probing the skill's index (test_routing_explain.py).
t.skill = s.skill AND t.min_quality <= s.quality
AND (t.required_caps = '{}' OR t.required_caps <@ s.capabilities)
AND EXISTS (SELECT 1 FROM projects p WHERE p.id = t.project_id AND p.status = 'active' OFFSET 0)
AND NOT EXISTS (SELECT 1 FROM assignments a
                WHERE a.item_id = t.item_id AND a.expert_id = p_expert
                  AND a.status IN ('active', 'submitted'))
        ORDER BY t.eff_priority DESC, t.seq
        LIMIT 1
    ) w
    WHERE p_gold_draw::float8 < CASE
        WHEN q.pause_rule = 'sequential' AND q.gold_ratio > 0
             AND ev.pause_llr > -ln(q.clear_evidence)
            THEN greatest(q.gold_ratio, q.suspect_gold_ratio,
                          CASE WHEN s.tasks_done < q.exploration_tasks
                               THEN q.exploration_gold_ratio ELSE 0 END)
        WHEN s.tasks_done < q.exploration_tasks
            THEN greatest(q.gold_ratio, q.exploration_gold_ratio)
        WHEN q.pause_rule = 'sequential' AND ev.pause_llr <= ln(q.pause_risk)
            THEN least(q.gold_ratio, q.proven_gold_ratio)
        ELSE q.gold_ratio END
),
pick AS (
    SELECT g.item_id, g.project_id, g.skill, sv.priority, sv.eff_priority
    FROM gold_pool g
    JOIN served sv ON sv.project_id = g.project_id AND sv.skill = g.skill
    WHERE g.retired_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM gold_exposures x WHERE x.expert_id = p_expert AND x.item_id = g.item_id)
    ORDER BY g.exposures, random()
    LIMIT 1
    FOR UPDATE OF g SKIP LOCKED
),
task AS (
    INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, min_quality,
                       max_retries, status, kind, assignment_id, lease_until)
    SELECT k.item_id, k.project_id, k.skill, k.priority, k.eff_priority, 0, 0, 'claimed', 'gold',
           gen_random_uuid(), taskroute_now() + make_interval(secs => p.lease_seconds)
    FROM pick k JOIN projects p ON p.id = k.project_id
    RETURNING id AS task_id, item_id, project_id, skill, priority, assignment_id, lease_until
),
assignment AS (
    INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, lease_until)
    SELECT assignment_id, task_id, item_id, project_id, p_expert, lease_until FROM task
),
exposure AS (
    INSERT INTO gold_exposures (expert_id, item_id, assignment_id)
    SELECT p_expert, item_id, assignment_id FROM task
),
counted AS (
    UPDATE gold_pool g
    SET exposures = g.exposures + 1,
        retired_at = CASE WHEN g.exposures + 1 >= q.gold_max_exposures THEN taskroute_now() END
    FROM task k, project_quality q
    WHERE g.item_id = k.item_id AND q.project_id = g.project_id
)
SELECT k.assignment_id, k.lease_until, k.task_id, k.project_id, k.skill, k.priority,
       k.item_id, p.customer_id, i.payload, i.payload_key, i.payload_bytes
FROM task k JOIN projects p ON p.id = k.project_id JOIN items i ON i.id = k.item_id INTO v_claim;
        END IF;
        IF NOT v_gold OR NOT FOUND THEN
            -- p_expert expert_id, p_skills skills to restrict to (NULL: every skill the expert holds),
-- p_project project_id to restrict to (NULL: any project).
-- For each skill the expert may claim in (eligible_skills), probe the partial indexes (open
-- tasks; claimed tasks whose lease expired and may be retried) for the best row the expert
-- may take (task_eligible), skipping rows other claims hold (SKIP LOCKED), then take the
-- best across skills. Without named skills a scarce skill comes first (skill_scarcity.scarce,
-- kept by the routing job: few other active holders per second of its backlog), so experts
-- holding a rare skill with backlog take it before common work others can do; between two
-- scarce skills, the one whose backlog takes its holders longest (seconds of backlog per
-- active holder: the skill that would drain last); then eff_priority, then FIFO. Unmeasured
-- skills are not scarce.
-- The open-task probe has two branches with constant guards on p_project (only one runs): the
-- skill index for unscoped claims, the project index for scoped ones.
-- Status values are literals so the planner can match the partial indexes.
-- Runs inside taskroute_claim (functions/claims.sql); EXPLAIN tests run it alone.
WITH my_skills AS (
    SELECT s.*, coalesce(sc.scarce, false) AS scarce,
           sc.backlog_seconds / greatest(sc.active_experts, 1) AS drain_seconds
    FROM (-- p_expert expert_id, p_skills skills to restrict to (text[]; NULL: every skill the expert holds).
-- A row source: the skills the expert may claim in now, i.e. an active (not paused) skill of
-- an active expert. Columns: skill, quality (what a task's min_quality is compared with),
-- capabilities (the expert's tags), tasks_done (drives the onboarding gold share).
SELECT es.skill, es.quality, e.capabilities, es.tasks_done
FROM expert_skills es
JOIN experts e ON e.id = es.expert_id
WHERE es.expert_id = p_expert AND es.status = 'active' AND e.status = 'active'
  AND (p_skills::text[] IS NULL OR es.skill = ANY (p_skills::text[]))) s
    LEFT JOIN skill_scarcity sc ON sc.skill = s.skill
),
candidate AS (
    SELECT s.scarce, s.drain_seconds, c.*
    FROM my_skills s
    CROSS JOIN LATERAL (
        SELECT t.id, t.eff_priority, t.seq, t.assignment_id AS prev_assignment
        FROM tasks t
        WHERE p_project::uuid IS NULL AND t.status = 'open' AND t.skill = s.skill
          AND -- t alias of the task row, s alias of an eligible_skills row, p_expert expert_id.
-- The task is of that skill, asks no more quality than the expert has in it and no capability
-- tag the expert lacks, belongs to an active project (not ingesting, not canceled), and is
-- not an item the expert already holds or answered (redundancy needs independent experts).
-- The caller states which rows it probes (status, and scope via task_in_scope): that picks
-- the partial index. The project check is EXISTS: a scalar subquery compared with 'active'
-- gets the planner's default selectivity (0.5%), which made it sort every open task of the
-- skill instead of walking the index to the first match (15 ms instead of 1 ms per claim).
-- OFFSET 0 keeps it a per-row check: pulled up into a semi-join, the planner walked every
-- active project's tasks instead of probing the skill's index (test_routing_explain.py).
t.skill = s.skill AND t.min_quality <= s.quality
AND (t.required_caps = '{}' OR t.required_caps <@ s.capabilities)
AND EXISTS (SELECT 1 FROM projects p WHERE p.id = t.project_id AND p.status = 'active' OFFSET 0)
AND NOT EXISTS (SELECT 1 FROM assignments a
                WHERE a.item_id = t.item_id AND a.expert_id = p_expert
                  AND a.status IN ('active', 'submitted'))
        ORDER BY t.eff_priority DESC, t.seq
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) c
    UNION ALL
    SELECT s.scarce, s.drain_seconds, c.*
    FROM my_skills s
    CROSS JOIN LATERAL (
        SELECT t.id, t.eff_priority, t.seq, t.assignment_id AS prev_assignment
        FROM tasks t
        WHERE p_project::uuid IS NOT NULL AND t.project_id = p_project::uuid
          AND t.status = 'open' AND t.skill = s.skill
          AND -- t alias of the task row, s alias of an eligible_skills row, p_expert expert_id.
-- The task is of that skill, asks no more quality than the expert has in it and no capability
-- tag the expert lacks, belongs to an active project (not ingesting, not canceled), and is
-- not an item the expert already holds or answered (redundancy needs independent experts).
-- The caller states which rows it probes (status, and scope via task_in_scope): that picks
-- the partial index. The project check is EXISTS: a scalar subquery compared with 'active'
-- gets the planner's default selectivity (0.5%), which made it sort every open task of the
-- skill instead of walking the index to the first match (15 ms instead of 1 ms per claim).
-- OFFSET 0 keeps it a per-row check: pulled up into a semi-join, the planner walked every
-- active project's tasks instead of probing the skill's index (test_routing_explain.py).
t.skill = s.skill AND t.min_quality <= s.quality
AND (t.required_caps = '{}' OR t.required_caps <@ s.capabilities)
AND EXISTS (SELECT 1 FROM projects p WHERE p.id = t.project_id AND p.status = 'active' OFFSET 0)
AND NOT EXISTS (SELECT 1 FROM assignments a
                WHERE a.item_id = t.item_id AND a.expert_id = p_expert
                  AND a.status IN ('active', 'submitted'))
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
          AND t.attempts < t.max_retries AND -- t alias of the task row, p_project project_id the claim is scoped to (uuid; NULL: any project).
(p_project::uuid IS NULL OR t.project_id = p_project::uuid)
          AND -- t alias of the task row, s alias of an eligible_skills row, p_expert expert_id.
-- The task is of that skill, asks no more quality than the expert has in it and no capability
-- tag the expert lacks, belongs to an active project (not ingesting, not canceled), and is
-- not an item the expert already holds or answered (redundancy needs independent experts).
-- The caller states which rows it probes (status, and scope via task_in_scope): that picks
-- the partial index. The project check is EXISTS: a scalar subquery compared with 'active'
-- gets the planner's default selectivity (0.5%), which made it sort every open task of the
-- skill instead of walking the index to the first match (15 ms instead of 1 ms per claim).
-- OFFSET 0 keeps it a per-row check: pulled up into a semi-join, the planner walked every
-- active project's tasks instead of probing the skill's index (test_routing_explain.py).
t.skill = s.skill AND t.min_quality <= s.quality
AND (t.required_caps = '{}' OR t.required_caps <@ s.capabilities)
AND EXISTS (SELECT 1 FROM projects p WHERE p.id = t.project_id AND p.status = 'active' OFFSET 0)
AND NOT EXISTS (SELECT 1 FROM assignments a
                WHERE a.item_id = t.item_id AND a.expert_id = p_expert
                  AND a.status IN ('active', 'submitted'))
        ORDER BY t.lease_until
        LIMIT 1
        FOR UPDATE OF t, pa SKIP LOCKED
    ) c
),
best AS (
    SELECT * FROM candidate
    -- An expert holding two scarce skills serves the one that would drain last: priority
    -- across them let a bumped project's task in one bottleneck (lifted ahead of every
    -- unbumped row there) keep its shared holder from a rarer skill's whole backlog
    -- (bench/RESULTS.md, `specialists`). Within a skill, priority still decides.
    ORDER BY (p_skills::text[] IS NULL AND scarce) DESC,
             CASE WHEN p_skills::text[] IS NULL AND scarce THEN drain_seconds END DESC NULLS LAST,
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
              t.assignment_id, t.lease_until, c.prev_assignment, p.customer_id
),
expire_prev AS (
    -- by primary key alone, the status settled in SET (see leases_return_to_pool)
    UPDATE assignments a
    SET status = CASE WHEN a.status = 'active' THEN 'expired' ELSE a.status END
    FROM claimed c
    WHERE a.id = c.prev_assignment
),
inserted AS (
    INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, lease_until)
    SELECT assignment_id, task_id, item_id, project_id, p_expert, lease_until FROM claimed
)
SELECT c.assignment_id, c.lease_until, c.task_id, c.project_id, c.skill, c.priority,
       c.item_id, c.customer_id, i.payload, i.payload_key, i.payload_bytes
FROM claimed c JOIN items i ON i.id = c.item_id INTO v_claim;
        END IF;
        outcome := CASE WHEN FOUND THEN 'claimed' ELSE 'none' END;
    END IF;
    IF outcome <> 'none' THEN
        -- p_expert expert_id, v_claim.customer_id customer_id, v_claim.project_id project_id, v_claim.task_id task_id, 'claim' action.
INSERT INTO audit_log (expert_id, customer_id, project_id, task_id, action)
VALUES (p_expert, v_claim.customer_id, v_claim.project_id, v_claim.task_id, 'claim');
        assignment_id := v_claim.assignment_id;
        lease_until := v_claim.lease_until;
        task_id := v_claim.task_id;
        project_id := v_claim.project_id;
        skill := v_claim.skill;
        priority := v_claim.priority;
        item_id := v_claim.item_id;
        customer_id := v_claim.customer_id;
        payload := v_claim.payload;
        payload_key := v_claim.payload_key;
        payload_bytes := v_claim.payload_bytes;
    END IF;
    RETURN NEXT;
END
$$;

--
-- Name: taskroute_gold_correct(jsonb, jsonb, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_gold_correct(p_answer jsonb, p_gold jsonb, p_field text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN COALESCE((public.taskroute_answer_key(p_answer, p_field) = COALESCE(public.taskroute_answer_key(p_gold, p_field), p_gold)), false);

--
-- Name: taskroute_gold_decide(uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_gold_decide(p_assignments uuid[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- p_assignments gold assignment ids. on_acceptance: each undecided one is accepted (and paid) when it is
-- correct, else rejected, with the reasons real work gets (an expert reading their reviews
-- cannot tell gold by the wording). No-op for other policies or decided assignments.
WITH v AS (
    SELECT a.id, taskroute_gold_correct(a.answer, i.gold_answer, q.answer_field) AS ok
    FROM assignments a
    JOIN items i ON i.id = a.item_id
    JOIN project_quality q ON q.project_id = a.project_id
    JOIN projects p ON p.id = a.project_id AND p.payment_policy = 'on_acceptance'
    WHERE a.id = ANY (p_assignments::uuid[]) AND a.review_status = 'submitted'
    ORDER BY a.id
    FOR UPDATE OF a
),
d AS (
    UPDATE assignments a
    SET review_status = CASE WHEN v.ok THEN 'accepted' ELSE 'rejected' END,
        reviewed_at = taskroute_now(), reviewed_by = 'quality',
        review_reason = CASE WHEN v.ok THEN 'agrees with the resolved answer'
                             ELSE 'disagrees with the resolved answer' END
    FROM v
    WHERE a.id = v.id AND a.review_status = 'submitted'
    RETURNING a.id, a.expert_id, a.project_id, a.pay_cents, a.review_status
),
done AS (
    UPDATE gold_exposures x SET pending = false
    WHERE x.assignment_id = ANY (p_assignments::uuid[]) AND x.pending
)
INSERT INTO payouts (assignment_id, expert_id, project_id, amount_cents)
SELECT id, expert_id, project_id, pay_cents FROM d WHERE review_status = 'accepted'
ON CONFLICT (assignment_id) DO NOTHING;
END
$$;

--
-- Name: taskroute_gold_submitted(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_gold_submitted(p_assignment uuid) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_twin record;
BEGIN
    -- p_assignment a gold assignment just submitted. No row unless the project pays on_acceptance and the
-- answer is undecided. twin_id / twin_status: its twin, the latest real answer of the same
-- project and skill another expert submitted before it (another expert's: linking to one of
-- the expert's own undecided answers would decide both at the same instant, which real work
-- almost never is). own_decided: the expert's own latest real answer there is decided (the
-- fallback when nobody else answered yet, e.g. an expert alone on a redundancy-1 project).
SELECT o.id AS twin_id, o.review_status AS twin_status,
       coalesce(m.review_status <> 'submitted', false) AS own_decided
FROM assignments g
JOIN tasks gt ON gt.id = g.task_id
JOIN projects p ON p.id = g.project_id AND p.payment_policy = 'on_acceptance'
LEFT JOIN LATERAL (
    SELECT r.id, r.review_status
    FROM assignments r JOIN tasks rt ON rt.id = r.task_id
    WHERE r.project_id = g.project_id AND r.submitted_at <= g.submitted_at
      AND r.status = 'submitted' AND r.expert_id <> g.expert_id
      AND rt.kind = 'normal' AND rt.skill = gt.skill
    ORDER BY r.submitted_at DESC
    LIMIT 1
) o ON true
LEFT JOIN LATERAL (
    SELECT r.review_status
    FROM assignments r JOIN tasks rt ON rt.id = r.task_id
    WHERE r.expert_id = g.expert_id AND r.project_id = g.project_id
      AND r.status = 'submitted' AND rt.kind = 'normal' AND rt.skill = gt.skill
    ORDER BY r.claimed_at DESC
    LIMIT 1
) m ON true
WHERE g.id = p_assignment AND g.review_status = 'submitted' INTO v_twin;
    IF NOT FOUND THEN
        RETURN;  -- another payment policy: decided with the rest of its work
    END IF;
    IF v_twin.twin_status IS DISTINCT FROM 'submitted'
       AND (v_twin.twin_id IS NOT NULL OR v_twin.own_decided) THEN
        PERFORM taskroute_gold_decide(ARRAY[p_assignment]);
    ELSE
        -- p_assignment gold assignment_id, v_twin.twin_id its twin (NULL: none yet). The answer waits for its decision.
UPDATE gold_exposures SET pending = true, decide_with = v_twin.twin_id WHERE assignment_id = p_assignment;
    END IF;
END
$$;

--
-- Name: taskroute_heartbeat(uuid, uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_heartbeat(p_assignment uuid, p_expert uuid) RETURNS TABLE(outcome text, lease_until timestamp with time zone, has_high_priority_tasks boolean)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    v_row record;
BEGIN
    -- Presence first: the expert row before the task row, the claim's lock order.
    -- p_expert expert_id. Presence from heartbeats (claims record it in expert_touch).
UPDATE experts SET last_seen_at = taskroute_now() WHERE id = p_expert;
    -- The assignment's lease alone, or both rows once the task's lower bound is due
    -- (queries/claims.sql, at the top).
    -- p_assignment assignment_id, p_expert expert_id. Extends a live lease on the assignment row alone (a HOT
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
    FROM assignments WHERE id = p_assignment
    FOR NO KEY UPDATE
)
UPDATE assignments a
SET lease_until = taskroute_now() + make_interval(secs => p.lease_seconds)
FROM held h, tasks t, projects p,
     LATERAL (SELECT routing_base_priority(t.eff_priority) AS base) b
WHERE a.id = h.id AND h.expert_id = p_expert AND h.status = 'active'
  AND h.lease_until > taskroute_now()
  AND t.id = h.task_id AND t.assignment_id = h.id
  AND t.lease_until >= taskroute_now() + make_interval(secs => p.lease_seconds / 2.0)
  -- completed: a gold serving may outlive the project's last real slot (issue 13)
  AND p.id = h.project_id AND p.status IN ('active', 'completed')
RETURNING a.id, a.lease_until, t.skill,
    -- p_expert expert_id, b.base the held task's base priority (an expression). hasHighPriorityTasks: an
-- open task this expert may take (task_eligible) whose base priority (routing_base_priority:
-- class, deadline bump and task priority; never a fairness boost) is above the held task's.
-- A gold serving carries the base priority of the real work it imitates, so the flag reads
-- the same on gold as on that work. One index probe per skill (tasks_open_claim, from the top
-- down to the held priority).
EXISTS (
    SELECT 1
    FROM (-- p_expert expert_id, NULL skills to restrict to (text[]; NULL: every skill the expert holds).
-- A row source: the skills the expert may claim in now, i.e. an active (not paused) skill of
-- an active expert. Columns: skill, quality (what a task's min_quality is compared with),
-- capabilities (the expert's tags), tasks_done (drives the onboarding gold share).
SELECT es.skill, es.quality, e.capabilities, es.tasks_done
FROM expert_skills es
JOIN experts e ON e.id = es.expert_id
WHERE es.expert_id = p_expert AND es.status = 'active' AND e.status = 'active'
  AND (NULL::text[] IS NULL OR es.skill = ANY (NULL::text[]))) s
    CROSS JOIN LATERAL (
        SELECT 1 FROM tasks t
        WHERE t.status = 'open' AND t.skill = s.skill AND t.eff_priority > b.base
          AND routing_base_priority(t.eff_priority) > b.base
          AND -- t alias of the task row, s alias of an eligible_skills row, p_expert expert_id.
-- The task is of that skill, asks no more quality than the expert has in it and no capability
-- tag the expert lacks, belongs to an active project (not ingesting, not canceled), and is
-- not an item the expert already holds or answered (redundancy needs independent experts).
-- The caller states which rows it probes (status, and scope via task_in_scope): that picks
-- the partial index. The project check is EXISTS: a scalar subquery compared with 'active'
-- gets the planner's default selectivity (0.5%), which made it sort every open task of the
-- skill instead of walking the index to the first match (15 ms instead of 1 ms per claim).
-- OFFSET 0 keeps it a per-row check: pulled up into a semi-join, the planner walked every
-- active project's tasks instead of probing the skill's index (test_routing_explain.py).
t.skill = s.skill AND t.min_quality <= s.quality
AND (t.required_caps = '{}' OR t.required_caps <@ s.capabilities)
AND EXISTS (SELECT 1 FROM projects p WHERE p.id = t.project_id AND p.status = 'active' OFFSET 0)
AND NOT EXISTS (SELECT 1 FROM assignments a
                WHERE a.item_id = t.item_id AND a.expert_id = p_expert
                  AND a.status IN ('active', 'submitted'))
        ORDER BY t.eff_priority DESC
        LIMIT 1
    ) higher
) AS has_high_priority_tasks INTO v_row;
    IF NOT FOUND THEN
        -- p_assignment assignment_id, p_expert expert_id. assignment_heartbeat when the task row's lower bound is
-- within half a lease of passing: extends the lease on both rows, task row first, then the
-- assignment (the lock order). Once per half lease per claim. The task is found by primary
-- key and rechecked under its lock: still held by this claim (a takeover or a sweep moved or
-- cleared assignment_id) and not ended (a submit or release cleared lease_until); every path
-- that changes a live assignment's status locks the task first, so the assignment read here
-- is current. No status literal on tasks (see assignment_heartbeat).
WITH held AS MATERIALIZED (
    SELECT id, task_id, expert_id, status, project_id, lease_until
    FROM assignments WHERE id = p_assignment
),
extended AS (
    UPDATE tasks t
    SET lease_until = taskroute_now() + make_interval(secs => p.lease_seconds)
    FROM held a, projects p
    WHERE a.expert_id = p_expert AND a.status = 'active' AND a.lease_until > taskroute_now()
      AND t.id = a.task_id AND t.assignment_id = a.id AND t.lease_until IS NOT NULL
      AND p.id = a.project_id AND p.status IN ('active', 'completed')
    RETURNING a.id, t.lease_until, t.skill, routing_base_priority(t.eff_priority) AS base
)
UPDATE assignments a SET lease_until = e.lease_until
FROM extended e WHERE a.id = e.id
RETURNING a.id, a.lease_until, e.skill,
    -- p_expert expert_id, e.base the held task's base priority (an expression). hasHighPriorityTasks: an
-- open task this expert may take (task_eligible) whose base priority (routing_base_priority:
-- class, deadline bump and task priority; never a fairness boost) is above the held task's.
-- A gold serving carries the base priority of the real work it imitates, so the flag reads
-- the same on gold as on that work. One index probe per skill (tasks_open_claim, from the top
-- down to the held priority).
EXISTS (
    SELECT 1
    FROM (-- p_expert expert_id, NULL skills to restrict to (text[]; NULL: every skill the expert holds).
-- A row source: the skills the expert may claim in now, i.e. an active (not paused) skill of
-- an active expert. Columns: skill, quality (what a task's min_quality is compared with),
-- capabilities (the expert's tags), tasks_done (drives the onboarding gold share).
SELECT es.skill, es.quality, e.capabilities, es.tasks_done
FROM expert_skills es
JOIN experts e ON e.id = es.expert_id
WHERE es.expert_id = p_expert AND es.status = 'active' AND e.status = 'active'
  AND (NULL::text[] IS NULL OR es.skill = ANY (NULL::text[]))) s
    CROSS JOIN LATERAL (
        SELECT 1 FROM tasks t
        WHERE t.status = 'open' AND t.skill = s.skill AND t.eff_priority > e.base
          AND routing_base_priority(t.eff_priority) > e.base
          AND -- t alias of the task row, s alias of an eligible_skills row, p_expert expert_id.
-- The task is of that skill, asks no more quality than the expert has in it and no capability
-- tag the expert lacks, belongs to an active project (not ingesting, not canceled), and is
-- not an item the expert already holds or answered (redundancy needs independent experts).
-- The caller states which rows it probes (status, and scope via task_in_scope): that picks
-- the partial index. The project check is EXISTS: a scalar subquery compared with 'active'
-- gets the planner's default selectivity (0.5%), which made it sort every open task of the
-- skill instead of walking the index to the first match (15 ms instead of 1 ms per claim).
-- OFFSET 0 keeps it a per-row check: pulled up into a semi-join, the planner walked every
-- active project's tasks instead of probing the skill's index (test_routing_explain.py).
t.skill = s.skill AND t.min_quality <= s.quality
AND (t.required_caps = '{}' OR t.required_caps <@ s.capabilities)
AND EXISTS (SELECT 1 FROM projects p WHERE p.id = t.project_id AND p.status = 'active' OFFSET 0)
AND NOT EXISTS (SELECT 1 FROM assignments a
                WHERE a.item_id = t.item_id AND a.expert_id = p_expert
                  AND a.status IN ('active', 'submitted'))
        ORDER BY t.eff_priority DESC
        LIMIT 1
    ) higher
) AS has_high_priority_tasks INTO v_row;
    END IF;
    IF FOUND THEN
        outcome := 'extended';
        lease_until := v_row.lease_until;
        has_high_priority_tasks := v_row.has_high_priority_tasks;
        RETURN NEXT;
        RETURN;
    END IF;
    -- p_assignment assignment_id.
SELECT a.*, a.lease_until > taskroute_now() AS lease_live, p.customer_id,
       p.pay_cents AS project_pay_cents, p.status AS project_status
FROM assignments a JOIN projects p ON p.id = a.project_id
WHERE a.id = p_assignment INTO v_row;
    outcome := CASE
        WHEN NOT FOUND OR v_row.expert_id <> p_expert THEN 'not_found'
        WHEN v_row.status = 'submitted' THEN 'submitted'
        WHEN v_row.status = 'active' AND v_row.lease_live THEN 'canceled'
        ELSE 'expired' END;
    RETURN NEXT;
END
$$;

--
-- Name: taskroute_now(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_now() RETURNS timestamp with time zone
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT now() $$;

--
-- Name: taskroute_pace_merge(uuid[], uuid[], uuid[], timestamp with time zone[], timestamp with time zone[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_pace_merge(p_ids uuid[], p_experts uuid[], p_tasks uuid[], p_claimed timestamp with time zone[], p_submitted timestamp with time zone[]) RETURNS void
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
BEGIN
    WITH fresh AS (
        SELECT u.id, u.expert_id, t.skill,
               (extract(epoch FROM u.submitted_at - u.claimed_at) * 1000000)::bigint AS claim_us,
               (extract(epoch FROM u.submitted_at) * 1000000)::bigint AS submitted_us
        FROM unnest(p_ids, p_experts, p_tasks, p_claimed, p_submitted)
             AS u(id, expert_id, task_id, claimed_at, submitted_at)
        JOIN tasks t ON t.id = u.task_id
        WHERE u.submitted_at IS NOT NULL
    ),
    kept AS (
        SELECT k.id, p.expert_id, k.skill, k.claim_us, k.submitted_us
        FROM expert_pace p,
             unnest(p.assignment_ids, p.skills, p.claim_us, p.submitted_us)
                 AS k(id, skill, claim_us, submitted_us)
        WHERE p.expert_id IN (SELECT expert_id FROM fresh)
          AND k.id NOT IN (SELECT id FROM fresh)
    ),
    ranked AS (
        SELECT m.*,
               row_number() OVER (PARTITION BY m.expert_id ORDER BY m.submitted_us DESC) AS r
        FROM (SELECT * FROM fresh UNION ALL SELECT * FROM kept) m
    )
    INSERT INTO expert_pace AS e (expert_id, assignment_ids, skills, claim_us, submitted_us)
    SELECT expert_id,
           array_agg(id ORDER BY r),
           array_agg(skill ORDER BY r),
           array_agg(claim_us ORDER BY r),
           array_agg(submitted_us ORDER BY r)
    FROM ranked WHERE r <= 40
    GROUP BY expert_id
    ORDER BY expert_id
    ON CONFLICT (expert_id) DO UPDATE
    SET assignment_ids = EXCLUDED.assignment_ids, skills = EXCLUDED.skills,
        claim_us = EXCLUDED.claim_us, submitted_us = EXCLUDED.submitted_us;
END
$$;

--
-- Name: taskroute_pace_row(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_pace_row() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_submitted bigint := (extract(epoch FROM NEW.submitted_at) * 1000000)::bigint;
BEGIN
    UPDATE expert_pace p
    SET assignment_ids = (NEW.id || p.assignment_ids)[1:40],
        skills = ((SELECT t.skill FROM tasks t WHERE t.id = NEW.task_id) || p.skills)[1:40],
        claim_us = ((extract(epoch FROM NEW.submitted_at - NEW.claimed_at) * 1000000)::bigint
                    || p.claim_us)[1:40],
        submitted_us = (v_submitted || p.submitted_us)[1:40]
    WHERE p.expert_id = NEW.expert_id
      AND v_submitted >= p.submitted_us[1]
      AND NOT NEW.id = ANY (p.assignment_ids)
      AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = NEW.task_id);
    IF NOT FOUND THEN
        PERFORM taskroute_pace_merge(ARRAY[NEW.id], ARRAY[NEW.expert_id], ARRAY[NEW.task_id],
                                     ARRAY[NEW.claimed_at], ARRAY[NEW.submitted_at]);
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: taskroute_pace_statement(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_pace_statement() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM taskroute_pace_merge(array_agg(id), array_agg(expert_id), array_agg(task_id),
                                 array_agg(claimed_at), array_agg(submitted_at))
    FROM new_rows WHERE status = 'submitted'
    HAVING count(*) > 0;
    RETURN NULL;
END
$$;

--
-- Name: taskroute_pause_llr(integer, integer, double precision, double precision); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_pause_llr(p_correct integer, p_wrong integer, p_bar double precision, p_trusted double precision) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    WITH t AS (
        SELECT p_correct * ln(g.p / p_trusted) + p_wrong * ln((1 - g.p) / (1 - p_trusted)) AS v
        FROM (SELECT p_bar * (i - 0.5) / 64 AS p FROM generate_series(1, 64) i) g
        WHERE p_bar > 0
    )
    SELECT m.top + ln(avg(exp(greatest(t.v - m.top, -700))))
    FROM t, (SELECT max(v) AS top FROM t) m
    GROUP BY m.top
$$;

--
-- Name: taskroute_pause_skill(uuid, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_pause_skill(p_expert uuid, p_skill text, p_reason text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_paused uuid;
    v_row record;
    v_opened jsonb := '[]';
BEGIN
    -- p_expert expert_id, p_skill skill, p_reason reason. A status change with reason and time, never a delete.
UPDATE expert_skills SET status = 'paused', status_reason = p_reason, status_at = taskroute_now()
WHERE expert_id = p_expert AND skill = p_skill AND status = 'active'
RETURNING expert_id INTO v_paused;
    IF v_paused IS NULL THEN
        RETURN NULL;
    END IF;
    FOR v_row IN -- p_expert expert_id, p_skill skill. Gives the expert's live claims on the skill back (task row first,
-- then the assignment): slots reopen, a gold serving is canceled (the item stays in the pool).
WITH held AS (
    SELECT t.id, t.assignment_id
    FROM tasks t
    JOIN assignments a ON a.id = t.assignment_id
    WHERE t.status = 'claimed' AND t.skill = p_skill AND a.expert_id = p_expert AND a.status = 'active'
    FOR UPDATE OF t
),
released AS (
    UPDATE tasks t
    SET status = CASE WHEN t.kind = 'gold' THEN 'canceled' ELSE 'open' END,
        assignment_id = NULL, lease_until = NULL
    FROM held h WHERE t.id = h.id
    RETURNING t.id, h.assignment_id, t.skill, t.project_id, t.status, t.min_quality
),
released_assignments AS (
    UPDATE assignments a SET status = 'released'
    FROM released r WHERE a.id = r.assignment_id AND a.status = 'active'
)
SELECT id, skill, project_id, status, min_quality FROM released LOOP
        IF v_row.status = 'open' THEN
            v_opened := v_opened || jsonb_build_object(
                'skill', v_row.skill, 'project_id', v_row.project_id,
                'min_quality', v_row.min_quality);
        END IF;
    END LOOP;
    RETURN v_opened;
END
$$;

--
-- Name: taskroute_project_settle(uuid, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_project_settle(p_project uuid, p_probe boolean) RETURNS text
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_status text;
    v_timeout text;
    v_found boolean := false;
BEGIN
    IF p_probe THEN
        -- The probe must never wait: a submit gets here holding its project's result-feed
        -- lock, and the submit that holds the probed row may be waiting for that lock.
        -- SKIP LOCKED does not cover every wait (Postgres 15 waits when it follows a row's
        -- update chain, "while locking updated version"), which deadlocked two submits of
        -- one project. So the probe runs under a short lock_timeout in a subtransaction; if
        -- it would wait, it is treated as finding nothing and the lock below decides.
        v_timeout := current_setting('lock_timeout');
        BEGIN
            PERFORM set_config('lock_timeout', '20ms', true);
            PERFORM 1 FROM (-- p_project project_id. One claimed slot of the project that no other transaction is changing,
-- locked FOR SHARE to commit (see taskroute_project_settle). Claimed first: claims skip
-- locked rows, and an open slot locked here would be hidden from them for a moment.
SELECT t.id FROM tasks t
WHERE t.project_id = p_project AND t.status = 'claimed' AND t.kind <> 'gold'
LIMIT 1
FOR SHARE SKIP LOCKED) w;
            v_found := FOUND;
            IF NOT v_found THEN
                PERFORM 1 FROM (-- p_project project_id. The same for open and pending slots.
SELECT t.id FROM tasks t
WHERE t.project_id = p_project AND t.status IN ('open', 'pending') AND t.kind <> 'gold'
LIMIT 1
FOR SHARE SKIP LOCKED) w;
                v_found := FOUND;
            END IF;
            PERFORM set_config('lock_timeout', v_timeout, true);
        EXCEPTION WHEN lock_not_available THEN
            PERFORM set_config('lock_timeout', v_timeout, true);
            v_found := false;
        END;
        IF v_found THEN
            RETURN NULL;
        END IF;
    END IF;
    PERFORM pg_advisory_xact_lock(-- p_project project_id. The advisory-lock key that orders completion against new work (two int4s).
2052915213, hashtext(p_project::uuid::text));
    -- p_project project_id. Run holding the settle lock, as a statement of its own: its snapshot is
-- taken after the lock was granted, so it sees every transaction that held the lock before.
-- Completed when there is work and none is left, else active (ingesting and canceled
-- projects stay as they are). Returns the new status when it changed.
UPDATE projects p
SET status = s.status,
    completed_at = CASE WHEN s.status = 'completed' THEN taskroute_now() END
FROM (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.project_id = p_project AND t.kind <> 'gold')
                     AND NOT -- p_project project_id. A predicate: work remains (tasks_project_status probes, then the few
-- ingest jobs of the project).
(EXISTS (SELECT 1 FROM tasks t
         WHERE t.project_id = p_project AND t.status IN ('pending', 'open', 'claimed')
           AND t.kind <> 'gold')
 OR EXISTS (SELECT 1 FROM ingest_jobs j
            WHERE j.project_id = p_project AND j.state IN ('queued', 'running', 'retrying')))
                THEN 'completed' ELSE 'active' END AS status
) s
WHERE p.id = p_project AND p.status IN ('active', 'completed') AND p.status <> s.status
RETURNING p.status INTO v_status;
    RETURN v_status;
END
$$;

--
-- Name: taskroute_resolve_item(uuid, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_resolve_item(p_item uuid, p_refill boolean) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    st record;
    v_group record;
    v_rank integer := 0;
    v_normal integer;
    v_adjudicated jsonb;
    v_top jsonb;
    v_top_n integer := 0;
    v_top_missing boolean := false;
    v_second_n integer;
    v_share float8;
    v_agreement real;
    v_status text;
    v_answer jsonb;
    v_method text;
    v_missing integer;
    v_live boolean;
    v_was boolean;
    v_change text;
    v_version integer;
    v_row record;
    v_opened jsonb := '[]';
    v_weighted boolean;
    v_best record;
    v_confidence real;
    v_want integer := 0;
    v_pay record;
    v_pay_all boolean;
BEGIN
    PERFORM 1 FROM (-- p_item item_id. Locks the item: serialises the resolution of its racing last answers.
SELECT id FROM items WHERE id = p_item FOR NO KEY UPDATE) l;
    -- p_item item_id. What resolving the item needs: policy, live normal slots, the current result.
-- Run after item_lock, as its own statement: a statement that waited for the lock reads the
-- other tables as of its start, so counts and versions written by the racing submit that held
-- the lock would be missed (two answers 3 ms apart each saw the other's slot as still live).
SELECT i.id AS item_id, i.project_id, p.redundancy, p.status AS project_status,
       q.answer_field, q.agreement_threshold, q.adjudication_min_quality, q.adjudicate,
       q.resolution, q.answer_choices, q.confidence_threshold,
       least(p.redundancy, coalesce(q.min_answers, p.redundancy)) AS min_answers,
       (SELECT count(*) FROM tasks t WHERE t.item_id = i.id AND t.kind = 'normal'
          AND t.status IN ('pending', 'open', 'claimed')) AS live_slots,
       r.status AS result_status, r.answer AS result_answer, r.agreement AS result_agreement,
       r.method AS result_method, coalesce(r.version, 0) AS version
FROM items i
JOIN projects p ON p.id = i.project_id
JOIN project_quality q ON q.project_id = i.project_id
LEFT JOIN item_results r ON r.item_id = i.id
WHERE i.id = p_item INTO st;
    v_weighted := st.resolution = 'weighted';
    -- a completed project takes work again (a retraction's refill reopens it, issue 13)
    v_live := st.project_status IN ('active', 'completed');

    SELECT count(*) FILTER (WHERE v.kind = 'normal'),
           (array_agg(v.answer ORDER BY v.submitted_at DESC, v.id DESC)
                FILTER (WHERE v.kind = 'adjudication'))[1]
    INTO v_normal, v_adjudicated
    FROM (-- p_item item_id. Answers that count: submitted, not retracted, on a normal or adjudication task.
SELECT a.id, a.answer, t.kind, a.submitted_at
FROM assignments a JOIN tasks t ON t.id = a.task_id
WHERE a.item_id = p_item AND a.status = 'submitted' AND a.retracted_at IS NULL
  AND t.kind IN ('normal', 'adjudication')
ORDER BY a.submitted_at, a.id) v;

    -- The two largest groups of normal answers by compared key (NULL key: field missing),
    -- ties broken by who answered first; each group's earliest answer stands for it.
    FOR v_group IN
        WITH n AS (
            SELECT v.answer, taskroute_answer_key(v.answer, st.answer_field) AS k,
                   row_number() OVER (ORDER BY v.submitted_at, v.id) AS ord
            FROM (-- p_item item_id. Answers that count: submitted, not retracted, on a normal or adjudication task.
SELECT a.id, a.answer, t.kind, a.submitted_at
FROM assignments a JOIN tasks t ON t.id = a.task_id
WHERE a.item_id = p_item AND a.status = 'submitted' AND a.retracted_at IS NULL
  AND t.kind IN ('normal', 'adjudication')
ORDER BY a.submitted_at, a.id) v
            WHERE v.kind = 'normal'
        ),
        g AS (SELECT n.k, count(*)::int AS size, min(n.ord) AS first FROM n GROUP BY n.k)
        SELECT g.k IS NULL AS missing, g.size,
               (SELECT n.answer FROM n WHERE n.ord = g.first) AS answer
        FROM g ORDER BY g.size DESC, g.first LIMIT 2
    LOOP
        v_rank := v_rank + 1;
        IF v_rank = 1 THEN
            v_top := v_group.answer;
            v_top_n := v_group.size;
            v_top_missing := v_group.missing;
        ELSE
            v_second_n := v_group.size;
        END IF;
    END LOOP;

    IF v_weighted THEN
        -- The heaviest answer group (earliest on a tie) and its probability; log-sum-exp
        -- with the largest score (or 0, the score of an answer nobody gave) subtracted.
        -- An adjudication answer weighs in like any other; `size` counts normal answers only
        -- (agreement is the share of the item's answers that match the result).
        WITH w AS (
            SELECT w.answer, w.k, w.weight, w.kind,
                   row_number() OVER (ORDER BY w.submitted_at, w.id) AS ord
            FROM (-- p_item item_id, st.answer_field answer_field, st.answer_choices answer_choices. The valid answers (normal and adjudication:
-- an adjudicator is one more expert, weighed like the others) with their kind, what they are
-- compared on (k, NULL: field missing) and their weight: the log-odds that the expert is right
-- against one particular wrong answer under the one-coin model, ln(q / (1 - q)) + ln(choices - 1),
-- where q = (1 + correct) / (2 + gold answers) is their measured accuracy in the item's skill
-- (0.5 before any gold). Never negative: an expert no better than chance counts nothing.
SELECT a.id, a.answer, a.submitted_at, t.kind, taskroute_answer_key(a.answer, st.answer_field) AS k,
       greatest(0, ln(r.q / (1 - r.q)) + ln(st.answer_choices::int - 1)) AS weight
FROM assignments a
JOIN tasks t ON t.id = a.task_id AND t.kind IN ('normal', 'adjudication')
LEFT JOIN expert_skills es ON es.expert_id = a.expert_id AND es.skill = t.skill
CROSS JOIN LATERAL (
    SELECT least((1 + coalesce(es.gold_correct, 0))::float8 / (2 + coalesce(es.gold_seen, 0)),
                 0.999) AS q
) r
WHERE a.item_id = p_item AND a.status = 'submitted' AND a.retracted_at IS NULL) w
        ),
        g AS (
            SELECT w.k, (count(*) FILTER (WHERE w.kind = 'normal'))::int AS size,
                   sum(w.weight) AS score, min(w.ord) AS first
            FROM w WHERE w.k IS NOT NULL GROUP BY w.k
        ),
        m AS (SELECT greatest(max(g.score), 0) AS top FROM g)
        SELECT g.size, (SELECT w.answer FROM w WHERE w.ord = g.first) AS answer,
               exp(greatest(g.score - m.top, -700))
               / (sum(exp(greatest(g.score - m.top, -700))) OVER ()
                  + greatest(st.answer_choices - count(*) OVER (), 0)
                    * exp(greatest(-m.top, -700))) AS confidence
        INTO v_best
        FROM g, m
        ORDER BY g.score DESC, g.first
        LIMIT 1;
        IF FOUND THEN
            v_top := v_best.answer;
            v_top_n := v_best.size;
            v_confidence := v_best.confidence;
        ELSE
            v_confidence := 0;
        END IF;
        -- Dynamic overlap: while not confident and below the cap, keep one slot live (and at
        -- least min_answers answers or slots), never more than the cap.
        IF NOT (v_normal >= st.min_answers
                AND v_confidence >= st.confidence_threshold - 1e-6) THEN
            v_want := least(
                greatest(st.min_answers - v_normal - st.live_slots,
                         CASE WHEN st.live_slots = 0 THEN 1 ELSE 0 END),
                st.redundancy - v_normal - st.live_slots);
        END IF;
    ELSIF p_refill THEN
        v_want := st.redundancy - v_normal - st.live_slots;
    END IF;
    IF v_live AND v_want > 0 THEN
        FOR v_row IN -- p_item item_id, v_want how many. New open slots for relabelling, copied from the item's first slot.
INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, min_quality,
                   max_retries, status, kind)
SELECT t.item_id, t.project_id, t.skill, t.priority, t.eff_priority, t.min_quality,
       t.max_retries, 'open', 'normal'
FROM (SELECT * FROM tasks WHERE item_id = p_item AND kind = 'normal' ORDER BY seq LIMIT 1) t
CROSS JOIN generate_series(1, v_want::int)
RETURNING skill, project_id, min_quality LOOP
            v_opened := v_opened || jsonb_build_object(
                'skill', v_row.skill, 'project_id', v_row.project_id,
                'min_quality', v_row.min_quality);
        END LOOP;
    END IF;

    v_share := CASE WHEN v_normal > 0 THEN v_top_n::float8 / v_normal ELSE 0 END;
    v_agreement := CASE WHEN v_normal > 0 THEN v_share END;
    IF v_weighted AND v_normal >= st.min_answers
       AND v_confidence >= st.confidence_threshold - 1e-6 THEN
        v_status := 'resolved'; v_answer := v_top;
        v_method := CASE WHEN v_adjudicated IS NULL THEN 'weighted' ELSE 'adjudicated' END;
    ELSIF v_normal < st.redundancy THEN
        v_status := 'pending';
    ELSIF NOT v_weighted AND NOT v_top_missing AND v_second_n IS DISTINCT FROM v_top_n
          AND v_share >= st.agreement_threshold - 1e-6 THEN
        v_status := 'resolved'; v_answer := v_top; v_method := 'majority';
    ELSIF v_adjudicated IS NOT NULL THEN
        -- weighted: the heaviest answer with the adjudicator's counted in (one more expert,
        -- not a veto over the others); majority: the adjudicator's answer
        v_status := 'resolved'; v_method := 'adjudicated';
        v_answer := CASE WHEN v_weighted THEN coalesce(v_top, v_adjudicated)
                         ELSE v_adjudicated END;
    ELSIF NOT st.adjudicate THEN
        v_status := 'resolved'; v_answer := v_top;
        v_method := CASE WHEN v_weighted THEN 'weighted-plurality' ELSE 'plurality' END;
    ELSE
        v_status := 'adjudicating';
    END IF;

    IF v_status = 'adjudicating' THEN
        IF v_live THEN
            FOR v_row IN -- p_item item_id, st.adjudication_min_quality min_quality. One live adjudication per item (partial unique index); it sorts
-- ahead of the item's slots and is refused to the experts who answered (task_claim's NOT EXISTS).
INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, min_quality,
                   max_retries, status, kind)
SELECT t.item_id, t.project_id, t.skill, t.priority, t.eff_priority + 1, st.adjudication_min_quality, t.max_retries,
       'open', 'adjudication'
FROM (SELECT * FROM tasks WHERE item_id = p_item AND kind = 'normal' ORDER BY seq LIMIT 1) t
ON CONFLICT (item_id) WHERE kind = 'adjudication' AND status IN ('open', 'claimed') DO NOTHING
RETURNING skill, project_id, min_quality LOOP
                v_opened := v_opened || jsonb_build_object(
                    'skill', v_row.skill, 'project_id', v_row.project_id,
                    'min_quality', v_row.min_quality);
            END LOOP;
        END IF;
    ELSE
        -- p_item item_id. An adjudication nobody holds yet is no longer needed (resolved or back to pending).
UPDATE tasks SET status = 'canceled'
WHERE item_id = p_item AND kind = 'adjudication' AND status = 'open';
    END IF;

    v_was := coalesce(st.result_status = 'resolved', false);
    IF v_status = 'resolved' AND NOT v_was THEN
        v_change := CASE WHEN st.version = 0 THEN 'resolved' ELSE 're-resolved' END;
    ELSIF v_was AND v_status <> 'resolved' THEN
        v_change := 'retracted';
    ELSIF v_status = 'resolved' AND (
            v_answer IS DISTINCT FROM st.result_answer
            OR v_method IS DISTINCT FROM st.result_method
            OR abs(coalesce(v_agreement, 0) - coalesce(st.result_agreement, 0)) > 1e-6) THEN
        v_change := 're-resolved';
    END IF;
    v_version := st.version + (v_change IS NOT NULL)::int;
    -- p_item item_id, st.project_id project_id, v_status status, v_answer answer, v_agreement agreement, v_normal answer count, v_method method,
-- v_version version, v_confidence confidence (weighted rule; NULL otherwise).
INSERT INTO item_results (item_id, project_id, status, answer, agreement, answers, method,
                          version, confidence, updated_at)
VALUES (p_item, st.project_id, v_status, v_answer, v_agreement, v_normal, v_method, v_version, v_confidence, taskroute_now())
ON CONFLICT (item_id) DO UPDATE
SET status = EXCLUDED.status, answer = EXCLUDED.answer, agreement = EXCLUDED.agreement,
    answers = EXCLUDED.answers, method = EXCLUDED.method, version = EXCLUDED.version,
    confidence = EXCLUDED.confidence, updated_at = taskroute_now();
    IF v_change IS NOT NULL THEN
        -- No lock: the feed is read up to a horizon (queries/quality.sql result_feed_horizon).
        -- st.project_id project_id, p_item item_id, v_version version, v_change change, v_answer answer, v_agreement agreement. `xact` is this
-- transaction (its default): the feed's order (migration 0025).
INSERT INTO result_changes (project_id, item_id, version, change, answer, agreement)
VALUES (st.project_id, p_item, v_version, v_change, v_answer, v_agreement);
    END IF;

    -- Payment policy on_acceptance (issue 20): a resolved item decides its undecided answers
    -- (agree: accepted and paid; disagree: rejected, or paid when the project pays
    -- disagreements with an adjudicated result). Decisions stand once made: a later
    -- re-resolution changes the result, not the pay (a retraction is the correction).
    -- On a canceled project an item that can no longer resolve pays its answers.
    -- st.project_id project_id. The policy and what a receipt says will happen.
SELECT payment_policy, pay_adjudicated_disagreements, status,
       CASE payment_policy WHEN 'on_submit' THEN 'paid'
                           WHEN 'on_review' THEN 'pending_review'
                           ELSE 'pending_resolution' END AS pay_status
FROM projects WHERE id = st.project_id INTO v_pay;
    IF v_pay.payment_policy = 'on_acceptance' THEN
        IF v_status = 'resolved' THEN
            v_pay_all := v_method = 'adjudicated' AND v_pay.pay_adjudicated_disagreements;
            -- p_item item_id, st.answer_field answer_field, v_answer the resolved answer, v_pay_all pay disagreements too (an
-- adjudicated item under pay_adjudicated_disagreements). on_acceptance: every undecided valid
-- answer of a resolved item is accepted when it agrees with the result (compared like
-- resolution compares: taskroute_answer_key), else rejected; accepted ones are paid.
WITH locked AS (
    SELECT a.id FROM assignments a JOIN tasks t ON t.id = a.task_id
    WHERE a.item_id = p_item AND a.review_status = 'submitted' AND a.retracted_at IS NULL
      AND t.kind IN ('normal', 'adjudication')
    ORDER BY a.id FOR UPDATE OF a SKIP LOCKED
),
v AS (
    SELECT a.id, coalesce(taskroute_answer_key(a.answer, st.answer_field::text)
                          = taskroute_answer_key(v_answer::jsonb, st.answer_field::text), false) AS agrees
    FROM assignments a JOIN locked l ON l.id = a.id
),
d AS (
    UPDATE assignments a
    SET review_status = CASE WHEN v.agrees OR v_pay_all::boolean THEN 'accepted' ELSE 'rejected' END,
        reviewed_at = taskroute_now(), reviewed_by = 'quality',
        review_reason = CASE WHEN v.agrees THEN 'agrees with the resolved answer'
                             WHEN v_pay_all::boolean THEN 'disagrees with the adjudicated answer;'
                                                   ' paid by the project''s policy'
                             ELSE 'disagrees with the resolved answer' END
    FROM v
    WHERE a.id = v.id AND a.review_status = 'submitted'
    RETURNING a.id, a.expert_id, a.project_id, a.pay_cents, a.review_status
)
INSERT INTO payouts (assignment_id, expert_id, project_id, amount_cents)
SELECT id, expert_id, project_id, pay_cents FROM d WHERE review_status = 'accepted'
ON CONFLICT (assignment_id) DO NOTHING;
        ELSIF NOT v_live THEN
            -- st.project_id project_id, p_item item_id (NULL: every item). Cancel keeps its promise (on_acceptance):
-- an answer whose item can no longer resolve (the project was canceled, no slot of the item
-- is still claimed) is accepted: the expert did the work asked; the customer stopped it.
WITH locked AS (
    SELECT a.id FROM assignments a JOIN projects p ON p.id = a.project_id
    WHERE a.project_id = st.project_id AND (p_item::uuid IS NULL OR a.item_id = p_item)
      AND a.review_status = 'submitted' AND a.retracted_at IS NULL
      AND p.status = 'canceled' AND p.payment_policy = 'on_acceptance'
      AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.item_id = a.item_id AND t.status = 'claimed')
      AND NOT EXISTS (SELECT 1 FROM item_results r
                      WHERE r.item_id = a.item_id AND r.status = 'resolved')
    ORDER BY a.id FOR UPDATE OF a SKIP LOCKED
),
d AS (
    UPDATE assignments a
    SET review_status = 'accepted', reviewed_at = taskroute_now(), reviewed_by = 'canceled',
        review_reason = 'the project was canceled before the item resolved'
    FROM locked l
    WHERE a.id = l.id AND a.review_status = 'submitted'
    RETURNING a.id, a.expert_id, a.project_id, a.pay_cents
)
INSERT INTO payouts (assignment_id, expert_id, project_id, amount_cents)
SELECT id, expert_id, project_id, pay_cents FROM d
ON CONFLICT (assignment_id) DO NOTHING;
        END IF;
    END IF;
    RETURN v_opened;
END
$$;

--
-- Name: taskroute_score_gold(uuid, text, boolean, uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_score_gold(p_expert uuid, p_skill text, p_correct boolean, p_project uuid) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    q record;
    v_rec record;
    v_seen integer;
    v_reason text;
BEGIN
    -- p_project project_id.
SELECT * FROM project_quality WHERE project_id = p_project INTO q;
    -- p_expert expert_id, p_skill skill, p_correct correct (bool), q.pause_below the bar (pause_below), q.trusted_accuracy trusted_accuracy.
-- Records a gold answer; quality becomes the mean of the Beta(1 + correct, 1 + wrong)
-- posterior, pulled toward 0.5 while samples are few; pause_llr the pause test's evidence on
-- the gold answers since the last unpause (functions/quality.sql: taskroute_pause_llr).
UPDATE expert_skills
SET gold_seen = gold_seen + 1,
    gold_correct = gold_correct + p_correct::boolean::int,
    quality = (1 + gold_correct + p_correct::boolean::int)::real / (2 + gold_seen + 1),
    pause_llr = coalesce(taskroute_pause_llr(
        gold_correct + p_correct::boolean::int - pause_correct_from,
        gold_seen + 1 - pause_check_from - (gold_correct + p_correct::boolean::int - pause_correct_from),
        q.pause_below, q.trusted_accuracy), 0)
WHERE expert_id = p_expert AND skill = p_skill
RETURNING gold_seen, gold_correct, quality, status, pause_check_from, pause_correct_from,
          pause_llr
        INTO v_rec;
    IF NOT FOUND OR v_rec.status <> 'active' THEN
        RETURN '[]';
    END IF;
    v_seen := v_rec.gold_seen - v_rec.pause_check_from;
    IF v_seen < q.pause_min_gold THEN
        RETURN '[]';
    END IF;
    IF q.pause_rule = 'sequential' THEN
        IF v_rec.pause_llr IS NULL OR v_rec.pause_llr < ln(1 / q.pause_risk::float8) THEN
            RETURN '[]';
        END IF;
        v_reason := format(
            'sequential test: %s of %s gold answers right since the last unpause; that is %s '
            'times likelier from an expert below %s accuracy than from one at %s '
            '(pausing needs %s times)',
            v_rec.gold_correct - v_rec.pause_correct_from, v_seen,
            round(exp(least(v_rec.pause_llr, 700))::numeric),
            round(q.pause_below::numeric, 2), round(q.trusted_accuracy::numeric, 2),
            round(1 / q.pause_risk::numeric));
    ELSE
        -- real columns against float8 literals: 0.5 is stored as 0.5000000xx
        IF v_rec.quality >= q.pause_below - 1e-6 THEN
            RETURN '[]';
        END IF;
        v_reason := format(
            'gold quality %s below %s after %s gold answers (%s correct)',
            round(v_rec.quality::numeric, 2), round(q.pause_below::numeric, 2),
            v_rec.gold_seen, v_rec.gold_correct);
    END IF;
    RETURN coalesce(taskroute_pause_skill(p_expert, p_skill, v_reason), '[]');
END
$$;

--
-- Name: taskroute_submit(uuid, uuid, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_submit(p_assignment uuid, p_expert uuid, p_answer jsonb) RETURNS TABLE(outcome text, receipt_id uuid, submitted_at timestamp with time zone, pay_cents integer, project_id uuid, opened jsonb, pay_status text)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    v_found record;
    v_task record;
    v_current record;
    v_stored record;
    v_ctx record;
    v_pay record;
    v_correct boolean;
BEGIN
    opened := '[]';
    -- p_assignment assignment_id.
SELECT a.*, a.lease_until > taskroute_now() AS lease_live, p.customer_id,
       p.pay_cents AS project_pay_cents, p.status AS project_status
FROM assignments a JOIN projects p ON p.id = a.project_id
WHERE a.id = p_assignment INTO v_found;
    IF NOT FOUND OR v_found.expert_id <> p_expert THEN
        outcome := 'not_found';
        RETURN NEXT;
        RETURN;
    END IF;
    project_id := v_found.project_id;
    -- v_found.project_id project_id. The policy and what a receipt says will happen.
SELECT payment_policy, pay_adjudicated_disagreements, status,
       CASE payment_policy WHEN 'on_submit' THEN 'paid'
                           WHEN 'on_review' THEN 'pending_review'
                           ELSE 'pending_resolution' END AS pay_status
FROM projects WHERE id = v_found.project_id INTO v_pay;
    pay_status := v_pay.pay_status;
    -- Task first, then assignment: the same lock order as the claim and the sweeper.
    -- v_found.task_id task_id. Serialises submits and claims of one task.
SELECT status, assignment_id, lease_until FROM tasks WHERE id = v_found.task_id FOR UPDATE INTO v_task;
    -- p_assignment assignment_id.
SELECT *, lease_until > taskroute_now() AS lease_live FROM assignments WHERE id = p_assignment FOR UPDATE INTO v_current;
    -- A repeated submit (or a racing one that got here first): the first receipt.
    IF v_current.status = 'submitted' THEN
        outcome := 'already';
        receipt_id := v_current.receipt_id;
        submitted_at := v_current.submitted_at;
        pay_cents := v_current.pay_cents;
        RETURN NEXT;
        RETURN;
    END IF;
    IF v_current.status <> 'active' OR NOT v_current.lease_live
       OR v_task.assignment_id IS DISTINCT FROM p_assignment OR v_task.status <> 'claimed' THEN
        outcome := 'expired';
        RETURN NEXT;
        RETURN;
    END IF;
    -- p_assignment assignment_id, p_answer answer, v_found.project_pay_cents pay_cents, v_pay.payment_policy payment_policy. Stores the answer and the
-- receipt, and opens the review: accepted at once under on_submit (the payment line follows
-- in the same transaction), else undecided (queries/ledger.sql decides it later). The caller
-- holds the row locked and checked it is live (assignment_lock), so it is named by primary
-- key alone: no status literal for a partial index (assignments_one_active) to match.
UPDATE assignments
SET status = 'submitted', answer = p_answer, submitted_at = taskroute_now(), receipt_id = gen_random_uuid(),
    pay_cents = v_found.project_pay_cents,
    review_status = CASE WHEN v_pay.payment_policy::text = 'on_submit' THEN 'accepted' ELSE 'submitted' END,
    reviewed_at = CASE WHEN v_pay.payment_policy::text = 'on_submit' THEN taskroute_now() END,
    reviewed_by = CASE WHEN v_pay.payment_policy::text = 'on_submit' THEN 'policy' END
WHERE id = p_assignment
RETURNING receipt_id, submitted_at, pay_cents INTO v_stored;
    -- v_found.task_id task_id, p_assignment assignment_id. The caller holds the row (task_lock) and checked that this
-- live assignment holds it (so it is claimed); no status literal, so the primary key is the
-- only index that fits (see assignment_heartbeat on the claimed indexes and stale statistics).
UPDATE tasks SET status = 'done', lease_until = NULL
WHERE id = v_found.task_id AND assignment_id = p_assignment;
    -- Paid at submit only under on_submit; otherwise the acceptance pays (queries/ledger.sql).
    IF v_pay.payment_policy = 'on_submit' THEN
        -- p_assignment assignment_id, p_expert expert_id, v_found.project_id project_id, v_found.project_pay_cents amount. One line per assignment, ever.
INSERT INTO payouts (assignment_id, expert_id, project_id, amount_cents)
VALUES (p_assignment, p_expert, v_found.project_id, v_found.project_pay_cents)
ON CONFLICT (assignment_id) DO NOTHING;
    END IF;

    -- v_found.task_id task_id. What scoring and resolution need about a just-submitted task.
SELECT t.kind, t.skill, t.item_id, t.project_id, i.gold_answer, q.answer_field
FROM tasks t
JOIN items i ON i.id = t.item_id
JOIN project_quality q ON q.project_id = t.project_id
WHERE t.id = v_found.task_id INTO v_ctx;
    -- p_expert expert_id, v_ctx.skill skill. Counts a submitted task (drives the onboarding gold share).
UPDATE expert_skills SET tasks_done = tasks_done + 1 WHERE expert_id = p_expert AND skill = v_ctx.skill;
    IF v_ctx.kind = 'gold' THEN
        v_correct := taskroute_gold_correct(p_answer, v_ctx.gold_answer, v_ctx.answer_field);
        -- on_acceptance: decided (and paid if correct) when real work would be
        PERFORM taskroute_gold_submitted(p_assignment);
        opened := taskroute_score_gold(p_expert, v_ctx.skill, v_correct, v_ctx.project_id);
    ELSE
        opened := taskroute_resolve_item(v_ctx.item_id, false);
        -- The last slot done (and no adjudication or refill opened): completed (issue 13).
        PERFORM taskroute_project_settle(v_ctx.project_id, true);
    END IF;
    outcome := 'stored';
    receipt_id := v_stored.receipt_id;
    submitted_at := v_stored.submitted_at;
    pay_cents := v_stored.pay_cents;
    RETURN NEXT;
END
$$;

--
-- Name: taskroute_task_counts_delta(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_task_counts_delta() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO task_count_deltas (project_id, skill, status, gold, n)
        SELECT project_id, skill, status, kind = 'gold', count(*) FROM new_rows
        GROUP BY 1, 2, 3, 4;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO task_count_deltas (project_id, skill, status, gold, n)
        SELECT project_id, skill, status, kind = 'gold', -count(*) FROM old_rows
        GROUP BY 1, 2, 3, 4;
    ELSE
        INSERT INTO task_count_deltas (project_id, skill, status, gold, n)
        SELECT project_id, skill, status, gold, sum(d) FROM (
            SELECT project_id, skill, status, kind = 'gold' AS gold, 1 AS d FROM new_rows
            UNION ALL
            SELECT project_id, skill, status, kind = 'gold', -1 FROM old_rows
        ) moved
        GROUP BY 1, 2, 3, 4 HAVING sum(d) <> 0;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: taskroute_task_finished(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.taskroute_task_finished() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.finished_at := taskroute_now();
    RETURN NEW;
END
$$;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: admin_audit; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.admin_audit (
    seq bigint NOT NULL,
    at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    actor text NOT NULL,
    action text NOT NULL,
    subject_kind text NOT NULL,
    subject_id uuid,
    reason text,
    details jsonb DEFAULT '{}'::jsonb NOT NULL
);

--
-- Name: admin_audit_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.admin_audit ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.admin_audit_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: assignments; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.assignments (
    id uuid NOT NULL,
    task_id uuid NOT NULL,
    item_id uuid NOT NULL,
    project_id uuid NOT NULL,
    expert_id uuid NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    claimed_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    lease_until timestamp with time zone NOT NULL,
    answer jsonb,
    submitted_at timestamp with time zone,
    receipt_id uuid,
    pay_cents integer,
    retracted_at timestamp with time zone,
    retracted_by text,
    retract_reason text,
    review_status text,
    reviewed_at timestamp with time zone,
    reviewed_by text,
    review_reason text,
    CONSTRAINT assignments_review_status_check CHECK ((review_status = ANY (ARRAY['submitted'::text, 'accepted'::text, 'rejected'::text]))),
    CONSTRAINT assignments_status_check CHECK ((status = ANY (ARRAY['active'::text, 'submitted'::text, 'expired'::text, 'released'::text])))
)
WITH (autovacuum_vacuum_scale_factor='0.0', autovacuum_vacuum_threshold='5000', autovacuum_vacuum_insert_scale_factor='0.0', autovacuum_vacuum_insert_threshold='20000', autovacuum_analyze_scale_factor='0.0', autovacuum_analyze_threshold='5000');

--
-- Name: audit_log; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_log (
    seq bigint NOT NULL,
    expert_id uuid NOT NULL,
    customer_id uuid NOT NULL,
    project_id uuid NOT NULL,
    task_id uuid NOT NULL,
    action text NOT NULL,
    at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL
);

--
-- Name: audit_log_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.audit_log ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.audit_log_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: blob_deletions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.blob_deletions (
    key text NOT NULL,
    project_id uuid NOT NULL,
    queued_at timestamp with time zone NOT NULL,
    kind text DEFAULT 'payload'::text NOT NULL,
    CONSTRAINT blob_deletions_kind_check CHECK ((kind = ANY (ARRAY['payload'::text, 'request'::text])))
);

--
-- Name: credential_last_use; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.credential_last_use (
    credential_id uuid NOT NULL,
    last_used_at timestamp with time zone NOT NULL
);

--
-- Name: credentials; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.credentials (
    token_hash bytea NOT NULL,
    role text NOT NULL,
    customer_id uuid,
    expert_id uuid,
    created_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    revoked_at timestamp with time zone,
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    label text DEFAULT ''::text NOT NULL,
    expires_at timestamp with time zone,
    read_only boolean DEFAULT false NOT NULL,
    project_id uuid,
    rotated_from uuid,
    CONSTRAINT credentials_check CHECK (((role = 'customer'::text) = (customer_id IS NOT NULL))),
    CONSTRAINT credentials_check1 CHECK (((role = 'expert'::text) = (expert_id IS NOT NULL))),
    CONSTRAINT credentials_project_scope CHECK (((project_id IS NULL) OR (role = 'customer'::text))),
    CONSTRAINT credentials_role_check CHECK ((role = ANY (ARRAY['admin'::text, 'customer'::text, 'expert'::text])))
);

--
-- Name: customers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.customers (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL
);

--
-- Name: expert_pace; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.expert_pace (
    expert_id uuid NOT NULL,
    assignment_ids uuid[] NOT NULL,
    skills text[] NOT NULL,
    claim_us bigint[] NOT NULL,
    submitted_us bigint[] NOT NULL
)
WITH (fillfactor='50');

--
-- Name: expert_skills; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.expert_skills (
    expert_id uuid NOT NULL,
    skill text NOT NULL,
    quality real DEFAULT 1.0 NOT NULL,
    gold_seen integer DEFAULT 0 NOT NULL,
    gold_correct integer DEFAULT 0 NOT NULL,
    tasks_done integer DEFAULT 0 NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    status_reason text,
    status_at timestamp with time zone,
    pause_check_from integer DEFAULT 0 NOT NULL,
    pause_llr double precision DEFAULT 0 NOT NULL,
    pause_correct_from integer DEFAULT 0 NOT NULL,
    starting_quality real NOT NULL,
    granted_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    CONSTRAINT expert_skills_status_check CHECK ((status = ANY (ARRAY['active'::text, 'paused'::text])))
);

--
-- Name: experts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.experts (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    capabilities text[] DEFAULT '{}'::text[] NOT NULL,
    last_seen_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    CONSTRAINT experts_status_check CHECK ((status = ANY (ARRAY['active'::text, 'disabled'::text])))
)
WITH (fillfactor='70');

--
-- Name: gold_exposures; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.gold_exposures (
    expert_id uuid NOT NULL,
    item_id uuid NOT NULL,
    assignment_id uuid NOT NULL,
    at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    decide_with uuid,
    pending boolean DEFAULT false NOT NULL
);

--
-- Name: gold_pool; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.gold_pool (
    item_id uuid NOT NULL,
    project_id uuid NOT NULL,
    skill text NOT NULL,
    exposures integer DEFAULT 0 NOT NULL,
    retired_at timestamp with time zone
);

--
-- Name: ingest_chunks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ingest_chunks (
    job_id uuid NOT NULL,
    chunk_no integer NOT NULL,
    first_index integer NOT NULL,
    task_count integer NOT NULL,
    body text,
    body_key text,
    payload_keys text[] NOT NULL,
    CONSTRAINT ingest_chunks_text_in_one_place CHECK (((body IS NULL) <> (body_key IS NULL)))
);
ALTER TABLE ONLY public.ingest_chunks ALTER COLUMN body SET STORAGE EXTERNAL;

--
-- Name: ingest_jobs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ingest_jobs (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    project_id uuid NOT NULL,
    customer_id uuid NOT NULL,
    kind text NOT NULL,
    state text DEFAULT 'queued'::text NOT NULL,
    tasks_total integer NOT NULL,
    tasks_stored integer DEFAULT 0 NOT NULL,
    chunks_left integer NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    error text,
    next_attempt_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    created_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    updated_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT ingest_jobs_kind_check CHECK ((kind = ANY (ARRAY['create'::text, 'add'::text]))),
    CONSTRAINT ingest_jobs_state_check CHECK ((state = ANY (ARRAY['queued'::text, 'running'::text, 'retrying'::text, 'done'::text, 'failed'::text, 'canceled'::text])))
);

--
-- Name: item_results; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.item_results (
    item_id uuid NOT NULL,
    project_id uuid NOT NULL,
    status text NOT NULL,
    answer jsonb,
    agreement real,
    answers integer DEFAULT 0 NOT NULL,
    method text,
    version integer DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    confidence real,
    CONSTRAINT item_results_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'adjudicating'::text, 'resolved'::text])))
);

--
-- Name: items; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.items (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    project_id uuid NOT NULL,
    skill text NOT NULL,
    external_id text,
    payload jsonb,
    payload_key text,
    payload_bytes integer DEFAULT 0 NOT NULL,
    gold_answer jsonb,
    metadata jsonb,
    created_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    answer_schema jsonb,
    payload_deleted_at timestamp with time zone
);

--
-- Name: payouts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.payouts (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    seq bigint NOT NULL,
    assignment_id uuid,
    expert_id uuid NOT NULL,
    project_id uuid NOT NULL,
    amount_cents integer NOT NULL,
    kind text DEFAULT 'payment'::text NOT NULL,
    reverses_id uuid,
    reason text,
    created_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    CONSTRAINT payouts_check CHECK (((kind = 'payment'::text) = (assignment_id IS NOT NULL))),
    CONSTRAINT payouts_check1 CHECK (((kind = 'reversal'::text) = (reverses_id IS NOT NULL))),
    CONSTRAINT payouts_kind_check CHECK ((kind = ANY (ARRAY['payment'::text, 'reversal'::text])))
);

--
-- Name: payouts_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.payouts ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.payouts_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: project_alerts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.project_alerts (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    seq bigint NOT NULL,
    project_id uuid NOT NULL,
    kind text NOT NULL,
    message text NOT NULL,
    remaining integer NOT NULL,
    eta timestamp with time zone,
    deadline timestamp with time zone,
    created_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    CONSTRAINT project_alerts_kind_check CHECK ((kind = ANY (ARRAY['at_risk'::text, 'recovered'::text])))
);

--
-- Name: project_alerts_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.project_alerts ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.project_alerts_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: project_priority_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.project_priority_events (
    seq bigint NOT NULL,
    project_id uuid NOT NULL,
    kind text NOT NULL,
    remaining integer NOT NULL,
    rate_per_second double precision NOT NULL,
    forecast_finish timestamp with time zone,
    deadline timestamp with time zone NOT NULL,
    at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    CONSTRAINT project_priority_events_kind_check CHECK ((kind = ANY (ARRAY['bump'::text, 'unbump'::text])))
);

--
-- Name: project_priority_events_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.project_priority_events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.project_priority_events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: project_quality; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.project_quality (
    project_id uuid NOT NULL,
    gold_ratio real DEFAULT 0.1 NOT NULL,
    exploration_tasks integer DEFAULT 10 NOT NULL,
    exploration_gold_ratio real DEFAULT 0.3 NOT NULL,
    gold_max_exposures integer DEFAULT 50 NOT NULL,
    gold_low_water integer DEFAULT 5 NOT NULL,
    answer_field text,
    agreement_threshold real DEFAULT 0.6 NOT NULL,
    adjudication_min_quality real DEFAULT 0.8 NOT NULL,
    adjudicate boolean DEFAULT true NOT NULL,
    pause_min_gold integer DEFAULT 3 NOT NULL,
    pause_below real DEFAULT 0.5 NOT NULL,
    updated_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    pause_rule text DEFAULT 'sequential'::text NOT NULL,
    trusted_accuracy real DEFAULT 0.75 NOT NULL,
    pause_risk real DEFAULT 0.005 NOT NULL,
    suspect_gold_ratio real DEFAULT 1.0 NOT NULL,
    proven_gold_ratio real DEFAULT 0.05 NOT NULL,
    resolution text DEFAULT 'majority'::text NOT NULL,
    answer_choices integer DEFAULT 2 NOT NULL,
    confidence_threshold real DEFAULT 0.99 NOT NULL,
    min_answers integer,
    clear_evidence real DEFAULT 5 NOT NULL,
    CONSTRAINT project_quality_adjudication_min_quality_check CHECK (((adjudication_min_quality >= (0)::double precision) AND (adjudication_min_quality <= (1)::double precision))),
    CONSTRAINT project_quality_agreement_threshold_check CHECK (((agreement_threshold >= (0)::double precision) AND (agreement_threshold <= (1)::double precision))),
    CONSTRAINT project_quality_answer_choices_check CHECK ((answer_choices >= 2)),
    CONSTRAINT project_quality_clear_evidence_check CHECK ((clear_evidence >= (1)::double precision)),
    CONSTRAINT project_quality_confidence_threshold_check CHECK (((confidence_threshold > (0)::double precision) AND (confidence_threshold < (1)::double precision))),
    CONSTRAINT project_quality_exploration_gold_ratio_check CHECK (((exploration_gold_ratio >= (0)::double precision) AND (exploration_gold_ratio <= (1)::double precision))),
    CONSTRAINT project_quality_exploration_tasks_check CHECK ((exploration_tasks >= 0)),
    CONSTRAINT project_quality_gold_low_water_check CHECK ((gold_low_water >= 0)),
    CONSTRAINT project_quality_gold_max_exposures_check CHECK ((gold_max_exposures > 0)),
    CONSTRAINT project_quality_gold_ratio_check CHECK (((gold_ratio >= (0)::double precision) AND (gold_ratio <= (1)::double precision))),
    CONSTRAINT project_quality_min_answers_check CHECK ((min_answers >= 1)),
    CONSTRAINT project_quality_pause_below_check CHECK (((pause_below >= (0)::double precision) AND (pause_below <= (1)::double precision))),
    CONSTRAINT project_quality_pause_min_gold_check CHECK ((pause_min_gold >= 1)),
    CONSTRAINT project_quality_pause_risk_check CHECK (((pause_risk > (0)::double precision) AND (pause_risk < (1)::double precision))),
    CONSTRAINT project_quality_pause_rule_check CHECK ((pause_rule = ANY (ARRAY['sequential'::text, 'fixed'::text]))),
    CONSTRAINT project_quality_proven_gold_ratio_check CHECK (((proven_gold_ratio >= (0)::double precision) AND (proven_gold_ratio <= (1)::double precision))),
    CONSTRAINT project_quality_resolution_check CHECK ((resolution = ANY (ARRAY['majority'::text, 'weighted'::text]))),
    CONSTRAINT project_quality_suspect_gold_ratio_check CHECK (((suspect_gold_ratio >= (0)::double precision) AND (suspect_gold_ratio <= (1)::double precision))),
    CONSTRAINT project_quality_trusted_accuracy_check CHECK (((trusted_accuracy > (0)::double precision) AND (trusted_accuracy < (1)::double precision)))
);

--
-- Name: project_risk; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.project_risk (
    project_id uuid NOT NULL,
    state text NOT NULL,
    changed_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    evaluated_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    CONSTRAINT project_risk_state_check CHECK ((state = ANY (ARRAY['on_track'::text, 'at_risk'::text])))
);

--
-- Name: projects; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.projects (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    customer_id uuid NOT NULL,
    name text NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    deadline timestamp with time zone,
    lease_seconds integer DEFAULT 1800 NOT NULL,
    pay_cents integer DEFAULT 0 NOT NULL,
    min_quality real DEFAULT 0 NOT NULL,
    redundancy integer DEFAULT 1 NOT NULL,
    max_retries integer DEFAULT 3 NOT NULL,
    created_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    canceled_at timestamp with time zone,
    deadline_bumped boolean DEFAULT false NOT NULL,
    payload_retention interval DEFAULT '30 days'::interval NOT NULL,
    payloads_purged_at timestamp with time zone,
    heartbeat_timeout_seconds integer DEFAULT 300 NOT NULL,
    answer_schema jsonb,
    payment_policy text DEFAULT 'on_submit'::text NOT NULL,
    auto_approve_seconds integer DEFAULT 259200 NOT NULL,
    override_seconds integer DEFAULT 2592000 NOT NULL,
    pay_adjudicated_disagreements boolean DEFAULT true NOT NULL,
    completed_at timestamp with time zone,
    CONSTRAINT projects_auto_approve_seconds_check CHECK (((auto_approve_seconds >= 0) AND (auto_approve_seconds <= 2592000))),
    CONSTRAINT projects_completed_at_check CHECK (((status = 'completed'::text) = (completed_at IS NOT NULL))),
    CONSTRAINT projects_heartbeat_timeout_seconds_check CHECK ((heartbeat_timeout_seconds > 0)),
    CONSTRAINT projects_lease_seconds_check CHECK ((lease_seconds > 0)),
    CONSTRAINT projects_max_retries_check CHECK ((max_retries >= 0)),
    CONSTRAINT projects_override_seconds_check CHECK (((override_seconds >= 0) AND (override_seconds <= 31536000))),
    CONSTRAINT projects_pay_cents_check CHECK ((pay_cents >= 0)),
    CONSTRAINT projects_payload_retention_check CHECK ((payload_retention >= '00:00:00'::interval)),
    CONSTRAINT projects_payload_retention_max CHECK ((payload_retention <= '3650 days'::interval)),
    CONSTRAINT projects_payment_policy_check CHECK ((payment_policy = ANY (ARRAY['on_submit'::text, 'on_acceptance'::text, 'on_review'::text]))),
    CONSTRAINT projects_redundancy_check CHECK (((redundancy >= 1) AND (redundancy <= 5))),
    CONSTRAINT projects_status_check CHECK ((status = ANY (ARRAY['ingesting'::text, 'active'::text, 'completed'::text, 'canceled'::text])))
);

--
-- Name: result_changes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.result_changes (
    seq bigint NOT NULL,
    project_id uuid NOT NULL,
    item_id uuid NOT NULL,
    version integer NOT NULL,
    change text NOT NULL,
    answer jsonb,
    agreement real,
    at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    xact xid8 DEFAULT pg_current_xact_id() NOT NULL,
    CONSTRAINT result_changes_change_check CHECK ((change = ANY (ARRAY['resolved'::text, 're-resolved'::text, 'retracted'::text])))
);

--
-- Name: result_changes_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.result_changes ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.result_changes_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: schema_functions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schema_functions (
    singleton boolean DEFAULT true NOT NULL,
    digest text NOT NULL,
    names text[] NOT NULL,
    installed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schema_functions_singleton_check CHECK (singleton)
);

--
-- Name: schema_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: server_secrets; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.server_secrets (
    name text NOT NULL,
    secret bytea NOT NULL,
    created_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL
);

--
-- Name: skill_scarcity; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.skill_scarcity (
    skill text NOT NULL,
    active_experts integer NOT NULL,
    open_backlog integer NOT NULL,
    updated_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    typical_seconds real,
    backlog_seconds real DEFAULT 0 NOT NULL,
    scarce boolean DEFAULT false NOT NULL
);

--
-- Name: task_count_deltas; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.task_count_deltas (
    project_id uuid NOT NULL,
    skill text NOT NULL,
    status text NOT NULL,
    n integer NOT NULL,
    gold boolean DEFAULT false NOT NULL
);

--
-- Name: task_counts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.task_counts (
    project_id uuid NOT NULL,
    skill text NOT NULL,
    status text NOT NULL,
    n bigint NOT NULL,
    gold boolean DEFAULT false NOT NULL
);

--
-- Name: tasks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.tasks (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    seq bigint NOT NULL,
    item_id uuid NOT NULL,
    project_id uuid NOT NULL,
    skill text NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    eff_priority integer DEFAULT 0 NOT NULL,
    min_quality real DEFAULT 0 NOT NULL,
    status text NOT NULL,
    assignment_id uuid,
    lease_until timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    max_retries integer DEFAULT 3 NOT NULL,
    created_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    kind text DEFAULT 'normal'::text NOT NULL,
    required_caps text[] DEFAULT '{}'::text[] NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT tasks_kind_check CHECK ((kind = ANY (ARRAY['normal'::text, 'gold'::text, 'adjudication'::text]))),
    CONSTRAINT tasks_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'open'::text, 'claimed'::text, 'done'::text, 'failed'::text, 'canceled'::text])))
)
WITH (autovacuum_vacuum_scale_factor='0.0', autovacuum_vacuum_threshold='5000', autovacuum_vacuum_insert_scale_factor='0.0', autovacuum_vacuum_insert_threshold='20000', autovacuum_analyze_scale_factor='0.0', autovacuum_analyze_threshold='5000');

--
-- Name: tasks_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.tasks ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.tasks_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: wake_deliveries; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.wake_deliveries (
    id bigint NOT NULL,
    ticket text NOT NULL,
    subscriber bigint NOT NULL,
    expert_id uuid NOT NULL,
    skill text NOT NULL,
    project_id uuid NOT NULL,
    min_quality real DEFAULT 0 NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    woken_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    due_at timestamp with time zone NOT NULL
);

--
-- Name: wake_deliveries_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.wake_deliveries ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.wake_deliveries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: wake_tickets; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.wake_tickets (
    key text NOT NULL,
    announced integer NOT NULL,
    taken integer NOT NULL,
    last_take integer NOT NULL,
    created_at timestamp with time zone DEFAULT public.taskroute_now() NOT NULL,
    CONSTRAINT wake_tickets_announced_check CHECK ((announced > 0)),
    CONSTRAINT wake_tickets_check CHECK (((taken >= 0) AND (taken <= announced)))
);

--
-- Name: admin_audit admin_audit_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.admin_audit
    ADD CONSTRAINT admin_audit_pkey PRIMARY KEY (seq);

--
-- Name: assignments assignments_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.assignments
    ADD CONSTRAINT assignments_pkey PRIMARY KEY (id);

--
-- Name: assignments assignments_receipt_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.assignments
    ADD CONSTRAINT assignments_receipt_id_key UNIQUE (receipt_id);

--
-- Name: audit_log audit_log_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (seq);

--
-- Name: blob_deletions blob_deletions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.blob_deletions
    ADD CONSTRAINT blob_deletions_pkey PRIMARY KEY (key);

--
-- Name: credential_last_use credential_last_use_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.credential_last_use
    ADD CONSTRAINT credential_last_use_pkey PRIMARY KEY (credential_id);

--
-- Name: credentials credentials_id_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.credentials
    ADD CONSTRAINT credentials_id_unique UNIQUE (id);

--
-- Name: credentials credentials_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.credentials
    ADD CONSTRAINT credentials_pkey PRIMARY KEY (token_hash);

--
-- Name: customers customers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.customers
    ADD CONSTRAINT customers_pkey PRIMARY KEY (id);

--
-- Name: expert_pace expert_pace_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.expert_pace
    ADD CONSTRAINT expert_pace_pkey PRIMARY KEY (expert_id);

--
-- Name: expert_skills expert_skills_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.expert_skills
    ADD CONSTRAINT expert_skills_pkey PRIMARY KEY (expert_id, skill);

--
-- Name: experts experts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.experts
    ADD CONSTRAINT experts_pkey PRIMARY KEY (id);

--
-- Name: gold_exposures gold_exposures_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.gold_exposures
    ADD CONSTRAINT gold_exposures_pkey PRIMARY KEY (expert_id, item_id);

--
-- Name: gold_pool gold_pool_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.gold_pool
    ADD CONSTRAINT gold_pool_pkey PRIMARY KEY (item_id);

--
-- Name: ingest_chunks ingest_chunks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ingest_chunks
    ADD CONSTRAINT ingest_chunks_pkey PRIMARY KEY (job_id, chunk_no);

--
-- Name: ingest_jobs ingest_jobs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ingest_jobs
    ADD CONSTRAINT ingest_jobs_pkey PRIMARY KEY (id);

--
-- Name: item_results item_results_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.item_results
    ADD CONSTRAINT item_results_pkey PRIMARY KEY (item_id);

--
-- Name: items items_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.items
    ADD CONSTRAINT items_pkey PRIMARY KEY (id);

--
-- Name: items items_project_id_external_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.items
    ADD CONSTRAINT items_project_id_external_id_key UNIQUE (project_id, external_id);

--
-- Name: payouts payouts_assignment_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_assignment_id_key UNIQUE (assignment_id);

--
-- Name: payouts payouts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_pkey PRIMARY KEY (id);

--
-- Name: payouts payouts_reverses_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_reverses_id_key UNIQUE (reverses_id);

--
-- Name: payouts payouts_seq_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_seq_key UNIQUE (seq);

--
-- Name: project_alerts project_alerts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.project_alerts
    ADD CONSTRAINT project_alerts_pkey PRIMARY KEY (id);

--
-- Name: project_alerts project_alerts_seq_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.project_alerts
    ADD CONSTRAINT project_alerts_seq_key UNIQUE (seq);

--
-- Name: project_priority_events project_priority_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.project_priority_events
    ADD CONSTRAINT project_priority_events_pkey PRIMARY KEY (seq);

--
-- Name: project_quality project_quality_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.project_quality
    ADD CONSTRAINT project_quality_pkey PRIMARY KEY (project_id);

--
-- Name: project_risk project_risk_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.project_risk
    ADD CONSTRAINT project_risk_pkey PRIMARY KEY (project_id);

--
-- Name: projects projects_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.projects
    ADD CONSTRAINT projects_pkey PRIMARY KEY (id);

--
-- Name: result_changes result_changes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.result_changes
    ADD CONSTRAINT result_changes_pkey PRIMARY KEY (seq);

--
-- Name: schema_functions schema_functions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schema_functions
    ADD CONSTRAINT schema_functions_pkey PRIMARY KEY (singleton);

--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

--
-- Name: server_secrets server_secrets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.server_secrets
    ADD CONSTRAINT server_secrets_pkey PRIMARY KEY (name);

--
-- Name: skill_scarcity skill_scarcity_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.skill_scarcity
    ADD CONSTRAINT skill_scarcity_pkey PRIMARY KEY (skill);

--
-- Name: task_counts task_counts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.task_counts
    ADD CONSTRAINT task_counts_pkey PRIMARY KEY (project_id, skill, status, gold);

--
-- Name: tasks tasks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_pkey PRIMARY KEY (id);

--
-- Name: wake_deliveries wake_deliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.wake_deliveries
    ADD CONSTRAINT wake_deliveries_pkey PRIMARY KEY (id);

--
-- Name: wake_tickets wake_tickets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.wake_tickets
    ADD CONSTRAINT wake_tickets_pkey PRIMARY KEY (key);

--
-- Name: admin_audit_action; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX admin_audit_action ON public.admin_audit USING btree (action, seq);

--
-- Name: admin_audit_subject; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX admin_audit_subject ON public.admin_audit USING btree (subject_id, seq);

--
-- Name: assignments_claimed_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX assignments_claimed_at ON public.assignments USING btree (claimed_at);

--
-- Name: assignments_expert; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX assignments_expert ON public.assignments USING btree (expert_id, claimed_at);

--
-- Name: assignments_expert_item; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX assignments_expert_item ON public.assignments USING btree (item_id, expert_id) WHERE (status = ANY (ARRAY['active'::text, 'submitted'::text]));

--
-- Name: assignments_expert_review_pending; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX assignments_expert_review_pending ON public.assignments USING btree (expert_id) WHERE (review_status = 'submitted'::text);

--
-- Name: assignments_one_active; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX assignments_one_active ON public.assignments USING btree (expert_id) WHERE (status = 'active'::text);

--
-- Name: assignments_project; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX assignments_project ON public.assignments USING btree (project_id, submitted_at);

--
-- Name: assignments_project_review; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX assignments_project_review ON public.assignments USING btree (project_id, submitted_at, id) WHERE (review_status IS NOT NULL);

--
-- Name: assignments_review_pending; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX assignments_review_pending ON public.assignments USING btree (submitted_at) WHERE (review_status = 'submitted'::text);

--
-- Name: assignments_submitted_recent; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX assignments_submitted_recent ON public.assignments USING btree (submitted_at) WHERE (status = 'submitted'::text);

--
-- Name: audit_log_customer; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_customer ON public.audit_log USING btree (customer_id, seq);

--
-- Name: audit_log_expert; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_expert ON public.audit_log USING btree (expert_id, seq);

--
-- Name: audit_log_project; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_project ON public.audit_log USING btree (project_id, seq);

--
-- Name: credentials_customer; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX credentials_customer ON public.credentials USING btree (customer_id, created_at) WHERE (customer_id IS NOT NULL);

--
-- Name: credentials_expert; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX credentials_expert ON public.credentials USING btree (expert_id, created_at) WHERE (expert_id IS NOT NULL);

--
-- Name: gold_exposures_pending; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX gold_exposures_pending ON public.gold_exposures USING btree (decide_with) WHERE pending;

--
-- Name: gold_pool_project; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX gold_pool_project ON public.gold_pool USING btree (project_id, skill);

--
-- Name: gold_pool_serve; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX gold_pool_serve ON public.gold_pool USING btree (skill, exposures) WHERE (retired_at IS NULL);

--
-- Name: ingest_jobs_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ingest_jobs_due ON public.ingest_jobs USING btree (next_attempt_at) WHERE (state = ANY (ARRAY['queued'::text, 'running'::text, 'retrying'::text]));

--
-- Name: ingest_jobs_project; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ingest_jobs_project ON public.ingest_jobs USING btree (project_id, created_at);

--
-- Name: item_results_resolved; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX item_results_resolved ON public.item_results USING btree (project_id, item_id) WHERE (status = 'resolved'::text);

--
-- Name: items_payload_key_kept; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX items_payload_key_kept ON public.items USING btree (payload_key) WHERE ((payload_key IS NOT NULL) AND (payload_deleted_at IS NULL));

--
-- Name: items_project; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX items_project ON public.items USING btree (project_id);

--
-- Name: payouts_expert; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payouts_expert ON public.payouts USING btree (expert_id, seq);

--
-- Name: payouts_project; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payouts_project ON public.payouts USING btree (project_id, seq);

--
-- Name: project_alerts_project; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX project_alerts_project ON public.project_alerts USING btree (project_id, seq);

--
-- Name: project_priority_events_project; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX project_priority_events_project ON public.project_priority_events USING btree (project_id, seq);

--
-- Name: projects_customer; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX projects_customer ON public.projects USING btree (customer_id, created_at DESC);

--
-- Name: result_changes_feed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX result_changes_feed ON public.result_changes USING btree (project_id, xact, seq);

--
-- Name: result_changes_project; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX result_changes_project ON public.result_changes USING btree (project_id, seq);

--
-- Name: task_count_deltas_project; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX task_count_deltas_project ON public.task_count_deltas USING btree (project_id);

--
-- Name: tasks_claimed_expiry; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tasks_claimed_expiry ON public.tasks USING btree (lease_until) WHERE (status = 'claimed'::text);

--
-- Name: tasks_claimed_lease; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tasks_claimed_lease ON public.tasks USING btree (skill, lease_until) WHERE (status = 'claimed'::text);

--
-- Name: tasks_item; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tasks_item ON public.tasks USING btree (item_id);

--
-- Name: tasks_one_adjudication; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX tasks_one_adjudication ON public.tasks USING btree (item_id) WHERE ((kind = 'adjudication'::text) AND (status = ANY (ARRAY['open'::text, 'claimed'::text])));

--
-- Name: tasks_open_claim; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tasks_open_claim ON public.tasks USING btree (skill, eff_priority DESC, seq) WHERE (status = 'open'::text);

--
-- Name: tasks_open_project; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tasks_open_project ON public.tasks USING btree (project_id, skill, eff_priority DESC, seq) WHERE (status = 'open'::text);

--
-- Name: tasks_project_skill_live; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tasks_project_skill_live ON public.tasks USING btree (project_id, skill) WHERE (status = ANY (ARRAY['open'::text, 'pending'::text, 'claimed'::text]));

--
-- Name: tasks_project_status; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tasks_project_status ON public.tasks USING btree (project_id, status);

--
-- Name: wake_deliveries_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX wake_deliveries_due ON public.wake_deliveries USING btree (due_at);

--
-- Name: wake_tickets_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX wake_tickets_created ON public.wake_tickets USING btree (created_at);

--
-- Name: assignments assignments_gold_twins; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER assignments_gold_twins AFTER UPDATE OF review_status ON public.assignments FOR EACH ROW WHEN (((old.review_status = 'submitted'::text) AND (new.review_status <> 'submitted'::text))) EXECUTE FUNCTION public.assignments_decide_gold_twins();

--
-- Name: assignments assignments_pace_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER assignments_pace_insert AFTER INSERT ON public.assignments REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.taskroute_pace_statement();

--
-- Name: assignments assignments_pace_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER assignments_pace_update AFTER UPDATE OF status, claimed_at, submitted_at ON public.assignments FOR EACH ROW WHEN (((new.status = 'submitted'::text) AND (((old.status IS DISTINCT FROM new.status) OR (old.claimed_at IS DISTINCT FROM new.claimed_at)) OR (old.submitted_at IS DISTINCT FROM new.submitted_at)))) EXECUTE FUNCTION public.taskroute_pace_row();

--
-- Name: credentials credentials_invalidate_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER credentials_invalidate_delete AFTER DELETE ON public.credentials FOR EACH ROW EXECUTE FUNCTION public.credentials_notify_invalidation();

--
-- Name: credentials credentials_invalidate_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER credentials_invalidate_truncate AFTER TRUNCATE ON public.credentials FOR EACH STATEMENT EXECUTE FUNCTION public.credentials_notify_invalidation();

--
-- Name: credentials credentials_invalidate_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER credentials_invalidate_update AFTER UPDATE ON public.credentials FOR EACH ROW WHEN ((old.* IS DISTINCT FROM new.*)) EXECUTE FUNCTION public.credentials_notify_invalidation();

--
-- Name: experts experts_invalidate_status; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER experts_invalidate_status AFTER UPDATE OF status ON public.experts FOR EACH ROW WHEN ((old.status IS DISTINCT FROM new.status)) EXECUTE FUNCTION public.experts_notify_status();

--
-- Name: items items_gold_pool; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER items_gold_pool AFTER INSERT ON public.items FOR EACH ROW WHEN ((new.gold_answer IS NOT NULL)) EXECUTE FUNCTION public.gold_pool_add();

--
-- Name: payouts payouts_no_update_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER payouts_no_update_delete BEFORE DELETE OR UPDATE ON public.payouts FOR EACH ROW EXECUTE FUNCTION public.payouts_append_only();

--
-- Name: projects projects_quality_default; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER projects_quality_default AFTER INSERT ON public.projects FOR EACH ROW EXECUTE FUNCTION public.project_quality_default();

--
-- Name: tasks tasks_count_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER tasks_count_delete AFTER DELETE ON public.tasks REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.taskroute_task_counts_delta();

--
-- Name: tasks tasks_count_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER tasks_count_insert AFTER INSERT ON public.tasks REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.taskroute_task_counts_delta();

--
-- Name: tasks tasks_count_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER tasks_count_update AFTER UPDATE ON public.tasks REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.taskroute_task_counts_delta();

--
-- Name: tasks tasks_finished; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER tasks_finished BEFORE UPDATE OF status ON public.tasks FOR EACH ROW WHEN (((new.status = ANY (ARRAY['done'::text, 'failed'::text, 'canceled'::text])) AND (old.status <> ALL (ARRAY['done'::text, 'failed'::text, 'canceled'::text])))) EXECUTE FUNCTION public.taskroute_task_finished();

--
-- Name: assignments assignments_expert_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.assignments
    ADD CONSTRAINT assignments_expert_id_fkey FOREIGN KEY (expert_id) REFERENCES public.experts(id);

--
-- Name: assignments assignments_item_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.assignments
    ADD CONSTRAINT assignments_item_id_fkey FOREIGN KEY (item_id) REFERENCES public.items(id);

--
-- Name: assignments assignments_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.assignments
    ADD CONSTRAINT assignments_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: assignments assignments_task_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.assignments
    ADD CONSTRAINT assignments_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

--
-- Name: credential_last_use credential_last_use_credential_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.credential_last_use
    ADD CONSTRAINT credential_last_use_credential_id_fkey FOREIGN KEY (credential_id) REFERENCES public.credentials(id);

--
-- Name: credentials credentials_customer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.credentials
    ADD CONSTRAINT credentials_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES public.customers(id);

--
-- Name: credentials credentials_expert_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.credentials
    ADD CONSTRAINT credentials_expert_id_fkey FOREIGN KEY (expert_id) REFERENCES public.experts(id);

--
-- Name: credentials credentials_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.credentials
    ADD CONSTRAINT credentials_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: expert_pace expert_pace_expert_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.expert_pace
    ADD CONSTRAINT expert_pace_expert_id_fkey FOREIGN KEY (expert_id) REFERENCES public.experts(id);

--
-- Name: expert_skills expert_skills_expert_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.expert_skills
    ADD CONSTRAINT expert_skills_expert_id_fkey FOREIGN KEY (expert_id) REFERENCES public.experts(id);

--
-- Name: gold_exposures gold_exposures_decide_with_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.gold_exposures
    ADD CONSTRAINT gold_exposures_decide_with_fkey FOREIGN KEY (decide_with) REFERENCES public.assignments(id);

--
-- Name: gold_exposures gold_exposures_expert_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.gold_exposures
    ADD CONSTRAINT gold_exposures_expert_id_fkey FOREIGN KEY (expert_id) REFERENCES public.experts(id);

--
-- Name: gold_exposures gold_exposures_item_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.gold_exposures
    ADD CONSTRAINT gold_exposures_item_id_fkey FOREIGN KEY (item_id) REFERENCES public.items(id);

--
-- Name: gold_pool gold_pool_item_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.gold_pool
    ADD CONSTRAINT gold_pool_item_id_fkey FOREIGN KEY (item_id) REFERENCES public.items(id);

--
-- Name: gold_pool gold_pool_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.gold_pool
    ADD CONSTRAINT gold_pool_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: ingest_chunks ingest_chunks_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ingest_chunks
    ADD CONSTRAINT ingest_chunks_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.ingest_jobs(id);

--
-- Name: ingest_jobs ingest_jobs_customer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ingest_jobs
    ADD CONSTRAINT ingest_jobs_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES public.customers(id);

--
-- Name: ingest_jobs ingest_jobs_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ingest_jobs
    ADD CONSTRAINT ingest_jobs_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: item_results item_results_item_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.item_results
    ADD CONSTRAINT item_results_item_id_fkey FOREIGN KEY (item_id) REFERENCES public.items(id);

--
-- Name: item_results item_results_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.item_results
    ADD CONSTRAINT item_results_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: items items_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.items
    ADD CONSTRAINT items_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: payouts payouts_assignment_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_assignment_id_fkey FOREIGN KEY (assignment_id) REFERENCES public.assignments(id);

--
-- Name: payouts payouts_expert_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_expert_id_fkey FOREIGN KEY (expert_id) REFERENCES public.experts(id);

--
-- Name: payouts payouts_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: payouts payouts_reverses_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_reverses_id_fkey FOREIGN KEY (reverses_id) REFERENCES public.payouts(id);

--
-- Name: project_alerts project_alerts_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.project_alerts
    ADD CONSTRAINT project_alerts_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: project_priority_events project_priority_events_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.project_priority_events
    ADD CONSTRAINT project_priority_events_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: project_quality project_quality_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.project_quality
    ADD CONSTRAINT project_quality_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: project_risk project_risk_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.project_risk
    ADD CONSTRAINT project_risk_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: projects projects_customer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.projects
    ADD CONSTRAINT projects_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES public.customers(id);

--
-- Name: result_changes result_changes_item_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.result_changes
    ADD CONSTRAINT result_changes_item_id_fkey FOREIGN KEY (item_id) REFERENCES public.items(id);

--
-- Name: result_changes result_changes_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.result_changes
    ADD CONSTRAINT result_changes_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- Name: tasks tasks_item_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_item_id_fkey FOREIGN KEY (item_id) REFERENCES public.items(id);

--
-- Name: tasks tasks_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

--
-- PostgreSQL database dump complete
--
