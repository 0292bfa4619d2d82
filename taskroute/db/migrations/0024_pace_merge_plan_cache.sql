-- The pace merge runs in every submit (the assignments_pace_update trigger). As a LANGUAGE sql
-- function that is not inlined (it writes), Postgres 15 parsed and planned its statement on
-- every call (~0.3-0.5 ms of a submit's CPU, seen in pg_stat_statements: plans = calls).
-- PL/pgSQL keeps plans for the session, but would still re-plan this one every time: its
-- generic plan (arrays of unknown length) costs more than a custom plan for a one-element
-- array, so the plan cache never settles on it. The generic plan is the same plan here
-- (unnest, then the expert's row by primary key), hence force_generic_plan.
-- Same statement, same behaviour.
CREATE OR REPLACE FUNCTION taskroute_pace_merge(
    p_ids uuid[], p_experts uuid[], p_tasks uuid[], p_claimed timestamptz[],
    p_submitted timestamptz[]
) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $fn$
BEGIN
    WITH fresh AS (
        SELECT u.id, u.expert_id, t.skill, u.claimed_at, u.submitted_at
        FROM unnest(p_ids, p_experts, p_tasks, p_claimed, p_submitted)
             AS u(id, expert_id, task_id, claimed_at, submitted_at)
        JOIN tasks t ON t.id = u.task_id
        WHERE u.submitted_at IS NOT NULL
    ),
    kept AS (
        SELECT k.id, p.expert_id, k.skill, k.claimed_at, k.submitted_at
        FROM expert_pace p,
             unnest(p.assignment_ids, p.skills, p.claimed_at, p.submitted_at)
                 AS k(id, skill, claimed_at, submitted_at)
        WHERE p.expert_id IN (SELECT expert_id FROM fresh)
          AND k.id NOT IN (SELECT id FROM fresh)
    ),
    ranked AS (
        SELECT m.*, row_number() OVER (PARTITION BY m.expert_id ORDER BY m.submitted_at DESC) AS r
        FROM (SELECT * FROM fresh UNION ALL SELECT * FROM kept) m
    )
    INSERT INTO expert_pace AS e (expert_id, assignment_ids, skills, claimed_at, submitted_at)
    SELECT expert_id,
           array_agg(id ORDER BY submitted_at DESC),
           array_agg(skill ORDER BY submitted_at DESC),
           array_agg(claimed_at ORDER BY submitted_at DESC),
           array_agg(submitted_at ORDER BY submitted_at DESC)
    FROM ranked WHERE r <= 40
    GROUP BY expert_id
    ORDER BY expert_id
    ON CONFLICT (expert_id) DO UPDATE
    SET assignment_ids = EXCLUDED.assignment_ids, skills = EXCLUDED.skills,
        claimed_at = EXCLUDED.claimed_at, submitted_at = EXCLUDED.submitted_at;
END
$fn$;
