-- A deadline bump never passes HIGH's work from below (issue 17): a bumped project below
-- HIGH rises one class level but at most to the top of NORMAL (level 99, just under HIGH's
-- 100): a late LOW project's tasks join NORMAL's queue in order of age (as since 0030), a
-- late NORMAL project's go ahead of the NORMAL work and behind every HIGH row, the newer
-- ones included. At one class level a late NORMAL project joined HIGH's queue by age and
-- passed the HIGH projects that arrived after it: over 20 seeds of bench/routing.py's
-- `bursts` world (HIGH projects arrive in bursts) HIGH's p95 wait was 0.25 h against
-- priority-FIFO's 0.21, capped 0.22 (the rest is the scarce-skills-first order: 0.215
-- without it), for 7 fewer deadlines met over 100 world-seeds, 798 against 805
-- (bench/RESULTS.md, 2026-12-06). A customer buys HIGH to be served before the classes
-- below it; a deadline redistributes among the rest. A bumped HIGH project keeps its lift
-- (one level, and ahead of every unbumped row in a scarce skill: routing_scarce_lift).
CREATE OR REPLACE FUNCTION routing_eff_priority(project_priority integer, bumped boolean,
                                                task_priority integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (CASE WHEN NOT bumped THEN project_priority
             WHEN project_priority < 100 THEN least(project_priority + 100, 99)
             ELSE project_priority + 100 END) * 10000 + task_priority;

-- Rows of a bumped project below HIGH that 0030's level put at or above HIGH's take their
-- place under it now rather than at their project's unbump; fairness-boosted rows (at or
-- above routing_fair_threshold()), finished work and HIGH projects' rows stay as they are.
UPDATE tasks t
SET eff_priority = routing_eff_priority(p.priority, true, t.priority)
FROM projects p
WHERE p.deadline_bumped AND p.priority < 100 AND t.project_id = p.id
  AND t.status IN ('open', 'claimed', 'pending')
  AND t.eff_priority = (p.priority + 100) * 10000 + t.priority
  AND t.eff_priority > routing_eff_priority(p.priority, true, t.priority);
