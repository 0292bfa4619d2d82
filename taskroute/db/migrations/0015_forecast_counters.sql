-- Issues 16 and 17: a forecast is an index probe, not a recount of the project's tasks.
--
-- Task counts per (project, skill, status). Every statement that inserts, updates or deletes
-- tasks appends what it changed to `task_count_deltas` from a statement-level trigger, in the
-- same transaction (claim, submit, ingest, cancel, retraction, sweeper, quality: every path,
-- including ones added later). Appending never locks an existing row, so concurrent claims of
-- one project do not queue behind a hot counter row; a job (resolvers/task_counts.py) folds
-- the deltas into `task_counts`. A count is `task_counts` plus the deltas not yet folded
-- (queries/task_counts.sql), so it is exact at any moment.
CREATE TABLE task_counts (
    project_id uuid NOT NULL,
    skill      text NOT NULL,
    status     text NOT NULL,
    n          bigint NOT NULL,
    PRIMARY KEY (project_id, skill, status)
);

CREATE TABLE task_count_deltas (
    project_id uuid NOT NULL,
    skill      text NOT NULL,
    status     text NOT NULL,
    n          integer NOT NULL
);
CREATE INDEX task_count_deltas_project ON task_count_deltas (project_id);

-- One delta row per (project, skill, status) the statement changed; an UPDATE that moved no
-- task between statuses (a heartbeat's lease, a priority bump) appends nothing.
CREATE FUNCTION taskroute_task_counts_delta() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO task_count_deltas (project_id, skill, status, n)
        SELECT project_id, skill, status, count(*) FROM new_rows GROUP BY 1, 2, 3;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO task_count_deltas (project_id, skill, status, n)
        SELECT project_id, skill, status, -count(*) FROM old_rows GROUP BY 1, 2, 3;
    ELSE
        INSERT INTO task_count_deltas (project_id, skill, status, n)
        SELECT project_id, skill, status, sum(d) FROM (
            SELECT project_id, skill, status, 1 AS d FROM new_rows
            UNION ALL
            SELECT project_id, skill, status, -1 FROM old_rows
        ) moved
        GROUP BY 1, 2, 3 HAVING sum(d) <> 0;
    END IF;
    RETURN NULL;
END
$fn$;

-- Created before the backfill: the trigger's lock on tasks holds writers off until commit,
-- so no change falls between the recount and the first delta.
CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION taskroute_task_counts_delta();
CREATE TRIGGER tasks_count_update AFTER UPDATE ON tasks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION taskroute_task_counts_delta();
CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION taskroute_task_counts_delta();

INSERT INTO task_counts (project_id, skill, status, n)
SELECT project_id, skill, status, count(*) FROM tasks GROUP BY 1, 2, 3;

-- The pace of each expert, kept from the work itself: their newest PACE_KEPT (40) submitted
-- assignments (any skill), newest first, as parallel arrays. Maintained by triggers on
-- assignments in the submitting transaction, so a forecast reads one row per present expert
-- instead of walking the submission history. The row belongs to one expert, whose submits
-- follow one another (one live claim each): no two experts ever write the same row.
CREATE TABLE expert_pace (
    expert_id      uuid PRIMARY KEY REFERENCES experts (id),
    assignment_ids uuid[] NOT NULL,
    skills         text[] NOT NULL,
    claimed_at     timestamptz[] NOT NULL,
    submitted_at   timestamptz[] NOT NULL
);

-- Merges submitted assignments (parallel arrays, any experts) into their experts' rows: an
-- assignment already kept is replaced (a restamp, a retraction), the newest 40 are kept.
CREATE FUNCTION taskroute_pace_merge(
    p_ids uuid[], p_experts uuid[], p_tasks uuid[], p_claimed timestamptz[],
    p_submitted timestamptz[]
) RETURNS void
LANGUAGE sql AS $fn$
WITH fresh AS (
    SELECT u.id, u.expert_id, t.skill, u.claimed_at, u.submitted_at
    FROM unnest(p_ids, p_experts, p_tasks, p_claimed, p_submitted)
         AS u(id, expert_id, task_id, claimed_at, submitted_at)
    JOIN tasks t ON t.id = u.task_id
    WHERE u.submitted_at IS NOT NULL
),
kept AS (
    SELECT k.id, p.expert_id, k.skill, k.claimed_at, k.submitted_at
    FROM expert_pace p,
         unnest(p.assignment_ids, p.skills, p.claimed_at, p.submitted_at)
             AS k(id, skill, claimed_at, submitted_at)
    WHERE p.expert_id IN (SELECT expert_id FROM fresh)
      AND k.id NOT IN (SELECT id FROM fresh)
),
ranked AS (
    SELECT m.*, row_number() OVER (PARTITION BY m.expert_id ORDER BY m.submitted_at DESC) AS r
    FROM (SELECT * FROM fresh UNION ALL SELECT * FROM kept) m
)
INSERT INTO expert_pace AS e (expert_id, assignment_ids, skills, claimed_at, submitted_at)
SELECT expert_id,
       array_agg(id ORDER BY submitted_at DESC),
       array_agg(skill ORDER BY submitted_at DESC),
       array_agg(claimed_at ORDER BY submitted_at DESC),
       array_agg(submitted_at ORDER BY submitted_at DESC)
FROM ranked WHERE r <= 40
GROUP BY expert_id
ORDER BY expert_id
ON CONFLICT (expert_id) DO UPDATE
SET assignment_ids = EXCLUDED.assignment_ids, skills = EXCLUDED.skills,
    claimed_at = EXCLUDED.claimed_at, submitted_at = EXCLUDED.submitted_at;
$fn$;

-- A submit (one row): fires only when a submission appears or is restamped.
CREATE FUNCTION taskroute_pace_row() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM taskroute_pace_merge(ARRAY[NEW.id], ARRAY[NEW.expert_id], ARRAY[NEW.task_id],
                                 ARRAY[NEW.claimed_at], ARRAY[NEW.submitted_at]);
    RETURN NULL;
END
$fn$;

-- Rows inserted already submitted (imports, histories built in SQL): once per statement.
CREATE FUNCTION taskroute_pace_statement() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM taskroute_pace_merge(array_agg(id), array_agg(expert_id), array_agg(task_id),
                                 array_agg(claimed_at), array_agg(submitted_at))
    FROM new_rows WHERE status = 'submitted'
    HAVING count(*) > 0;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER assignments_pace_update AFTER UPDATE OF status, claimed_at, submitted_at
    ON assignments FOR EACH ROW
    WHEN (NEW.status = 'submitted'
          AND (OLD.status, OLD.claimed_at, OLD.submitted_at)
              IS DISTINCT FROM (NEW.status, NEW.claimed_at, NEW.submitted_at))
    EXECUTE FUNCTION taskroute_pace_row();
CREATE TRIGGER assignments_pace_insert AFTER INSERT ON assignments
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION taskroute_pace_statement();

SELECT taskroute_pace_merge(array_agg(id), array_agg(expert_id), array_agg(task_id),
                            array_agg(claimed_at), array_agg(submitted_at))
FROM (SELECT a.*, row_number() OVER (PARTITION BY expert_id ORDER BY submitted_at DESC) AS r
      FROM assignments a WHERE status = 'submitted') s
WHERE r <= 40
HAVING count(*) > 0;
