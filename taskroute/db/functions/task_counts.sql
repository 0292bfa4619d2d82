-- Task counts per (project, skill, status, gold): every statement that inserts, updates or
-- deletes tasks appends what it changed to `task_count_deltas`, in the same transaction, from
-- these statement-level triggers (every path, including ones added later). Appending never
-- locks an existing row, so concurrent claims of one project do not queue behind a hot counter
-- row; a job (resolvers/task_counts.py) folds the deltas into `task_counts`. A count is
-- `task_counts` plus the deltas not yet folded (queries/task_counts.sql), so it is exact.

-- One delta row per key the statement changed; an UPDATE that moved no task between statuses
-- (a heartbeat's lease, a priority bump) appends nothing.
CREATE OR REPLACE FUNCTION taskroute_task_counts_delta() RETURNS trigger
LANGUAGE plpgsql AS $fn$
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
$fn$;

CREATE OR REPLACE TRIGGER tasks_count_insert AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION taskroute_task_counts_delta();
CREATE OR REPLACE TRIGGER tasks_count_update AFTER UPDATE ON tasks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION taskroute_task_counts_delta();
CREATE OR REPLACE TRIGGER tasks_count_delete AFTER DELETE ON tasks
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION taskroute_task_counts_delta();
