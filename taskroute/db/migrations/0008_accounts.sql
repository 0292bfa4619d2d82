-- Issue 18: accounts and credentials managed over the API; the admin audit; payload retention.

-- Credentials: a public id (the token hash stays the key), a label, an expiry, a scope.
-- `read_only`: the token may read but never mutate; `project_id`: a customer token limited to
-- one project. Rotation makes a new row and gives the old one an expiry (the grace period).
ALTER TABLE credentials
    ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid(),
    ADD COLUMN label text NOT NULL DEFAULT '',
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN read_only boolean NOT NULL DEFAULT false,
    ADD COLUMN project_id uuid REFERENCES projects (id),
    -- the credential this one replaced (rotateCredential)
    ADD COLUMN rotated_from uuid,
    ADD CONSTRAINT credentials_id_unique UNIQUE (id),
    ADD CONSTRAINT credentials_project_scope CHECK (project_id IS NULL OR role = 'customer');
CREATE INDEX credentials_customer ON credentials (customer_id, created_at)
    WHERE customer_id IS NOT NULL;
CREATE INDEX credentials_expert ON credentials (expert_id, created_at)
    WHERE expert_id IS NOT NULL;

-- Last use, kept apart from `credentials`: it is written (batched, at most about once a minute
-- per credential) while the row in `credentials` changes only when its meaning does, so the
-- invalidation trigger of 0007 (any change of a credentials row) stays quiet.
CREATE TABLE credential_last_use (
    credential_id  uuid PRIMARY KEY REFERENCES credentials (id),
    last_used_at   timestamptz NOT NULL
);

-- Every admin action: who (actor), when, what (action, subject), why (reason), and details.
-- Actor: 'admin-token' (the configured bootstrap token), 'credential:<id>' (an admin
-- credential), 'cli:<os user>' (taskroute admin ...), or 'system' (the service itself).
CREATE TABLE admin_audit (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    actor         text NOT NULL,
    action        text NOT NULL,
    -- 'expert' | 'customer' | 'credential' | 'project' | 'payout' | 'assignment'
    subject_kind  text NOT NULL,
    subject_id    uuid,
    reason        text,
    details       jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX admin_audit_subject ON admin_audit (subject_id, seq);
CREATE INDEX admin_audit_action ON admin_audit (action, seq);

-- Payload retention: NULL keeps payloads forever; otherwise the blobs of a canceled or completed
-- project are deleted this long after it ended (payloads_purged_at records that it happened).
ALTER TABLE projects
    ADD COLUMN payload_retention interval CHECK (payload_retention >= interval '0'),
    ADD COLUMN payloads_purged_at timestamptz;
