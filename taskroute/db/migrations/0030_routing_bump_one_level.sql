-- A deadline bump is one class level in every skill (issue 17): in a scarce skill a bumped
-- LOW project's tasks join NORMAL's queue in order of age, as anywhere else, instead of
-- passing the whole NORMAL backlog there (migration 0029's level 99). Over 20 seeds of
-- bench/routing.py's worlds that lift cost the NORMAL class its p95 wait in `specialists`
-- (0.61 h against priority-FIFO's 0.55; without any bump 0.52) for one more deadline met
-- than one class level gives there; at one level NORMAL waits no longer than under
-- priority-FIFO in any world (bench/RESULTS.md, 2026-12-05 afternoon). A bumped HIGH
-- project still goes ahead of every unbumped row: the customers' own integer priorities
-- reach 1000, above HIGH's one class level.
CREATE OR REPLACE FUNCTION routing_scarce_lift(project_priority integer, task_priority integer)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN routing_eff_priority(project_priority, true, task_priority)
       + CASE WHEN project_priority >= 100 THEN 2100 * 10000 ELSE 0 END;

-- Rows lifted the 0029 way (level 99, above their one class level) take their place now
-- rather than at their project's unbump; fairness-boosted rows (at or above
-- routing_fair_threshold()) stay as they are.
UPDATE tasks t
SET eff_priority = routing_scarce_lift(p.priority, t.priority)
FROM projects p
WHERE p.deadline_bumped AND p.priority < 100 AND t.project_id = p.id
  AND t.status IN ('open', 'claimed', 'pending')
  AND t.eff_priority > routing_eff_priority(p.priority, true, t.priority)
  AND t.eff_priority < routing_fair_threshold();
