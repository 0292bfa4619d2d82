-- The submit's completion probe share-locks one claimed slot of its project, and that slot's
-- own submit then waits for the prober to commit. With seq in the key the probe reads the
-- newest claim (claims take tasks in seq order within a priority), the one least likely to be
-- submitted in the next milliseconds; the old key gave the oldest, the next one due.
CREATE INDEX tasks_project_status_seq ON tasks (project_id, status, seq);
DROP INDEX tasks_project_status;
ALTER INDEX tasks_project_status_seq RENAME TO tasks_project_status;
