-- Table hygiene when the server does not keep it (resolvers/table_hygiene.py).

-- name: hygiene_due
-- No parameters. The tables the migrations gave autovacuum thresholds (tasks,
-- assignments), when the server will not act on them (autovacuum off for the server, or for
-- the table), with what is due by those same thresholds: `analyze` once the rows changed
-- since the last analyze reach autovacuum_analyze_threshold, `vacuum` once the dead rows
-- reach autovacuum_vacuum_threshold or the rows inserted since the last vacuum reach
-- autovacuum_vacuum_insert_threshold. (The migrations set the scale factors to 0: fixed
-- thresholds, whatever the table's size.) No row when the server's autovacuum runs.
WITH tuned AS (
    SELECT c.oid, c.relname,
           max(split_part(o, '=', 2)) FILTER (WHERE o LIKE 'autovacuum_analyze_threshold=%')::bigint
               AS analyze_at,
           max(split_part(o, '=', 2)) FILTER (WHERE o LIKE 'autovacuum_vacuum_threshold=%')::bigint
               AS vacuum_at,
           max(split_part(o, '=', 2)) FILTER (WHERE o LIKE 'autovacuum_vacuum_insert_threshold=%')::bigint
               AS insert_at,
           coalesce(bool_and(split_part(o, '=', 2)::boolean)
                        FILTER (WHERE o LIKE 'autovacuum_enabled=%'), true) AS table_on
    FROM pg_class c, unnest(c.reloptions) AS o
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
    GROUP BY c.oid, c.relname
)
SELECT t.relname AS table_name,
       s.n_mod_since_analyze >= t.analyze_at AS analyze,
       s.n_dead_tup >= t.vacuum_at
           OR s.n_ins_since_vacuum >= coalesce(t.insert_at, t.vacuum_at) AS vacuum
FROM tuned t
JOIN pg_stat_user_tables s ON s.relid = t.oid
WHERE t.analyze_at IS NOT NULL AND t.vacuum_at IS NOT NULL
  AND (NOT current_setting('autovacuum')::boolean OR NOT t.table_on)
ORDER BY t.relname;
