-- Statements of bench/load.py only (the service never runs these).

-- name: bench_load_backends
-- $1 database name. Postgres backends serving the bench database (their CPU is measured).
SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend';

-- name: bench_load_check
-- No parameters. What the run left behind: answered assignments, payments, live claims.
SELECT (SELECT count(*) FROM assignments WHERE status = 'submitted')::int AS submitted,
       (SELECT count(*) FROM payouts)::int AS payouts,
       (SELECT count(*) FROM assignments WHERE status = 'active')::int AS active;

-- name: bench_load_pss_reset
-- No parameters. Start pg_stat_statements' counts afresh (when the server loads it; the
-- caller first checks with CREATE EXTENSION and a read, and falls back to /proc otherwise).
SELECT pg_stat_statements_reset();

-- name: bench_load_pss_read
-- No parameters. Calls and execution time of the bench database's top-level statements.
SELECT query, calls::bigint AS calls, total_exec_time AS ms
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database());
