-- Statements of bench/load.py only (the service never runs these).

-- name: bench_load_backends
-- $1 database name. Postgres backends serving the bench database (their CPU is measured).
SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend';

-- name: bench_load_check
-- No parameters. What the run left behind: answered assignments, payments, live claims.
SELECT (SELECT count(*) FROM assignments WHERE status = 'submitted')::int AS submitted,
       (SELECT count(*) FROM payouts)::int AS payouts,
       (SELECT count(*) FROM assignments WHERE status = 'active')::int AS active;
