-- Payload retention: the blobs of projects that ended, deleted after the project's
-- `payload_retention`; `blob_deletions` is the queue of keys to delete.

-- name: projects_payloads_due
-- $1 at most this many. Ended projects (canceled, or completed: completed_at is NULL again
-- once new work makes it active) whose retention ran out since they last ended and whose
-- payloads were not deleted since; longest ended first. Locked: adding work to a completed
-- project (FOR SHARE) waits for the expiry, or the expiry skips the project.
SELECT id, customer_id, coalesce(canceled_at, completed_at) AS ended_at,
       extract(epoch FROM payload_retention)::bigint AS retention_seconds
FROM projects
WHERE status IN ('canceled', 'completed')
  AND coalesce(canceled_at, completed_at) + payload_retention <= taskroute_now()
  AND (payloads_purged_at IS NULL
       OR payloads_purged_at < coalesce(canceled_at, completed_at))
ORDER BY coalesce(canceled_at, completed_at)
LIMIT $1
FOR UPDATE SKIP LOCKED;

-- name: project_payloads_expire
-- $1 project_id. The project's payloads stop being kept: its items still holding one are
-- marked (payload_deleted_at) and their inline copies cleared, their blob keys queued for
-- deletion, the project marked. Item rows stay, with payload_key and payload_bytes.
WITH expired AS (
    UPDATE items SET payload = NULL, payload_deleted_at = taskroute_now()
    WHERE project_id = $1 AND payload_deleted_at IS NULL
    RETURNING payload_key, payload_bytes
),
queued AS (
    INSERT INTO blob_deletions (key, project_id, queued_at)
    SELECT DISTINCT payload_key, $1::uuid, taskroute_now() FROM expired
    WHERE payload_key IS NOT NULL
    ON CONFLICT (key) DO NOTHING
    RETURNING key
),
marked AS (
    UPDATE projects SET payloads_purged_at = taskroute_now() WHERE id = $1 RETURNING 1
)
SELECT (SELECT count(*) FROM queued) AS keys_queued,
       count(*) AS items,
       count(DISTINCT payload_key) AS payload_keys,
       coalesce(sum(payload_bytes), 0) AS payload_bytes
FROM expired;

-- fragment: chunk_payload_keys
-- $1 a row source of dropped ingest chunks (job_id, body_key, payload_keys). What they may
-- have left in the blob store, with the job's project: their payloads (a worker may have
-- written some before it saw the cancel, or crashed) and their own text, if stored there.
SELECT DISTINCT k.key, j.project_id, taskroute_now() AS queued_at, k.kind
FROM $1 d
JOIN ingest_jobs j ON j.id = d.job_id
CROSS JOIN LATERAL (
    SELECT unnest(d.payload_keys), 'payload'
    UNION ALL
    SELECT d.body_key, 'request' WHERE d.body_key IS NOT NULL
) AS k(key, kind)

-- name: blob_deletions_take
-- $1 at most this many. Queued keys (locked) with their kind, each with whether an item whose
-- payload is kept still references it: those blobs stay (identical content of another
-- project, or of the same canceled project's earlier chunks; never a chunk's own text).
SELECT d.key, d.project_id, d.kind,
       EXISTS (SELECT 1 FROM items i
               WHERE i.payload_key = d.key AND i.payload_deleted_at IS NULL) AS in_use
FROM blob_deletions d
LIMIT $1
FOR UPDATE OF d SKIP LOCKED;

-- name: blob_deletions_done
-- $1 keys: deleted from the store, or kept because still in use.
DELETE FROM blob_deletions WHERE key = ANY($1::text[]);
