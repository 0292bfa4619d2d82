-- Read-only queries behind the gauges /metrics refreshes on scrape.

-- name: metrics_statement_timeout
-- No parameters. Bounds the scrape-time queries (inside their read-only transaction).
SET LOCAL statement_timeout = '2s';

-- name: metrics_open_tasks_by_skill
-- No parameters. Open tasks per skill, largest first; served from the partial index
-- tasks_open_claim (status literal so the planner matches it).
SELECT skill, count(*) AS n FROM tasks WHERE status = 'open' GROUP BY skill ORDER BY n DESC;

-- name: metrics_ingest_lag
-- No parameters. Seconds since the oldest project still ingesting was created (NULL: none).
SELECT extract(epoch FROM taskroute_now() - min(created_at))::float8 FROM projects
WHERE status = 'ingesting';
