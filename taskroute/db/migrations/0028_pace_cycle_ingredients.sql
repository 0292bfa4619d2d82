-- A forecast's pace without timestamp arithmetic per kept submission (issue 16). Every
-- forecast recomputed, for each expert asked about and each of their 40 kept submissions,
-- the seconds it cost (from the claim, or from the previous submission when within the idle
-- cap) from two timestamp differences through numeric `extract`: ~40-50 us per expert, most of
-- a one-project forecast's Postgres time at 100k tasks (bench/RESULTS.md, 2026-12-02).
--
-- The row now keeps each submission's times as whole microseconds, maintained at submit, in
-- place of the two timestamp arrays (same size: the row stays ~1.9 kB, two to a page at
-- fillfactor 50, so the submit's update writes what it wrote):
-- - claim_us[i]: submitted_at - claimed_at of the i-th newest kept submission;
-- - submitted_us[i]: its submitted_at, microseconds since 1970-01-01 UTC.
-- The forecast ships them as they are (no per-element SQL) and resolvers/forecast.py `Kept`
-- takes the window and picks each cycle, the idle cap still a setting: integers compare
-- exactly as the intervals did, and an integer of microseconds / 10^6 is the same double as
-- extract(epoch)::float8 (both correctly rounded), so the cycles are the same to the bit.
-- A new table, filled from the old one (an UPDATE in place would leave every row with both
-- layouts, over the size at which Postgres compresses it, until its expert's next submit).
ALTER TABLE expert_pace RENAME TO expert_pace_before_0028;
ALTER INDEX expert_pace_pkey RENAME TO expert_pace_before_0028_pkey;
ALTER TABLE expert_pace_before_0028
    RENAME CONSTRAINT expert_pace_expert_id_fkey TO expert_pace_before_0028_expert_id_fkey;
CREATE TABLE expert_pace (
    expert_id      uuid PRIMARY KEY REFERENCES experts (id),
    assignment_ids uuid[] NOT NULL,
    skills         text[] NOT NULL,
    claim_us       bigint[] NOT NULL,
    submitted_us   bigint[] NOT NULL
) WITH (fillfactor = 50);
INSERT INTO expert_pace (expert_id, assignment_ids, skills, claim_us, submitted_us)
SELECT p.expert_id, p.assignment_ids, p.skills,
       (SELECT array_agg((extract(epoch FROM p.submitted_at[i] - p.claimed_at[i])
                          * 1000000)::bigint ORDER BY i)
        FROM generate_series(1, cardinality(p.submitted_at)) i),
       (SELECT array_agg((extract(epoch FROM u.s) * 1000000)::bigint ORDER BY u.i)
        FROM unnest(p.submitted_at) WITH ORDINALITY u(s, i))
FROM expert_pace_before_0028 p
ORDER BY p.expert_id;
DROP TABLE expert_pace_before_0028;

-- The merge (first submission, restamps, retractions, imports): the same newest 40, each
-- array in the rank's order (row_number: ties stay aligned across the arrays).
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

-- The submit's fast path (migration 0026), on the microsecond arrays.
CREATE OR REPLACE FUNCTION taskroute_pace_row() RETURNS trigger
LANGUAGE plpgsql AS $fn$
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
$fn$;
