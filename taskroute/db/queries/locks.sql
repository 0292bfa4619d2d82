-- Advisory locks that make background jobs run in one process at a time.

-- name: advisory_xact_try_lock
-- $1 key. True if this transaction now holds the lock (released at commit).
SELECT pg_try_advisory_xact_lock($1);

-- name: advisory_xact_lock_shared
-- $1 key. Waits for the lock in shared mode (many holders; an exclusive holder excludes
-- them); released at commit.
SELECT pg_advisory_xact_lock_shared($1);

-- name: lock_timeout_local
-- $1 how long a lock may be waited for in this transaction ('5s'): lock_not_available after.
SELECT set_config('lock_timeout', $1, true);
-- (advisory_xact_lock, the exclusive wait, is in forecast.sql)
