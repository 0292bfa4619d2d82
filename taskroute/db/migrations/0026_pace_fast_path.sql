-- The pace row of a submit, cheaper (issue 19). Every submit rewrote its expert's
-- `expert_pace` row through taskroute_pace_merge: unnest the 40 kept submissions, join the new
-- one's task, rank, aggregate four arrays, upsert (0.36 ms of a submit's Postgres time at
-- 2,000 experts). And the row (~1.9 kB: four 40-element arrays) filled its page, so the
-- update could not stay on it: no HOT update, a new primary-key entry per submit, and the
-- probes of the next submits walked the dead versions until a vacuum (bench/pg_cycle.py: 119
-- buffers per merge with 32 experts submitting, against 16 on a vacuumed table).
--
-- 1. Room on the page: fillfactor 50 leaves space for the row's next version, so the update
--    is HOT (no index entry) and page pruning removes the old versions without a vacuum.
--    Pages written before this migration keep their fill until rewritten.
-- 2. The common case without the merge: a new submission (not kept yet) no older than the
--    newest kept one goes first, and the arrays keep their first 40 elements. That is
--    exactly what the merge computes for it (newest first, 40 kept). Anything else (the
--    expert's first submission, a restamp or retraction of a kept one, a submission older
--    than the newest kept, as history imports and the forecast bench write) still goes
--    through taskroute_pace_merge.
ALTER TABLE expert_pace SET (fillfactor = 50);

CREATE OR REPLACE FUNCTION taskroute_pace_row() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    UPDATE expert_pace p
    SET assignment_ids = (NEW.id || p.assignment_ids)[1:40],
        skills = ((SELECT t.skill FROM tasks t WHERE t.id = NEW.task_id) || p.skills)[1:40],
        claimed_at = (NEW.claimed_at || p.claimed_at)[1:40],
        submitted_at = (NEW.submitted_at || p.submitted_at)[1:40]
    WHERE p.expert_id = NEW.expert_id
      AND NEW.submitted_at >= p.submitted_at[1]
      AND NOT NEW.id = ANY (p.assignment_ids)
      AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = NEW.task_id);
    IF NOT FOUND THEN
        PERFORM taskroute_pace_merge(ARRAY[NEW.id], ARRAY[NEW.expert_id], ARRAY[NEW.task_id],
                                     ARRAY[NEW.claimed_at], ARRAY[NEW.submitted_at]);
    END IF;
    RETURN NULL;
END
$fn$;
