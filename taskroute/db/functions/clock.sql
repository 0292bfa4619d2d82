-- One clock for every decision about time: leases, expiry, retries, windows, deadlines, and
-- the event times columns default to. Every statement in queries/*.sql reads taskroute_now(),
-- never now() (tests/test_clock.py keeps it so). In production it is now(): a STABLE one-line
-- SQL function the planner inlines, so it costs nothing. A test moves one database's clock by
-- redefining it there (tests/clock.py); Postgres invalidates every cached plan that inlined
-- it, so each connection, the server's pool included, sees the new time at its next statement.
-- Column defaults call it: it is installed before the tables are created.
CREATE OR REPLACE FUNCTION taskroute_now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT now() $$;
