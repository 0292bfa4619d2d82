-- Realtime: NOTIFY senders, the debouncer's commit check, and what subscriptions re-read.

-- name: notify_many
-- $1 channels, $2 payloads (parallel arrays). Inside a transaction the notifications are
-- delivered only at commit, and not at all on rollback.
SELECT count(pg_notify(u.channel, u.payload))
FROM unnest($1::text[], $2::text[]) AS u(channel, payload);

-- name: xact_id_current
-- The current transaction's id (assigned now if it had none), as text.
SELECT pg_current_xact_id()::text;

-- name: xact_status_many
-- $1 transaction ids as text. 'committed' | 'aborted' | 'in progress' | NULL (too old to know).
SELECT u.xid, pg_xact_status(u.xid::xid8) AS status FROM unnest($1::text[]) AS u(xid);

-- name: expert_skills_available
-- $1 expert_id, $2 skills to restrict to (NULL: all). Each skill the expert may claim in
-- (eligible_skills), with the expert's quality in it and the project of one open task the
-- expert may take in it now (task_eligible; NULL if none).
SELECT s.skill, s.quality, c.project_id
FROM ({{ eligible_skills($1, $2) }}) s
LEFT JOIN LATERAL (
    SELECT t.project_id
    FROM tasks t
    WHERE t.status = 'open' AND t.skill = s.skill
      AND {{ task_eligible(t, s, $1) }}
    ORDER BY t.eff_priority DESC, t.seq
    LIMIT 1
) c ON true
ORDER BY s.skill;

-- name: projects_progress_many
-- $1 project ids. Per project its status (issue 13: 'completed' with its time) and counts of
-- tasks by state (gold servings are not customer work), as project_progress.
SELECT p.id AS project_id, p.status, p.completed_at, c.*
FROM projects p
CROSS JOIN LATERAL (
    SELECT count(*) AS total,
           count(*) FILTER (WHERE t.status IN ('open', 'pending')) AS open,
           count(*) FILTER (WHERE t.status = 'claimed') AS claimed,
           count(*) FILTER (WHERE t.status = 'done') AS done,
           count(*) FILTER (WHERE t.status = 'failed') AS failed,
           count(*) FILTER (WHERE t.status = 'canceled') AS canceled
    FROM tasks t WHERE t.project_id = p.id AND t.kind <> 'gold'
) c
WHERE p.id = ANY ($1::uuid[]);

