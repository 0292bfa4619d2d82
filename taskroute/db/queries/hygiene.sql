-- Table hygiene when the server does not keep it (resolvers/table_hygiene.py).

-- name: hygiene_due
-- No parameters. Every table of the schema, when the server will not act on it (autovacuum off
-- for the server, or for the table), with what is due by autovacuum's own formula: `analyze`
-- once the rows changed since the last analyze reach threshold + scale factor x rows, `vacuum`
-- once the dead rows, or the rows inserted since the last vacuum, reach theirs. Each term is
-- the table's own setting (the migrations give tasks and assignments fixed thresholds, scale
-- factor 0) or else the server's. A table never analyzed counts as empty, so it is analyzed
-- early, as autovacuum would. No row when the server's autovacuum runs.
WITH opts AS (
    SELECT c.oid, c.relname, greatest(c.reltuples, 0) AS tuples, o.*
    FROM pg_class c
    CROSS JOIN LATERAL (
        SELECT coalesce(bool_and(kv.v::boolean) FILTER (WHERE kv.k = 'autovacuum_enabled'), true)
                   AS table_on,
               max(kv.v) FILTER (WHERE kv.k = 'autovacuum_analyze_threshold')::float8 AS a_thr,
               max(kv.v) FILTER (WHERE kv.k = 'autovacuum_analyze_scale_factor')::float8 AS a_sf,
               max(kv.v) FILTER (WHERE kv.k = 'autovacuum_vacuum_threshold')::float8 AS v_thr,
               max(kv.v) FILTER (WHERE kv.k = 'autovacuum_vacuum_scale_factor')::float8 AS v_sf,
               max(kv.v) FILTER (WHERE kv.k = 'autovacuum_vacuum_insert_threshold')::float8
                   AS i_thr,
               max(kv.v) FILTER (WHERE kv.k = 'autovacuum_vacuum_insert_scale_factor')::float8
                   AS i_sf
        FROM unnest(c.reloptions) AS r(opt),
             LATERAL (SELECT split_part(r.opt, '=', 1) AS k, split_part(r.opt, '=', 2) AS v) kv
    ) o
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
),
due AS (
    SELECT t.oid, t.relname, t.table_on,
           coalesce(t.a_thr, current_setting('autovacuum_analyze_threshold')::float8)
               + coalesce(t.a_sf, current_setting('autovacuum_analyze_scale_factor')::float8)
                 * t.tuples AS analyze_at,
           coalesce(t.v_thr, current_setting('autovacuum_vacuum_threshold')::float8)
               + coalesce(t.v_sf, current_setting('autovacuum_vacuum_scale_factor')::float8)
                 * t.tuples AS vacuum_at,
           -- An insert threshold of -1 turns the insert-driven vacuum off.
           nullif(coalesce(t.i_thr,
                           current_setting('autovacuum_vacuum_insert_threshold')::float8), -1)
               + coalesce(t.i_sf,
                          current_setting('autovacuum_vacuum_insert_scale_factor')::float8)
                 * t.tuples AS insert_at
    FROM opts t
)
SELECT d.relname AS table_name,
       s.n_mod_since_analyze >= d.analyze_at AS analyze,
       s.n_dead_tup >= d.vacuum_at OR coalesce(s.n_ins_since_vacuum >= d.insert_at, false)
           AS vacuum
FROM due d
JOIN pg_stat_user_tables s ON s.relid = d.oid
WHERE NOT current_setting('autovacuum')::boolean OR NOT d.table_on
ORDER BY d.relname;
