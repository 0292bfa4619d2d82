-- Payload retention (issue 18): the blobs of projects that ended, deleted after the project's
-- `payload_retention`; `blob_deletions` is the queue of keys to delete (migration 0014).

-- name: projects_payloads_due
-- $1 at most this many. Ended projects whose retention ran out and whose payloads are still
-- kept, longest ended first; locked so a second job cannot interleave.
SELECT id, customer_id, canceled_at AS ended_at,
       extract(epoch FROM payload_retention)::bigint AS retention_seconds
FROM projects
WHERE status = 'canceled' AND payloads_purged_at IS NULL
  AND canceled_at + payload_retention <= taskroute_now()
ORDER BY canceled_at
LIMIT $1
FOR UPDATE SKIP LOCKED;

-- name: project_payloads_expire
-- $1 project_id. The project's payloads stop being kept: every blob key of its items is
-- queued for deletion, inline copies are cleared, the project is marked. The item rows stay
-- (with payload_key and payload_bytes: the fact that a payload existed, and its address).
WITH queued AS (
    INSERT INTO blob_deletions (key, project_id, queued_at)
    SELECT DISTINCT payload_key, $1::uuid, taskroute_now() FROM items
    WHERE project_id = $1 AND payload_key IS NOT NULL
    ON CONFLICT (key) DO NOTHING
    RETURNING key
),
cleared AS (
    UPDATE items SET payload = NULL WHERE project_id = $1 AND payload IS NOT NULL RETURNING 1
),
marked AS (
    UPDATE projects SET payloads_purged_at = taskroute_now() WHERE id = $1 RETURNING 1
)
SELECT (SELECT count(*) FROM queued) AS keys_queued,
       (SELECT count(*) FROM cleared) AS inline_cleared,
       count(*) AS items,
       count(DISTINCT payload_key) AS payload_keys,
       coalesce(sum(payload_bytes), 0) AS payload_bytes
FROM items WHERE project_id = $1;

-- fragment: chunk_payload_keys
-- $1 a row source of dropped ingest chunks (job_id, body). Their payloads' blob keys, as the
-- worker would have written them: sha256 of each line's canonical payload JSON, the text
-- after the line's one tab (ingest.encode_chunk), with the job's project.
SELECT DISTINCT encode(sha256(convert_to(split_part(line, E'\t', 2), 'UTF8')), 'hex') AS key,
       j.project_id, taskroute_now() AS queued_at
FROM $1 d
JOIN ingest_jobs j ON j.id = d.job_id
CROSS JOIN string_to_table(d.body, E'\n') AS line

-- name: blob_deletions_take
-- $1 at most this many. Queued keys (locked), each with whether an item of a project whose
-- payloads are kept still references it: those blobs stay (identical content of another
-- project, or of the same canceled project's earlier chunks).
SELECT d.key, d.project_id,
       EXISTS (SELECT 1 FROM items i JOIN projects p ON p.id = i.project_id
               WHERE i.payload_key = d.key AND p.payloads_purged_at IS NULL) AS in_use
FROM blob_deletions d
LIMIT $1
FOR UPDATE OF d SKIP LOCKED;

-- name: blob_deletions_done
-- $1 keys: deleted from the store, or kept because still in use.
DELETE FROM blob_deletions WHERE key = ANY($1::text[]);
