-- One clock for every decision about time: leases, expiry, retries, windows, deadlines.
-- Every statement in queries/*.sql reads taskroute_now(), never now() (tests/test_clock.py
-- keeps it so). In production it is now(): a STABLE one-line SQL function the planner inlines,
-- so it costs nothing. A test moves one database's clock by redefining it there
-- (tests/clock.py); Postgres invalidates every cached plan that inlined it, so each connection,
-- the server's pool included, sees the new time at its next statement.
CREATE FUNCTION taskroute_now() RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT now() $$;

-- Event times written by default (created_at, claimed_at, at, ...) follow the same clock, so
-- after a test moves it forward earlier events are older and later ones happen at the moved
-- time. Every column defaulting to now() so far; later migrations write taskroute_now().
DO $$
DECLARE
    col record;
BEGIN
    FOR col IN
        SELECT c.relname AS table_name, a.attname AS column_name
        FROM pg_attrdef d
        JOIN pg_class c ON c.oid = d.adrelid
        JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
        WHERE c.relnamespace = current_schema()::regnamespace
          AND pg_get_expr(d.adbin, d.adrelid) = 'now()'
          AND c.relname NOT IN ('schema_migrations', 'schema_functions')
        ORDER BY 1, 2
    LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET DEFAULT taskroute_now()',
                       col.table_name, col.column_name);
    END LOOP;
END
$$;
