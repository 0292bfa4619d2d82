-- Customers, experts, their skills and credentials; the admin audit.

-- name: customer_insert
-- $1 name
INSERT INTO customers (name) VALUES ($1) RETURNING id;

-- name: expert_insert
-- $1 name, $2 capabilities
INSERT INTO experts (name, capabilities) VALUES ($1, $2) RETURNING id;

-- name: expert_skills_insert
-- $1 expert_id, $2 skills, $3 qualities (parallel arrays)
INSERT INTO expert_skills (expert_id, skill, quality, starting_quality)
SELECT $1, s.skill, s.quality, s.quality FROM unnest($2::text[], $3::real[]) AS s(skill, quality);

-- name: credential_insert
-- $1 sha256(token), $2 role, $3 customer_id, $4 expert_id, $5 label, $6 expires_at,
-- $7 read_only, $8 project_id, $9 rotated_from
INSERT INTO credentials (token_hash, role, customer_id, expert_id, label, expires_at,
                         read_only, project_id, rotated_from)
VALUES ($1, $2, $3, $4, coalesce($5, ''), $6, coalesce($7, false), $8, $9)
RETURNING *;

-- name: credential_lookup
-- $1 sha256(token). Revoked or expired credentials, and those of disabled experts, do not
-- authenticate. Records the last use when the stored one is over a minute old: a miss of the
-- credential cache is rare, so this write is too (cache hits are batched by LastUse). A fresh
-- last use is tested first: ON CONFLICT locks the row it finds even when it then updates
-- nothing, and that lock alone would make every lookup a write that waits for a WAL flush.
WITH c AS (
    SELECT cr.id, cr.role, cr.customer_id, cr.expert_id, cr.read_only, cr.project_id,
           cr.expires_at
    FROM credentials cr
    LEFT JOIN experts e ON e.id = cr.expert_id
    WHERE cr.token_hash = $1 AND cr.revoked_at IS NULL
      AND (cr.expires_at IS NULL OR cr.expires_at > taskroute_now())
      AND (cr.expert_id IS NULL OR e.status = 'active')
),
touched AS (
    INSERT INTO credential_last_use (credential_id, last_used_at)
    SELECT id, taskroute_now() FROM c
    WHERE NOT EXISTS (
        SELECT 1 FROM credential_last_use u
        WHERE u.credential_id = c.id AND u.last_used_at >= taskroute_now() - interval '1 minute')
    ON CONFLICT (credential_id) DO UPDATE SET last_used_at = excluded.last_used_at
    WHERE credential_last_use.last_used_at < excluded.last_used_at - interval '1 minute'
)
SELECT * FROM c;

-- name: credentials_expired_since
-- $1 the clock's time this process last asked (NULL: never). The clock's time now, and the
-- token hashes of the credentials that expired in between (a rotated token's grace ended):
-- the database's clock decides expiry, and no trigger can say when it passes. Rarely any rows.
SELECT n.now,
       coalesce((SELECT array_agg(c.token_hash) FROM credentials c
                 WHERE c.expires_at > $1 AND c.expires_at <= n.now
                   AND c.revoked_at IS NULL), '{}') AS expired
FROM (SELECT taskroute_now() AS now) n;

-- name: credential_last_use_flush
-- $1 credential ids, $2 last-use times (parallel arrays). Batched from every process's cache
-- hits; never moves a last use backwards.
INSERT INTO credential_last_use (credential_id, last_used_at)
SELECT u.id, u.at FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, at)
JOIN credentials c ON c.id = u.id
ON CONFLICT (credential_id) DO UPDATE SET last_used_at = excluded.last_used_at
WHERE credential_last_use.last_used_at < excluded.last_used_at;

-- name: credential_get
-- $1 credential id. With its last use.
SELECT c.*, u.last_used_at FROM credentials c
LEFT JOIN credential_last_use u ON u.credential_id = c.id
WHERE c.id = $1;

-- name: credential_get_for_update
-- $1 credential id.
SELECT * FROM credentials WHERE id = $1 FOR UPDATE;

-- name: credentials_of
-- $1 customer_id or NULL, $2 expert_id or NULL: the account's credentials, newest first;
-- $3 project_id or NULL: only the tokens limited to that project (what a project token sees).
SELECT c.*, u.last_used_at FROM credentials c
LEFT JOIN credential_last_use u ON u.credential_id = c.id
WHERE (($1::uuid IS NOT NULL AND c.customer_id = $1) OR ($2::uuid IS NOT NULL AND c.expert_id = $2))
  AND ($3::uuid IS NULL OR c.project_id = $3)
ORDER BY c.created_at DESC, c.id;

-- name: credential_revoke
-- $1 credential id. Idempotent: an already revoked credential keeps its first revocation time.
UPDATE credentials SET revoked_at = coalesce(revoked_at, taskroute_now()) WHERE id = $1 RETURNING *;

-- name: credential_expire_in
-- $1 credential id, $2 seconds from now (rotation's grace period): never extends an expiry.
UPDATE credentials
SET expires_at = least(coalesce(expires_at, taskroute_now() + make_interval(secs => $2)),
                       taskroute_now() + make_interval(secs => $2))
WHERE id = $1 RETURNING *;

-- name: customer_get
-- $1 customer id.
SELECT * FROM customers WHERE id = $1;

-- name: customer_projects_summary
-- $1 customer id, $2 project id or NULL. Project counts by status and task counts by state
-- (gold servings left out), over all projects ($2 set: that one project only, what a project
-- token may see): from the maintained counts (task_counts.sql), index probes per project,
-- not a recount of every task the customer ever had.
WITH mine AS (
    SELECT id, status FROM projects
    WHERE customer_id = $1 AND ($2::uuid IS NULL OR id = $2)
)
SELECT
    (SELECT count(*) FROM mine)::int AS projects,
    (SELECT count(*) FROM mine WHERE status = 'active')::int AS active,
    (SELECT count(*) FROM mine WHERE status = 'completed')::int AS completed,
    (SELECT count(*) FROM mine WHERE status = 'canceled')::int AS canceled,
    coalesce(sum(c.n), 0)::int AS tasks,
    coalesce(sum(c.n) FILTER (WHERE c.status = 'done'), 0)::int AS done,
    coalesce(sum(c.n) FILTER (WHERE c.status IN ('open', 'pending', 'claimed')), 0)::int
        AS remaining
FROM mine p
CROSS JOIN LATERAL ({{ task_counts_of(p.id) }}) c
WHERE NOT c.gold;

-- name: customers_page
-- $1 name search (substring, case-insensitive; NULL: all), $2 after created_at, $3 after id
-- ($2 NULL: from the newest), $4 max rows. Newest first; (created_at, id) is the cursor.
SELECT * FROM customers
WHERE ($1::text IS NULL OR name ILIKE '%' || $1 || '%')
  AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3::uuid))
ORDER BY created_at DESC, id DESC
LIMIT $4;

-- name: expert_get
-- $1 expert id.
SELECT * FROM experts WHERE id = $1;

-- name: experts_named
-- $1 a whole name (any case), $2 max rows. For naming an expert in the admin CLI; the experts
-- table is read whole (no index on names: an operator's lookup, not a request path).
SELECT id, name, status, created_at FROM experts
WHERE lower(name) = lower($1)
ORDER BY created_at, id
LIMIT $2;

-- name: expert_get_for_update
-- $1 expert id. The expert row first: the lock order of claims and heartbeats.
SELECT * FROM experts WHERE id = $1 FOR UPDATE;

-- name: experts_page
-- $1 skill (NULL: any), $2 status (NULL: any), $3 name search (NULL: all), $4 after created_at,
-- $5 after id, $6 max rows. Newest first; (created_at, id) is the cursor.
SELECT * FROM experts e
WHERE ($1::text IS NULL OR EXISTS (
        SELECT 1 FROM expert_skills s WHERE s.expert_id = e.id AND s.skill = $1))
  AND ($2::text IS NULL OR e.status = $2)
  AND ($3::text IS NULL OR e.name ILIKE '%' || $3 || '%')
  AND ($4::timestamptz IS NULL OR (e.created_at, e.id) < ($4, $5::uuid))
ORDER BY e.created_at DESC, e.id DESC
LIMIT $6;

-- name: expert_skills_list
-- $1 expert id. Every skill, active or paused, with where its quality came from.
SELECT skill, status, status_reason, status_at, quality, gold_seen, gold_correct, tasks_done
FROM expert_skills WHERE expert_id = $1 ORDER BY skill;

-- name: expert_skills_own_view
-- $1 expert id, $2 period (seconds), $3 least gold answers shown. What the expert is shown of
-- their own skills: gold figures and quality count only the gold answers submitted before the
-- start of the current period on the database clock (periods aligned to the Unix epoch: a
-- day's starts at midnight UTC), and only once there are $3 of them; until then, none, and the
-- admin-given quality. So no single submit, gold or real, moves what the expert sees: a
-- period's answers show together, after it ends. Status (a pause) shows at once.
WITH cut AS (
    SELECT to_timestamp(floor(extract(epoch FROM taskroute_now()) / $2) * $2) AS at
),
g AS (
    SELECT t.skill, count(*)::int AS seen,
           count(*) FILTER (
               WHERE taskroute_gold_correct(a.answer, i.gold_answer, q.answer_field))::int
               AS correct
    FROM assignments a
    JOIN tasks t ON t.id = a.task_id AND t.kind = 'gold'
    JOIN items i ON i.id = a.item_id
    JOIN project_quality q ON q.project_id = a.project_id
    JOIN expert_skills s ON s.expert_id = a.expert_id AND s.skill = t.skill
    CROSS JOIN cut
    WHERE a.expert_id = $1 AND a.status = 'submitted'
      AND a.submitted_at < cut.at AND a.submitted_at >= s.granted_at
    GROUP BY t.skill
)
SELECT s.skill, s.status, s.status_reason, s.status_at, s.tasks_done,
       coalesce(g.seen, 0) >= $3 AS measured,
       CASE WHEN coalesce(g.seen, 0) >= $3 THEN g.seen ELSE 0 END AS gold_seen,
       CASE WHEN coalesce(g.seen, 0) >= $3 THEN g.correct ELSE 0 END AS gold_correct,
       CASE WHEN coalesce(g.seen, 0) >= $3 THEN (1 + g.correct)::real / (2 + g.seen)
            ELSE s.starting_quality END AS quality
FROM expert_skills s
LEFT JOIN g ON g.skill = s.skill
WHERE s.expert_id = $1
ORDER BY s.skill;

-- name: expert_skill_grant
-- $1 expert id, $2 skill, $3 starting quality. NULL when the expert already holds the skill.
INSERT INTO expert_skills (expert_id, skill, quality, starting_quality) VALUES ($1, $2, $3, $3)
ON CONFLICT (expert_id, skill) DO NOTHING
RETURNING skill;

-- name: expert_skill_get_for_update
-- $1 expert id, $2 skill.
SELECT * FROM expert_skills WHERE expert_id = $1 AND skill = $2 FOR UPDATE;

-- name: expert_skill_remove
-- $1 expert id, $2 skill. The measured history (gold counts, tasks done) goes with the row;
-- the answers, payouts and audit lines that name the expert stay.
DELETE FROM expert_skills WHERE expert_id = $1 AND skill = $2 RETURNING *;

-- name: expert_skill_set_quality
-- $1 expert id, $2 skill, $3 quality (admin-given: the expert's own view shows it too).
UPDATE expert_skills SET quality = $3, starting_quality = $3
WHERE expert_id = $1 AND skill = $2 RETURNING *;

-- name: expert_set_capabilities
-- $1 expert id, $2 capability tags.
UPDATE experts SET capabilities = $2 WHERE id = $1 RETURNING *;

-- name: expert_set_status
-- $1 expert id, $2 'active' | 'disabled'. A trigger tells every process's credential
-- cache to drop the expert's tokens.
UPDATE experts SET status = $2::text WHERE id = $1 RETURNING *;

-- name: expert_current_claim
-- $1 expert id. The live claim, if any.
SELECT a.id AS assignment_id, a.task_id, a.project_id, t.skill, a.claimed_at, a.lease_until
FROM assignments a JOIN tasks t ON t.id = a.task_id
WHERE a.expert_id = $1 AND a.status = 'active';

-- name: leases_release_for_expert
-- $1 expert_id. Gives every live claim of the expert back (task row first, then the
-- assignment: the lock order): slots reopen, a gold serving is canceled (the item stays in the
-- pool). Call with the expert row locked.
WITH held AS (
    SELECT t.id, t.assignment_id
    FROM tasks t
    JOIN assignments a ON a.id = t.assignment_id
    WHERE t.status = 'claimed' AND a.expert_id = $1 AND a.status = 'active'
    FOR UPDATE OF t
),
released AS (
    UPDATE tasks t
    SET status = CASE WHEN t.kind = 'gold' THEN 'canceled' ELSE 'open' END,
        assignment_id = NULL, lease_until = NULL
    FROM held h WHERE t.id = h.id
    RETURNING t.id, h.assignment_id, t.skill, t.project_id, t.status, t.min_quality
),
released_assignments AS (
    UPDATE assignments a SET status = 'released'
    FROM released r WHERE a.id = r.assignment_id AND a.status = 'active'
)
SELECT id, assignment_id, skill, project_id, status, min_quality FROM released;

-- name: admin_audit_insert
-- $1 actor, $2 action, $3 subject kind, $4 subject id, $5 reason, $6 details (a JSON object)
INSERT INTO admin_audit (actor, action, subject_kind, subject_id, reason, details)
VALUES ($1, $2, $3, $4, $5, coalesce($6::jsonb, '{}'))
RETURNING seq;

-- name: admin_audit_page
-- $1 subject id (NULL: any), $2 action (NULL: any), $3 actor (NULL: any), $4 after seq
-- (0: from the start), $5 page size. Oldest first.
SELECT * FROM admin_audit
WHERE ($1::uuid IS NULL OR subject_id = $1)
  AND ($2::text IS NULL OR action = $2)
  AND ($3::text IS NULL OR actor = $3)
  AND seq > $4
ORDER BY seq
LIMIT $5;
