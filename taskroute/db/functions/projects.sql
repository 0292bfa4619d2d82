-- Project completion inside the database. `{{ name(args) }}` splices the named blocks of
-- queries/projects.sql.

-- Moves a project between 'active' and 'completed' so that it is 'completed' exactly when it
-- has customer work and none is left (queries/projects.sql: project_settle). Called in the
-- transaction that ends slots (submit, a failed lease, an adjudication no longer needed) or
-- adds work (addTasks, a queued batch, retraction). Returns the new status, NULL if unchanged.
--
-- Why a lock: under READ COMMITTED two submits that end the last two slots each see the
-- other's slot still claimed, and neither would complete the project. So the decision is
-- taken under a per-project advisory lock held to commit, by a statement whose snapshot
-- starts after the lock was granted (it sees whoever held the lock before). Everything that
-- adds work takes the lock too, before reading anything, so a project is never completed
-- over new work.
--
-- Why a probe first (p_probe): the lock serialises commits, and submits are the hot path.
-- If some slot of the remaining work is not being changed by another transaction, this one
-- locks it FOR SHARE and stops: whoever ends that slot later must wait for this transaction
-- to commit (their UPDATE conflicts with the share lock), so they will see our work and
-- settle the project themselves. Only the last few submits of a project (every remaining
-- slot is in some in-flight transaction's hands) take the lock. Adders pass false. The probe
-- takes the open slot claims want last, and a claimed one (whose submit would wait for us)
-- only when no open one is free.
CREATE OR REPLACE FUNCTION taskroute_project_settle(p_project uuid, p_probe boolean) RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
    v_status text;
    v_timeout text;
    v_found boolean := false;
BEGIN
    IF p_probe THEN
        -- The probe must never wait: a submit gets here holding its project's result-feed
        -- lock, and the submit that holds the probed row may be waiting for that lock.
        -- SKIP LOCKED does not cover every wait (Postgres 15 waits when it follows a row's
        -- update chain, "while locking updated version"), which deadlocked two submits of
        -- one project. So the probe runs under a short lock_timeout in a subtransaction; if
        -- it would wait, it is treated as finding nothing and the lock below decides.
        v_timeout := current_setting('lock_timeout');
        BEGIN
            PERFORM set_config('lock_timeout', '20ms', true);
            PERFORM 1 FROM ({{ project_work_probe_open(p_project) }}) w;
            v_found := FOUND;
            IF NOT v_found THEN
                PERFORM 1 FROM ({{ project_work_probe_claimed(p_project) }}) w;
                v_found := FOUND;
            END IF;
            PERFORM set_config('lock_timeout', v_timeout, true);
        EXCEPTION WHEN lock_not_available THEN
            PERFORM set_config('lock_timeout', v_timeout, true);
            v_found := false;
        END;
        IF v_found THEN
            RETURN NULL;
        END IF;
    END IF;
    PERFORM pg_advisory_xact_lock({{ project_settle_lock_key(p_project) }});
    {{ project_settle(p_project) }} INTO v_status;
    RETURN v_status;
END
$fn$;

-- When a slot left the remaining work (done, failed or canceled): the burn-down's history is
-- rebuilt from created_at (+1) and finished_at (-1). Set by a trigger, not by each statement,
-- so every path that ends a slot (submit, sweeper, cancel, adjudication no longer needed,
-- released gold, and paths added later) records it; the WHEN clause runs in C, so heartbeats
-- and claims do not enter the function, nor statements that set finished_at themselves (the
-- submit's task_done).
CREATE OR REPLACE FUNCTION taskroute_task_finished() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    NEW.finished_at := taskroute_now();
    RETURN NEW;
END
$fn$;

CREATE OR REPLACE TRIGGER tasks_finished BEFORE UPDATE OF status ON tasks
    FOR EACH ROW
    -- array constants, not IN lists: the condition is read back from its stored node text by
    -- every statement that changes a task's status (migrations/0011 says why that matters)
    WHEN (NEW.status = ANY ('{done,failed,canceled}'::text[])
          AND OLD.status <> ALL ('{done,failed,canceled}'::text[])
          AND NEW.finished_at IS NOT DISTINCT FROM OLD.finished_at)
    EXECUTE FUNCTION taskroute_task_finished();
