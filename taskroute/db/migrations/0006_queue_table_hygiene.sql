-- Queue-table hygiene that does not depend on the server's defaults. `tasks` and `assignments`
-- churn on every claim, heartbeat and submit: with the default thresholds (20% of the table
-- dead before a vacuum, 10% changed before an analyze) a table of millions of rows carries
-- hundreds of thousands of dead index entries that every claim probe steps over, and the
-- planner keeps statistics from when the table was small. These settings vacuum and analyze
-- them after a fixed, small amount of churn instead. (A server running with autovacuum off,
-- as some test machines do, ignores them; production servers have it on.)
ALTER TABLE tasks SET (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.0,
    autovacuum_vacuum_insert_threshold = 20000,
    autovacuum_analyze_scale_factor = 0.0,
    autovacuum_analyze_threshold = 5000
);
ALTER TABLE assignments SET (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.0,
    autovacuum_vacuum_insert_threshold = 20000,
    autovacuum_analyze_scale_factor = 0.0,
    autovacuum_analyze_threshold = 5000
);
-- experts.last_seen_at is rewritten on every claim and heartbeat: leave room on each page so
-- those updates stay HOT (no index writes).
ALTER TABLE experts SET (fillfactor = 70);
