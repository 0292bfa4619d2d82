-- Where a deadline bump puts a project's tasks in a scarce skill (issue 17): the eff_priority
-- of a bumped project's task there, written once for the bump, its futility test and the
-- re-lift of a skill measured scarce after the bump (queries/routing.sql).
--
-- In a scarce skill the queue is served strictly by priority and drains slowly, so one class
-- level (routing_eff_priority's bump) leaves a late project behind the whole backlog of the
-- classes above it there. The lift used to go ahead of every unbumped row (+2100 levels);
-- over 20 seeds of bench/routing.py's worlds that cost the HIGH class its p95 wait in three
-- worlds of five (bursts 0.29 h against priority-FIFO's 0.21), while the deadlines it won
-- were LOW and NORMAL projects passing NORMAL and LOW backlogs. Now a bumped project passes
-- every unbumped row of a class below HIGH and none of HIGH's: LOW and NORMAL projects go to
-- the top of NORMAL (level 99, just under HIGH's 100; one class level, if higher, is kept:
-- a NORMAL project at 20 rises to 120 as anywhere else), and a bumped HIGH project ahead of
-- every unbumped row. Task priorities lie in [-1000, 1000], so the level dominates.
CREATE FUNCTION routing_scarce_lift(project_priority integer, task_priority integer)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN project_priority >= 100
            THEN routing_eff_priority(project_priority, true, task_priority) + 2100 * 10000
            ELSE greatest(routing_eff_priority(project_priority, true, task_priority),
                          99 * 10000 + task_priority) END;

-- Rows lifted the old way (above the one-level bump: +2100 levels, twice for a LOW project,
-- whose lifted rows stayed under the old re-lift's 2100 * 10000 test for one more run) take
-- their new place now rather than at their project's unbump; fairness-boosted rows (at or
-- above routing_fair_threshold()) stay as they are.
UPDATE tasks t
SET eff_priority = routing_scarce_lift(p.priority, t.priority)
FROM projects p
WHERE p.deadline_bumped AND p.priority < 100 AND t.project_id = p.id
  AND t.status IN ('open', 'claimed', 'pending')
  AND t.eff_priority > routing_eff_priority(p.priority, true, t.priority)
  AND t.eff_priority < routing_fair_threshold();
