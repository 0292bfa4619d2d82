-- Issue 16: one wake-up per opened task, whatever the number of server processes.
--
-- A NOTIFY of opened tasks reaches every process listening to the skill. The processes with
-- idle subscribers able to take the tasks take "units" of the announcement here (one unit per
-- task), so that together they wake at most as many experts as tasks were opened. Each unit
-- handed to a subscriber is a delivery, kept until its window passes: an expert not seen
-- (claim or heartbeat) since being woken has gone or ignored it, and the unit is announced
-- again to the others (realtime/tickets.py). A process that dies leaves its deliveries behind,
-- and they are announced again the same way.
--
-- UNLOGGED: coordination state that lives for seconds. After a crash it is empty, which loses
-- nothing: every listener lost its LISTEN connection too and tells its subscribers to re-check.

CREATE UNLOGGED TABLE wake_tickets (
    key         text PRIMARY KEY,          -- "<payload nonce>:<project id>": one announcement
    announced   integer NOT NULL CHECK (announced > 0),  -- tasks it announced
    taken       integer NOT NULL CHECK (taken BETWEEN 0 AND announced),
    last_take   integer NOT NULL,          -- what the latest taker got (its RETURNING reads it)
    created_at  timestamptz NOT NULL DEFAULT taskroute_now()
);
CREATE INDEX wake_tickets_created ON wake_tickets (created_at);

CREATE UNLOGGED TABLE wake_deliveries (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ticket      text NOT NULL,
    subscriber  bigint NOT NULL,           -- the taking process's own id of the subscription
    expert_id   uuid NOT NULL,
    skill       text NOT NULL,
    project_id  uuid NOT NULL,
    min_quality real NOT NULL DEFAULT 0,
    attempt     integer NOT NULL DEFAULT 1,  -- 1: first announcement; n: announced again n-1 times
    woken_at    timestamptz NOT NULL DEFAULT taskroute_now(),
    due_at      timestamptz NOT NULL
);
CREATE INDEX wake_deliveries_due ON wake_deliveries (due_at);
