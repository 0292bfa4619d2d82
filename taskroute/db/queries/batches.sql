-- Batches: background ingest jobs, payload URLs, the audit log.

-- name: ingest_job_insert
-- $1 project_id, $2 customer_id, $3 kind ('create' | 'add'), $4 tasks_total, $5 chunk count.
INSERT INTO ingest_jobs (project_id, customer_id, kind, tasks_total, chunks_left)
VALUES ($1, $2, $3, $4, $5)
RETURNING *;

-- name: ingest_chunks_insert
-- $1 job_id; parallel arrays $2 chunk numbers, $3 first task indexes, $4 task counts, $5 the
-- chunks' texts (NULL where the text is in the blob store), $6 their blob keys (NULL where the
-- text is in $5); $7 every task's payload key in request order (each chunk takes its slice).
INSERT INTO ingest_chunks (job_id, chunk_no, first_index, task_count, body, body_key,
                           payload_keys)
SELECT $1, u.chunk_no, u.first_index, u.task_count, u.body, u.body_key,
       ($7::text[])[u.first_index + 1 : u.first_index + u.task_count]
FROM unnest($2::int[], $3::int[], $4::int[], $5::text[], $6::text[])
     AS u(chunk_no, first_index, task_count, body, body_key);

-- name: ingest_chunk_claim
-- No parameters. The first free chunk of the longest-due job, locked for this transaction;
-- chunks other workers (in any process) hold are skipped. Jobs are walked in the order of
-- the partial index `ingest_jobs_due`, each probed for one chunk (no sort of all chunks). A
-- worker that dies releases its lock with its connection, so the chunk is claimed again.
SELECT c.job_id, c.chunk_no, c.first_index, c.task_count, c.body, c.body_key, c.payload_keys,
       j.project_id, j.kind
FROM ingest_jobs j
CROSS JOIN LATERAL (
    SELECT * FROM ingest_chunks c
    WHERE c.job_id = j.id
    ORDER BY c.chunk_no
    LIMIT 1
    FOR UPDATE SKIP LOCKED
) c
WHERE j.state IN ('queued', 'running', 'retrying') AND j.next_attempt_at <= taskroute_now()
ORDER BY j.next_attempt_at
LIMIT 1;

-- name: project_lock_share
-- $1 project_id. Held while tasks are inserted, so a concurrent cancel waits and then
-- cancels them too (it never misses tasks that commit after it looked).
SELECT status FROM projects WHERE id = $1 FOR SHARE;

-- name: ingest_chunk_delete
-- $1 job_id, $2 chunk_no. In the transaction that stored the chunk's tasks: exactly once.
-- The chunk's text in the blob store is queued for deletion in the same transaction; the
-- worker deletes it right after the commit (ingest_request_deleted), so the queue only
-- keeps the keys of workers that died in between, for the retention job.
WITH done AS (
    DELETE FROM ingest_chunks WHERE job_id = $1 AND chunk_no = $2
    RETURNING job_id, body_key
)
INSERT INTO blob_deletions (key, project_id, queued_at, kind)
SELECT d.body_key, j.project_id, taskroute_now(), 'request'
FROM done d JOIN ingest_jobs j ON j.id = d.job_id
WHERE d.body_key IS NOT NULL
ON CONFLICT (key) DO NOTHING;

-- name: ingest_request_deleted
-- $1 blob key of a stored chunk's text, just deleted from the store by the worker.
DELETE FROM blob_deletions WHERE key = $1 AND kind = 'request';

-- name: ingest_job_progress
-- $1 job_id, $2 task specs the chunk held. The row lock serialises workers finishing chunks
-- of one job, so exactly one of them sees the last chunk go and marks the job done.
UPDATE ingest_jobs
SET tasks_stored = tasks_stored + $2,
    chunks_left = chunks_left - 1,
    attempts = 0,
    error = NULL,
    state = CASE WHEN chunks_left - 1 = 0 THEN 'done' ELSE 'running' END,
    finished_at = CASE WHEN chunks_left - 1 = 0 THEN taskroute_now() END,
    updated_at = taskroute_now()
WHERE id = $1
RETURNING state, kind, project_id;

-- name: project_activate
-- $1 project_id. The create job stored its last chunk: the project's tasks become claimable.
UPDATE projects SET status = 'active' WHERE id = $1 AND status = 'ingesting';

-- name: ingest_job_attempt_failed
-- $1 job_id, $2 error, $3 back-off base seconds, $4 back-off max seconds, $5 attempts after
-- which the job fails for good (NULL: retry forever, e.g. while the object store is down).
UPDATE ingest_jobs
SET attempts = attempts + 1,
    error = $2,
    state = CASE WHEN $5::int IS NOT NULL AND attempts + 1 >= $5 THEN 'failed'
                 ELSE 'retrying' END,
    finished_at = CASE WHEN $5::int IS NOT NULL AND attempts + 1 >= $5 THEN taskroute_now() END,
    next_attempt_at = taskroute_now() + make_interval(secs => least($4::float8,
                                                          $3::float8 * 2 ^ least(attempts, 30))),
    updated_at = taskroute_now()
WHERE id = $1 AND state IN ('queued', 'running', 'retrying')
RETURNING state, attempts, next_attempt_at, project_id;

-- name: ingest_job_cancel
-- $1 job_id. The project was canceled: the rest of the batch is dropped. Chunks another
-- worker holds are skipped (waiting for them could deadlock on the job row); that worker
-- sees the cancel itself and drops its chunk the same way. The payload keys of the dropped
-- chunks are queued for deletion (retention.sql): a worker may have written some (this very
-- chunk, or an attempt that crashed) and no item will ever reference them; deleting a blob
-- that was never written is harmless, and one an item does reference is kept.
WITH job AS (
    UPDATE ingest_jobs SET state = 'canceled', finished_at = taskroute_now(), updated_at = taskroute_now()
    WHERE id = $1 AND state IN ('queued', 'running', 'retrying')
),
dropped AS (
    DELETE FROM ingest_chunks c
    WHERE (c.job_id, c.chunk_no) IN (
        SELECT job_id, chunk_no FROM ingest_chunks WHERE job_id = $1 FOR UPDATE SKIP LOCKED
    )
    RETURNING c.job_id, c.body_key, c.payload_keys
)
INSERT INTO blob_deletions (key, project_id, queued_at, kind)
{{ chunk_payload_keys(dropped) }}
ON CONFLICT (key) DO NOTHING;

-- name: ingest_chunks_of_canceled_delete
-- No parameters. Chunks left behind by a canceled job (a worker that held one while the job
-- was canceled, then failed or died): dropped by an idle worker. The table only holds
-- pending work, so the scan is small. Their payload keys are queued for deletion, as in
-- ingest_job_cancel.
WITH dropped AS (
    DELETE FROM ingest_chunks c
    WHERE (c.job_id, c.chunk_no) IN (
        SELECT c2.job_id, c2.chunk_no
        FROM ingest_chunks c2 JOIN ingest_jobs j ON j.id = c2.job_id
        WHERE j.state = 'canceled'
        FOR UPDATE OF c2 SKIP LOCKED
    )
    RETURNING c.job_id, c.body_key, c.payload_keys
)
INSERT INTO blob_deletions (key, project_id, queued_at, kind)
{{ chunk_payload_keys(dropped) }}
ON CONFLICT (key) DO NOTHING;

-- name: ingest_status
-- $1 project_id. All the project's ingest jobs as one: the most pressing state first
-- (retrying > running > queued > failed > canceled > done), the newest error. No row when
-- the project never had a background ingest.
SELECT (array_agg(state ORDER BY array_position(
            ARRAY['retrying', 'running', 'queued', 'failed', 'canceled', 'done'], state)))[1]
           AS state,
       sum(tasks_stored)::int AS tasks_stored,
       sum(tasks_total)::int AS tasks_total,
       (array_agg(error ORDER BY updated_at DESC) FILTER (WHERE error IS NOT NULL))[1]
           AS error,
       count(*)::int AS jobs
FROM ingest_jobs WHERE project_id = $1
HAVING count(*) > 0;

-- name: server_secret_get_or_create
-- $1 name, $2 a fresh random secret (kept only if no process stored one first).
WITH ins AS (
    INSERT INTO server_secrets (name, secret) VALUES ($1, $2)
    ON CONFLICT (name) DO NOTHING
    RETURNING secret
)
SELECT secret FROM ins
UNION ALL
SELECT secret FROM server_secrets WHERE name = $1
LIMIT 1;

-- name: payload_fetch_check
-- $1 assignment_id, $2 expert_id. The payload of a task, only while this expert holds its
-- live lease (the task row still names the assignment; the assignment's lease, the lease:
-- the task row's is a lower bound, queries/claims.sql). payload_deleted_at: set once
-- retention deleted the payload (a lease of a canceled project may outlive it). The task by
-- primary key, no status literal (see claims.sql: assignment_heartbeat).
SELECT a.task_id, a.project_id, p.customer_id, i.payload, i.payload_key, i.payload_deleted_at,
       extract(epoch FROM a.lease_until - taskroute_now()) AS lease_seconds_left
FROM assignments a
JOIN tasks t ON t.id = a.task_id AND t.assignment_id = a.id AND t.lease_until IS NOT NULL
JOIN items i ON i.id = a.item_id
JOIN projects p ON p.id = a.project_id
WHERE a.id = $1 AND a.expert_id = $2 AND a.status = 'active' AND a.lease_until > taskroute_now();

-- name: audit_log_page
-- $1 customer_id scope (NULL: admin, everyone's), $2 project_id or NULL, $3 expert_id or NULL,
-- $4 return entries after this seq (0: from the start), $5 page size.
SELECT seq, expert_id, customer_id, project_id, task_id, action, at
FROM audit_log
WHERE ($1::uuid IS NULL OR customer_id = $1)
  AND ($2::uuid IS NULL OR project_id = $2)
  AND ($3::uuid IS NULL OR expert_id = $3)
  AND seq > $4
ORDER BY seq
LIMIT $5;
