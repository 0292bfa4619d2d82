-- Project completion inside the database (issue 13). `{{ name(args) }}` splices the named
-- blocks of queries/projects.sql; migrate.py installs this file whenever it changes.

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
-- slot is in some in-flight transaction's hands) take the lock. Adders pass false.
CREATE FUNCTION taskroute_project_settle(p_project uuid, p_probe boolean) RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
    v_status text;
BEGIN
    IF p_probe THEN
        PERFORM 1 FROM ({{ project_work_probe_claimed(p_project) }}) w;
        IF FOUND THEN
            RETURN NULL;
        END IF;
        PERFORM 1 FROM ({{ project_work_probe_open(p_project) }}) w;
        IF FOUND THEN
            RETURN NULL;
        END IF;
    END IF;
    PERFORM pg_advisory_xact_lock({{ project_settle_lock_key(p_project) }});
    {{ project_settle(p_project) }} INTO v_status;
    RETURN v_status;
END
$fn$;
