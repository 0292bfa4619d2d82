-- Issue 17: liveness apart from the lease. An expert silent (no claim, no heartbeat) for
-- longer than the project's heartbeat timeout loses the live claim to the sweeper
-- (routing.sql: leases_expire_absent); the lease stays the upper bound on one task. 300 s is
-- the seed's figure (an agent is offline when last_seen_at is older than 5 minutes).
ALTER TABLE projects
    ADD COLUMN heartbeat_timeout_seconds integer NOT NULL DEFAULT 300
        CHECK (heartbeat_timeout_seconds > 0);
