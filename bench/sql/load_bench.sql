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

-- name: bench_load_timeline_sample
-- $1 database name. One --timeline sample: the WAL counters so far, what the checkpointer
-- is doing, and the bench database's active backends (wait events, and statements running
-- for more than 50 ms, first 60 characters).
SELECT w.wal_records, w.wal_fpi, w.wal_bytes::bigint AS wal_bytes, w.wal_write, w.wal_sync,
       (SELECT coalesce(wait_event, 'cpu') FROM pg_stat_activity
        WHERE backend_type = 'checkpointer') AS checkpointer,
       (SELECT coalesce(jsonb_object_agg(e, n), '{}') FROM (
          SELECT coalesce(wait_event, 'cpu') AS e, count(*) AS n FROM pg_stat_activity
          WHERE datname = $1 AND state = 'active' AND pid <> pg_backend_pid()
          GROUP BY 1) x) AS waits,
       (SELECT coalesce(jsonb_agg(left(regexp_replace(query, '^(\s*--[^\n]*\n)*\s*', ''), 60)), '[]')
        FROM pg_stat_activity
        WHERE datname = $1 AND state = 'active' AND pid <> pg_backend_pid()
          AND now() - query_start > interval '50 ms') AS slow
FROM pg_stat_wal w;
