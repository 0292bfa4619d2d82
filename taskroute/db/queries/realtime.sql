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
-- $1 project ids. Per project its status ('completed' with its time) and counts of
-- tasks by state (gold servings are not customer work), as project_progress.
SELECT p.id AS project_id, p.status, p.completed_at, c.*
FROM projects p
CROSS JOIN LATERAL (
    {{ project_task_counts(p.id) }}
) c
WHERE p.id = ANY ($1::uuid[]);


-- name: wake_take
-- Wake tickets (realtime/tickets.py). One row per announcement this process wants units of:
-- $1 ticket keys, $2 tasks each announced, $3 units wanted (this process's idle subscribers
-- able to take them). One row per candidate subscriber: $4 its ticket key, $5 its rank among
-- that ticket's candidates (1..wanted), $6 the process's id for it, $7 expert_id, $8 skill,
-- $9 project_id, $10 min_quality, $11 attempt; $12 seconds a delivery waits for its expert to
-- be seen before it is announced again.
-- Each ticket row is locked by the upsert, so concurrent takers of one announcement run one
-- after the other and together never get more than `announced`; a taker gets
-- least(wanted, what is left). A delivery is recorded for the first `granted` candidates of
-- each ticket; the rows returned are the grants (none for a ticket: nothing left).
-- The rows are upserted (so locked) in key order: each process batches the tickets it heard
-- in an order of its own (a ticket taken again goes last), and two takers locking in batch
-- order deadlocked, failing one take whose process then woke its subscribers uncoordinated.
WITH took AS (
    INSERT INTO wake_tickets AS t (key, announced, taken, last_take)
    SELECT w.key, w.announced, least(w.announced, w.wanted), least(w.announced, w.wanted)
    FROM unnest($1::text[], $2::int[], $3::int[]) AS w(key, announced, wanted)
    ORDER BY w.key
    ON CONFLICT (key) DO UPDATE
        SET taken = t.taken + least(t.announced - t.taken, excluded.last_take),
            last_take = least(t.announced - t.taken, excluded.last_take)
    RETURNING t.key, t.last_take AS granted
)
INSERT INTO wake_deliveries
    (ticket, subscriber, expert_id, skill, project_id, min_quality, attempt, due_at)
SELECT c.key, c.subscriber, c.expert_id, c.skill, c.project_id, c.min_quality, c.attempt,
       taskroute_now() + make_interval(secs => $12)
FROM unnest($4::text[], $5::int[], $6::bigint[], $7::uuid[], $8::text[], $9::uuid[],
            $10::real[], $11::int[])
     AS c(key, rank, subscriber, expert_id, skill, project_id, min_quality, attempt)
JOIN took ON took.key = c.key AND c.rank <= took.granted
RETURNING id, ticket, subscriber;

-- name: wake_hand_back
-- $1 delivery ids whose subscriber left before its hint was sent. Forgets them and returns
-- what to announce again, per (skill, project): units, least min_quality, attempt.
WITH gone AS (
    DELETE FROM wake_deliveries WHERE id = ANY ($1::bigint[]) RETURNING *
)
SELECT skill, project_id, count(*)::int AS units, min(min_quality) AS min_quality,
       max(attempt) AS attempt, ARRAY[]::uuid[] AS skip
FROM gone
GROUP BY skill, project_id;

-- name: wake_reap
-- $1 how many times a unit may be announced in all, $2 seconds a ticket row is kept.
-- Deliveries whose window has passed, split among processes reaping at once (SKIP LOCKED),
-- are forgotten. A delivery whose expert was seen since being woken (experts.last_seen_at:
-- any claim, even one that found nothing, and heartbeats, which mean the expert is busy) is
-- done. The others are returned to be announced again, per (skill, project), without their
-- experts ("skip"), while the project still has open tasks of the skill and attempts are left.
-- Tickets older than $2 are forgotten too: every listener heard their NOTIFY long ago.
WITH due AS (
    SELECT id FROM wake_deliveries WHERE due_at <= taskroute_now()
    ORDER BY due_at LIMIT 1000
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM wake_deliveries d USING due WHERE d.id = due.id RETURNING d.*
), old_tickets AS (
    DELETE FROM wake_tickets WHERE created_at < taskroute_now() - make_interval(secs => $2)
)
SELECT g.skill, g.project_id, count(*)::int AS units, min(g.min_quality) AS min_quality,
       max(g.attempt) + 1 AS attempt, array_agg(g.expert_id) AS skip
FROM gone g
LEFT JOIN experts e ON e.id = g.expert_id
WHERE g.attempt < $1
  AND (e.last_seen_at IS NULL OR e.last_seen_at < g.woken_at)
  AND EXISTS (
      SELECT 1 FROM tasks t
      WHERE t.project_id = g.project_id AND t.skill = g.skill AND t.status = 'open'
  )
GROUP BY g.skill, g.project_id;
