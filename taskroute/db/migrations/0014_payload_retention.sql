-- Issue 18: customer data lifecycle. The payloads of a project that ended (canceled, or
-- completed: coalesce(canceled_at, completed_at) of migration 0013) are deleted from the blob
-- store `payload_retention` after it ended (resolvers/retention.py); items, results, the
-- ledger and both audits stay.

-- Every project has a retention: payloads never linger forever. 30 days unless the project
-- says otherwise (0: as soon as it ends; at most 10 years). Projects made before this
-- migration had none (NULL, "forever"): they get the default, counted from when they ended.
UPDATE projects SET payload_retention = interval '30 days' WHERE payload_retention IS NULL;
ALTER TABLE projects
    ALTER COLUMN payload_retention SET DEFAULT interval '30 days',
    ALTER COLUMN payload_retention SET NOT NULL,
    ADD CONSTRAINT projects_payload_retention_max
        CHECK (payload_retention <= interval '3650 days');

-- Blob keys waiting to be deleted: every payload key of a project whose retention ran out,
-- and the payloads of batch chunks dropped by a cancel (written, or perhaps written, by a
-- worker that then saw the cancel: no item references them). A key is deleted only if no
-- item of a project whose payloads are kept still references it (content addressing: another
-- project may hold the very same payload); the row goes either way.
CREATE TABLE blob_deletions (
    key         text PRIMARY KEY,
    -- the project whose retention or canceled batch queued the key (for the audit)
    project_id  uuid NOT NULL,
    -- written by the statements that queue (taskroute_now(), the clock tests control; a
    -- default could not name it here: migration 0017 may come after this one)
    queued_at   timestamptz NOT NULL
);

-- When retention deleted this item's payload (its inline copy is cleared then; payload_key
-- and payload_bytes stay: the fact that it existed). Per item, not per project: a completed
-- project that gets new work is active again, and its new payloads are kept until it ends
-- again. projects.payloads_purged_at (0008) is when retention last ran for the project.
ALTER TABLE items ADD COLUMN payload_deleted_at timestamptz;

-- "Does an item whose payload is kept still reference this blob": asked per deleted key.
CREATE INDEX items_payload_key_kept ON items (payload_key)
    WHERE payload_key IS NOT NULL AND payload_deleted_at IS NULL;
