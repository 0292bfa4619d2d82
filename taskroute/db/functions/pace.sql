-- The pace of each expert, kept from the work itself (expert_pace): their newest 40 submitted
-- assignments (any skill), newest first, kept by these triggers on assignments in the
-- submitting transaction, so a forecast reads one row per present expert instead of walking
-- the submission history. The row belongs to one expert, whose submits follow one another (one
-- live claim each): no two experts ever write the same row.

-- Merges submitted assignments (parallel arrays, any experts) into their experts' rows: an
-- assignment already kept is replaced (a restamp, a retraction), the newest 40 are kept, each
-- array in the rank's order (row_number: ties stay aligned across the arrays).
-- PL/pgSQL keeps the plan for the session (a LANGUAGE sql function that writes is planned on
-- every call). Its generic plan (arrays of unknown length) is the custom plan's, but costs more
-- on paper than a custom plan for a one-element array, hence force_generic_plan.
CREATE OR REPLACE FUNCTION taskroute_pace_merge(
    p_ids uuid[], p_experts uuid[], p_tasks uuid[], p_claimed timestamptz[],
    p_submitted timestamptz[]
) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $fn$
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
$fn$;

-- A submit (one row): fires only when a submission appears or is restamped. The common case
-- skips the merge: a new submission (not kept yet) no older than the newest kept one goes
-- first and the arrays keep their first 40 elements, exactly what the merge computes for it.
-- Anything else (the expert's first submission, a restamp or retraction of a kept one, a
-- submission older than the newest kept, as history imports write) goes through the merge.
CREATE OR REPLACE FUNCTION taskroute_pace_row() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    v_submitted bigint := (extract(epoch FROM NEW.submitted_at) * 1000000)::bigint;
BEGIN
    UPDATE expert_pace p
    SET assignment_ids = (NEW.id || p.assignment_ids)[1:40],
        skills = (t.skill || p.skills)[1:40],
        claim_us = ((extract(epoch FROM NEW.submitted_at - NEW.claimed_at) * 1000000)::bigint
                    || p.claim_us)[1:40],
        submitted_us = (v_submitted || p.submitted_us)[1:40]
    FROM tasks t
    WHERE p.expert_id = NEW.expert_id AND t.id = NEW.task_id
      AND v_submitted >= p.submitted_us[1]
      AND NOT NEW.id = ANY (p.assignment_ids);
    IF NOT FOUND THEN
        PERFORM taskroute_pace_merge(ARRAY[NEW.id], ARRAY[NEW.expert_id], ARRAY[NEW.task_id],
                                     ARRAY[NEW.claimed_at], ARRAY[NEW.submitted_at]);
    END IF;
    RETURN NULL;
END
$fn$;

-- Rows inserted already submitted (imports, histories built in SQL): once per statement.
CREATE OR REPLACE FUNCTION taskroute_pace_statement() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM taskroute_pace_merge(array_agg(id), array_agg(expert_id), array_agg(task_id),
                                 array_agg(claimed_at), array_agg(submitted_at))
    FROM new_rows WHERE status = 'submitted'
    HAVING count(*) > 0;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE TRIGGER assignments_pace_update AFTER UPDATE OF status, claimed_at, submitted_at
    ON assignments FOR EACH ROW
    WHEN (NEW.status = 'submitted'
          AND (OLD.status, OLD.claimed_at, OLD.submitted_at)
              IS DISTINCT FROM (NEW.status, NEW.claimed_at, NEW.submitted_at))
    EXECUTE FUNCTION taskroute_pace_row();
CREATE OR REPLACE TRIGGER assignments_pace_insert AFTER INSERT ON assignments
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION taskroute_pace_statement();
