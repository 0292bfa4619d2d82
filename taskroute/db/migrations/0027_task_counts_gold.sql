-- Issue 19: projectProgress from the maintained counts, not a recount of the project's tasks.
--
-- Progress leaves gold servings out (they are not customer work); the counts of migration
-- 0015 mixed them in, so progress recounted every task of the project, done ones included
-- (200k rows a recount at 200k tasks, for every watched project after every change). The
-- counts now keep gold servings apart: one more key column, `gold`. Readers that sum over a
-- project's counts (the forecasts) get the same sums; progress sums the rows that are not gold.

ALTER TABLE task_count_deltas ADD COLUMN gold boolean NOT NULL DEFAULT false;
ALTER TABLE task_counts ADD COLUMN gold boolean NOT NULL DEFAULT false;
ALTER TABLE task_counts DROP CONSTRAINT task_counts_pkey;
ALTER TABLE task_counts ADD PRIMARY KEY (project_id, skill, status, gold);

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

-- The recount, with writers held off until commit (they would append deltas of the old
-- shape meanwhile): the folded counts and the pending deltas are replaced by one count per
-- key, split by gold.
LOCK TABLE tasks IN SHARE MODE;
DELETE FROM task_count_deltas;
DELETE FROM task_counts;
INSERT INTO task_counts (project_id, skill, status, gold, n)
SELECT project_id, skill, status, kind = 'gold', count(*) FROM tasks GROUP BY 1, 2, 3, 4;
