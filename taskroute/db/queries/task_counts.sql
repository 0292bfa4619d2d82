-- Task counts per (project, skill, status, gold): `task_counts` plus the deltas the tasks
-- triggers (db/functions/task_counts.sql) appended and the compactor has not folded in yet.
-- Exact at any moment.

-- fragment: task_counts_of
-- $1 project_id. Rows (project_id, skill, status, gold, n), several per key (the folded count
-- and the pending deltas): sum them. `gold`: gold servings, which the
-- forecasts count as work and progress leaves out. Index probes on both tables.
SELECT c.project_id, c.skill, c.status, c.gold, c.n FROM task_counts c WHERE c.project_id = $1
UNION ALL
SELECT d.project_id, d.skill, d.status, d.gold, d.n FROM task_count_deltas d
WHERE d.project_id = $1

-- fragment: task_counts_all
-- No parameters. task_counts_of for every project.
SELECT c.project_id, c.skill, c.status, c.gold, c.n FROM task_counts c
UNION ALL
SELECT d.project_id, d.skill, d.status, d.gold, d.n FROM task_count_deltas d

-- name: task_counts_project
-- $1 project_id. The project's counts per (skill, status, gold), as the forecast (which sums
-- over gold) and progress (which leaves gold out) see them.
SELECT skill, status, gold, sum(n)::int AS n
FROM ({{ task_counts_of($1) }}) c
GROUP BY skill, status, gold HAVING sum(n) <> 0
ORDER BY skill, status, gold;

-- name: task_counts_compact
-- No parameters. Folds every committed delta into task_counts in one transaction (readers see
-- the deltas or the folded counts, never both, never neither). Deltas appended meanwhile by
-- uncommitted transactions stay for the next run; a concurrent run skips the rows this one
-- deleted. Keys in order, so two runs lock counters in the same order. Returns the deltas
-- folded.
WITH moved AS (
    DELETE FROM task_count_deltas RETURNING project_id, skill, status, gold, n
),
folded AS (
    INSERT INTO task_counts AS c (project_id, skill, status, gold, n)
    SELECT project_id, skill, status, gold, sum(n) FROM moved
    GROUP BY project_id, skill, status, gold
    ORDER BY project_id, skill, status, gold
    ON CONFLICT (project_id, skill, status, gold) DO UPDATE SET n = c.n + EXCLUDED.n
)
SELECT count(*)::int FROM moved;
