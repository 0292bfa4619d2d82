-- Issue 13: a project is 'completed' once all its work is resolved (and 'active' again when
-- work is added or labels are retracted), and its remaining work can be drawn over time.

-- 'completed': no task slot is pending, open or claimed and no background ingest is queued
-- (functions/projects.sql: taskroute_project_settle keeps it so, in the transaction that
-- resolves the last slot or adds new work). completed_at: when it last became completed
-- (NULL while active); payload retention counts from coalesce(canceled_at, completed_at).
ALTER TABLE projects DROP CONSTRAINT projects_status_check;
ALTER TABLE projects
    ADD CONSTRAINT projects_status_check
        CHECK (status IN ('ingesting', 'active', 'completed', 'canceled')),
    ADD COLUMN completed_at timestamptz,
    ADD CONSTRAINT projects_completed_at_check
        CHECK ((status = 'completed') = (completed_at IS NOT NULL));

-- When a slot left the remaining work (done, failed or canceled): the burn-down's history
-- is rebuilt from created_at (+1) and finished_at (-1). Set by a trigger, not by each
-- statement, so every path that ends a slot (submit, sweeper, cancel, adjudication no longer
-- needed, released gold, and paths added later) records it; the WHEN clause runs in C, so
-- heartbeats and claims do not enter the function.
ALTER TABLE tasks ADD COLUMN finished_at timestamptz;

CREATE FUNCTION taskroute_task_finished() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    NEW.finished_at := taskroute_now();
    RETURN NEW;
END
$fn$;

CREATE TRIGGER tasks_finished BEFORE UPDATE OF status ON tasks
    FOR EACH ROW
    WHEN (NEW.status IN ('done', 'failed', 'canceled')
          AND OLD.status NOT IN ('done', 'failed', 'canceled'))
    EXECUTE FUNCTION taskroute_task_finished();

-- The past, as well as it can be known: a done slot finished when its answer was submitted;
-- failed and canceled ones when their last lease ended, else when the project was canceled,
-- else when they were created.
UPDATE tasks t
SET finished_at = coalesce(
    (SELECT max(coalesce(a.submitted_at, a.lease_until)) FROM assignments a
     WHERE a.task_id = t.id),
    (SELECT p.canceled_at FROM projects p WHERE p.id = t.project_id),
    t.created_at)
WHERE t.status IN ('done', 'failed', 'canceled');

-- Projects whose work was all resolved before this migration are completed now.
UPDATE projects p
SET status = 'completed',
    completed_at = coalesce((SELECT max(t.finished_at) FROM tasks t WHERE t.project_id = p.id),
                            p.created_at)
WHERE p.status = 'active'
  AND EXISTS (SELECT 1 FROM tasks t WHERE t.project_id = p.id AND t.kind <> 'gold')
  AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.project_id = p.id AND t.kind <> 'gold'
                  AND t.status IN ('pending', 'open', 'claimed'))
  AND NOT EXISTS (SELECT 1 FROM ingest_jobs j WHERE j.project_id = p.id
                  AND j.state IN ('queued', 'running', 'retrying'));
