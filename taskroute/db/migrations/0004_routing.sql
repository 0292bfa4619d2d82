-- Routing (issue 6): priority classes, deadline bumps, fairness shares, skill scarcity,
-- capability tags and project-scoped claims.
--
-- Everything the claim orders by is precomputed here or by the periodic routing job, so the
-- claim itself stays a handful of index probes (one per skill the expert holds).

-- Priority classes are named levels of the project's integer priority (higher first):
-- high >= 100, low <= -100, normal in between. `priorityClass: HIGH` stores priority 100.
CREATE FUNCTION routing_class(project_priority integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN project_priority >= 100 THEN 'high'
            WHEN project_priority <= -100 THEN 'low'
            ELSE 'normal' END;

-- What `tasks.eff_priority` holds (the claim index orders by it, DESC):
--   (project priority + 100 if the project is deadline-bumped) * 10000 + task priority
-- Task priorities lie in [-1000, 1000], so the project term always dominates; a bump lifts a
-- project by one class level. Unbumped this equals the core's original formula, so rows
-- written by code that predates routing are already right.
-- The fairness job adds routing_fair_boost() to a bounded number of open tasks of a project
-- that got less than its share; such rows sort ahead of every unboosted row.
CREATE FUNCTION routing_eff_priority(project_priority integer, bumped boolean,
                                     task_priority integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (project_priority + CASE WHEN bumped THEN 100 ELSE 0 END) * 10000 + task_priority;

CREATE FUNCTION routing_fair_boost() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN 100000000;

-- Rows at or above this are fairness-boosted (unboosted values stay below ~11.1M).
CREATE FUNCTION routing_fair_threshold() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN 50000000;

-- Deadline bump state (the routing job sets and clears it; every change is recorded below).
ALTER TABLE projects ADD COLUMN deadline_bumped boolean NOT NULL DEFAULT false;

CREATE TABLE project_priority_events (
    seq              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id       uuid NOT NULL REFERENCES projects (id),
    -- 'bump' (forecast misses the deadline) | 'unbump' (back on track)
    kind             text NOT NULL CHECK (kind IN ('bump', 'unbump')),
    remaining        integer NOT NULL,
    -- done tasks per second over the forecast window when the decision was taken
    rate_per_second  double precision NOT NULL,
    -- NULL: no progress at all in the window (the forecast is "never")
    forecast_finish  timestamptz,
    deadline         timestamptz NOT NULL,
    at               timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX project_priority_events_project ON project_priority_events (project_id, seq);

-- Capability tags a task requires; the expert must carry all of them (experts.capabilities).
ALTER TABLE tasks ADD COLUMN required_caps text[] NOT NULL DEFAULT '{}';

-- Project-scoped claims and the fairness job probe open tasks of one project and skill.
CREATE INDEX tasks_open_project ON tasks (project_id, skill, eff_priority DESC, seq)
    WHERE status = 'open';

-- The fairness job counts each skill's claims of the last window.
CREATE INDEX assignments_claimed_at ON assignments (claimed_at);

-- Per-skill scarcity, refreshed by the routing job (never computed per claim):
-- how many active qualified experts could take the skill's open backlog.
CREATE TABLE skill_scarcity (
    skill           text PRIMARY KEY,
    active_experts  integer NOT NULL,
    open_backlog    integer NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
