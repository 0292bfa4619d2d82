-- Batches: durable async ingest of large task batches, and a shared signing secret.

-- One accepted batch (createProject or addTasks with >= 100 tasks). The request is stored
-- in `ingest_chunks` in the same transaction that answers 202, so it survives any crash.
CREATE TABLE ingest_jobs (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id      uuid NOT NULL REFERENCES projects (id),
    customer_id     uuid NOT NULL REFERENCES customers (id),
    -- 'create': the project is 'ingesting' until the job is done | 'add': addTasks
    kind            text NOT NULL CHECK (kind IN ('create', 'add')),
    -- 'queued' | 'running' | 'retrying' (last attempt failed, waiting) | 'done' | 'failed'
    -- | 'canceled' (the project was canceled before the job finished)
    state           text NOT NULL DEFAULT 'queued'
                    CHECK (state IN ('queued', 'running', 'retrying', 'done', 'failed',
                                     'canceled')),
    tasks_total     integer NOT NULL,
    -- task specs processed (stored, or skipped as an external id already present)
    tasks_stored    integer NOT NULL DEFAULT 0,
    chunks_left     integer NOT NULL,
    -- consecutive failed attempts; reset by every stored chunk
    attempts        integer NOT NULL DEFAULT 0,
    error           text,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz
);
CREATE INDEX ingest_jobs_project ON ingest_jobs (project_id, created_at);
-- What workers poll: unfinished jobs whose (back-off) time has come.
CREATE INDEX ingest_jobs_due ON ingest_jobs (next_attempt_at)
    WHERE state IN ('queued', 'running', 'retrying');

-- The raw, validated task specs of a job, a chunk at a time (a JSON array, as text: it is
-- only ever read back whole). A chunk row is deleted in the transaction that inserts its
-- items and tasks, so each chunk is stored exactly once even across crashes.
CREATE TABLE ingest_chunks (
    job_id       uuid NOT NULL REFERENCES ingest_jobs (id),
    chunk_no     integer NOT NULL,
    -- index of the chunk's first task in the request
    first_index  integer NOT NULL,
    task_count   integer NOT NULL,
    body         text NOT NULL,
    PRIMARY KEY (job_id, chunk_no)
);
-- Written once, read once, soon deleted: skip compression (it dominated the 202's latency).
ALTER TABLE ingest_chunks ALTER COLUMN body SET STORAGE EXTERNAL;

-- Secrets every server process shares without configuration (e.g. the key that signs
-- payload URLs), created once by whichever process starts first.
CREATE TABLE server_secrets (
    name        text PRIMARY KEY,
    secret      bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- auditLog for a customer across all their projects.
CREATE INDEX audit_log_customer ON audit_log (customer_id, seq);
