-- Advisory locks that make background jobs run in one process at a time.

-- name: advisory_xact_try_lock
-- $1 key. True if this transaction now holds the lock (released at commit).
SELECT pg_try_advisory_xact_lock($1);
