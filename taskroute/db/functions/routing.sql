-- What the claim orders by (priority classes, deadline bumps, fairness boosts), as functions
-- the routing job's statements and the claim's share (queries/routing.sql, queries/claims.sql).

-- Priority classes are named levels of the project's integer priority (higher first):
-- high >= 100, low <= -100, normal in between. `priorityClass: HIGH` stores priority 100.
CREATE OR REPLACE FUNCTION routing_class(project_priority integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN project_priority >= 100 THEN 'high'
            WHEN project_priority <= -100 THEN 'low'
            ELSE 'normal' END;

-- What `tasks.eff_priority` holds (the claim index orders by it, DESC):
--   (project level) * 10000 + task priority
-- Task priorities lie in [-1000, 1000], so the project's level always dominates. The level is
-- the project's priority, raised by a deadline bump: one class level (+100), but a project
-- below HIGH stops at the top of NORMAL (99). A customer buys HIGH to be served before the
-- classes below it; a deadline redistributes among the rest.
-- The fairness job adds routing_fair_boost() to a bounded number of open tasks of a project
-- that got less than its share; such rows sort ahead of every unboosted row.
CREATE OR REPLACE FUNCTION routing_eff_priority(
    project_priority integer, bumped boolean, task_priority integer
) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (CASE WHEN NOT bumped THEN project_priority
             WHEN project_priority < 100 THEN least(project_priority + 100, 99)
             ELSE project_priority + 100 END) * 10000 + task_priority;

CREATE OR REPLACE FUNCTION routing_fair_boost() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN 100000000;

-- Rows at or above this are fairness-boosted (unboosted values stay below ~11.1M).
CREATE OR REPLACE FUNCTION routing_fair_threshold() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN 50000000;

-- Inside a class, the fairness job lifts a bounded number of open tasks of a project short of
-- its least share among the class's projects (queries/routing.sql routing_class_lift) to this
-- value: above every unlifted row of the class (deadline-bumped ones included: each project's
-- integer priority reaches at most 99 inside NORMAL, 1000 + 100 in HIGH), below every row of
-- the class above (HIGH's lowest is 99.9 x 10000, NORMAL's -99.1 x 10000); lifted rows keep
-- their task priority, then FIFO. The bands are unused by any unlifted value.
CREATE OR REPLACE FUNCTION routing_class_lift(project_priority integer, task_priority integer)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE routing_class(project_priority) WHEN 'high' THEN 11500000
                                            WHEN 'normal' THEN 995000
                                            ELSE -995000 END + task_priority;

-- An eff_priority (without a fairness boost) with a class lift undone: the class's named
-- level (100, 0, -100) x 10000 plus the task priority; any other value as it is.
CREATE OR REPLACE FUNCTION routing_unlift(eff_priority integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN eff_priority - CASE WHEN eff_priority BETWEEN 11499000 AND 11501000 THEN 10500000
                           WHEN eff_priority BETWEEN 994000 AND 996000 THEN 995000
                           WHEN eff_priority BETWEEN -996000 AND -994000 THEN 5000
                           ELSE 0 END;

-- Base priority: eff_priority without the fairness boost nor a class lift (class, deadline
-- bump and the task's own priority). What experts may be told about; boosts and lifts are
-- routing's business. A lifted row reads as its class's named level (the project's own level
-- is not kept in the row).
CREATE OR REPLACE FUNCTION routing_base_priority(eff_priority integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN routing_unlift(CASE WHEN eff_priority >= routing_fair_threshold()
                           THEN eff_priority - routing_fair_boost() ELSE eff_priority END);

-- The eff_priority of a bumped project's task in a scarce skill, written once for the bump, its
-- futility test and the re-lift of a skill measured scarce after the bump. Below HIGH it is the
-- bump's level as anywhere else (a scarce skill's queue is served strictly by priority, so a
-- higher lift there would pass the classes above it). A bumped HIGH project goes ahead of every
-- unbumped row: customers' own integer priorities reach 1000, above HIGH's one class level.
CREATE OR REPLACE FUNCTION routing_scarce_lift(project_priority integer, task_priority integer)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN routing_eff_priority(project_priority, true, task_priority)
       + CASE WHEN project_priority >= 100 THEN 2100 * 10000 ELSE 0 END;

-- Presence from the heartbeat: an expert holding a live claim whose heartbeats stopped (not
-- seen, by claim or heartbeat, for two heartbeat intervals) is not working, even while the lease
-- runs and before the sweeper's timeout ends the claim. The interval is a third of the
-- project's heartbeat timeout (capped by the lease, as the sweeper caps it): clients beat at
-- least that often (docs/api.md, Heartbeats), so two missed beats are a closed tab, not a
-- slow network. The forecast's present experts and in-flight tasks and the routing job's
-- active experts read it.
CREATE OR REPLACE FUNCTION presence_overdue(
    last_seen timestamptz, claimed timestamptz, heartbeat_timeout integer, lease integer,
    now_ timestamptz
) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN greatest(last_seen, claimed)
       < now_ - make_interval(secs => 2 * least(heartbeat_timeout, lease) / 3.0);
