-- Statements of bench/ingest.py only (the service never runs these).

-- name: bench_ingest_floor_project
-- No parameters. A second project of the bench's customer, for the COPY floor's rows, with
-- the columns a task copies from its project (as tasks_insert does).
INSERT INTO projects (customer_id, name, status)
SELECT id, 'copy floor', 'active' FROM customers ORDER BY created_at LIMIT 1
RETURNING id, min_quality, max_retries,
          routing_eff_priority(priority, deadline_bumped, 0) AS eff_priority;

-- name: bench_ingest_open_count
-- $1 project_id. Open tasks of the project (the service's, then the floor's).
SELECT count(*)::int FROM tasks WHERE project_id = $1 AND status = 'open';
