-- taskroute's first schema, designed for the whole mission (see DEVELOPERS.md).
-- Public ids are random UUIDs so no id tells an expert anything (order, gold, customer).

CREATE TABLE customers (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE experts (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name          text NOT NULL,
    -- a status, never a delete: 'active' | 'disabled'
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
    capabilities  text[] NOT NULL DEFAULT '{}',
    last_seen_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- An expert's qualification and measured quality per skill.
CREATE TABLE expert_skills (
    expert_id     uuid NOT NULL REFERENCES experts (id),
    skill         text NOT NULL,
    -- the estimate the claim compares with a task's min_quality
    quality       real NOT NULL DEFAULT 1.0,
    gold_seen     integer NOT NULL DEFAULT 0,
    gold_correct  integer NOT NULL DEFAULT 0,
    tasks_done    integer NOT NULL DEFAULT 0,
    -- 'active' | 'paused' (quality pause, per skill; never a delete)
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    status_reason text,
    status_at     timestamptz,
    PRIMARY KEY (expert_id, skill)
);

-- Bearer tokens; only a SHA-256 of each is stored.
CREATE TABLE credentials (
    token_hash   bytea PRIMARY KEY,
    role         text NOT NULL CHECK (role IN ('admin', 'customer', 'expert')),
    customer_id  uuid REFERENCES customers (id),
    expert_id    uuid REFERENCES experts (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    CHECK ((role = 'customer') = (customer_id IS NOT NULL)),
    CHECK ((role = 'expert') = (expert_id IS NOT NULL))
);

CREATE TABLE projects (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    customer_id     uuid NOT NULL REFERENCES customers (id),
    name            text NOT NULL,
    -- 'ingesting' (async batch not yet stored) | 'active' | 'canceled'
    status          text NOT NULL DEFAULT 'active'
                    CHECK (status IN ('ingesting', 'active', 'canceled')),
    priority        integer NOT NULL DEFAULT 0,
    deadline        timestamptz,
    lease_seconds   integer NOT NULL DEFAULT 1800 CHECK (lease_seconds > 0),
    pay_cents       integer NOT NULL DEFAULT 0 CHECK (pay_cents >= 0),
    min_quality     real NOT NULL DEFAULT 0,
    redundancy      integer NOT NULL DEFAULT 1 CHECK (redundancy BETWEEN 1 AND 5),
    max_retries     integer NOT NULL DEFAULT 3 CHECK (max_retries >= 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    canceled_at     timestamptz
);
CREATE INDEX projects_customer ON projects (customer_id, created_at DESC);

-- An item is the customer's unit of work: one payload, one resolved answer.
CREATE TABLE items (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id    uuid NOT NULL REFERENCES projects (id),
    skill         text NOT NULL,
    external_id   text,
    -- small payloads inline; large ones by content-addressed key in the blob store
    payload       jsonb,
    payload_key   text,
    payload_bytes integer NOT NULL DEFAULT 0,
    -- never sent to experts
    gold_answer   jsonb,
    metadata      jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, external_id)
);
CREATE INDEX items_project ON items (project_id);

-- A task is one claimable slot of an item (an item with redundancy k has k tasks).
-- Kept small: the claim reads only this table and its partial indexes.
CREATE TABLE tasks (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    seq            bigint GENERATED ALWAYS AS IDENTITY,
    item_id        uuid NOT NULL REFERENCES items (id),
    project_id     uuid NOT NULL REFERENCES projects (id),
    skill          text NOT NULL,
    -- the task's own priority inside its project
    priority       integer NOT NULL DEFAULT 0,
    -- what the claim orders by (project priority, task priority, later: bumps and aging)
    eff_priority   integer NOT NULL DEFAULT 0,
    min_quality    real NOT NULL DEFAULT 0,
    -- 'pending' (payload not yet durable) | 'open' | 'claimed' | 'done' | 'failed' | 'canceled'
    status         text NOT NULL
                   CHECK (status IN ('pending', 'open', 'claimed', 'done', 'failed', 'canceled')),
    assignment_id  uuid,
    lease_until    timestamptz,
    -- leases that expired without a submit
    attempts       integer NOT NULL DEFAULT 0,
    max_retries    integer NOT NULL DEFAULT 3,
    created_at     timestamptz NOT NULL DEFAULT now()
);
-- The claim probes this per skill: open tasks only, best first.
CREATE INDEX tasks_open_claim ON tasks (skill, eff_priority DESC, seq) WHERE status = 'open';
-- Leases that may have expired: the claim and the sweeper probe this.
CREATE INDEX tasks_claimed_lease ON tasks (skill, lease_until) WHERE status = 'claimed';
-- The sweeper walks all expiring leases in time order.
CREATE INDEX tasks_claimed_expiry ON tasks (lease_until) WHERE status = 'claimed';
CREATE INDEX tasks_project_status ON tasks (project_id, status);
CREATE INDEX tasks_item ON tasks (item_id);

CREATE TABLE assignments (
    id            uuid PRIMARY KEY,
    task_id       uuid NOT NULL REFERENCES tasks (id),
    item_id       uuid NOT NULL REFERENCES items (id),
    project_id    uuid NOT NULL REFERENCES projects (id),
    expert_id     uuid NOT NULL REFERENCES experts (id),
    -- 'active' | 'submitted' | 'expired' | 'released'
    status        text NOT NULL DEFAULT 'active'
                  CHECK (status IN ('active', 'submitted', 'expired', 'released')),
    claimed_at    timestamptz NOT NULL DEFAULT now(),
    lease_until   timestamptz NOT NULL,
    answer        jsonb,
    submitted_at  timestamptz,
    receipt_id    uuid UNIQUE,
    pay_cents     integer,
    retracted_at  timestamptz,
    retracted_by  text,
    retract_reason text
);
-- At most one live claim per expert; at most one live or answered slot per expert and item.
CREATE UNIQUE INDEX assignments_one_active ON assignments (expert_id) WHERE status = 'active';
CREATE UNIQUE INDEX assignments_expert_item ON assignments (item_id, expert_id)
    WHERE status IN ('active', 'submitted');
CREATE INDEX assignments_project ON assignments (project_id, submitted_at);
CREATE INDEX assignments_expert ON assignments (expert_id, claimed_at);

-- The payout ledger: rows are only ever inserted (a trigger below refuses the rest).
CREATE TABLE payouts (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    seq           bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    -- one payment line per assignment; reversal lines have no assignment
    assignment_id uuid UNIQUE REFERENCES assignments (id),
    expert_id     uuid NOT NULL REFERENCES experts (id),
    project_id    uuid NOT NULL REFERENCES projects (id),
    amount_cents  integer NOT NULL,
    kind          text NOT NULL DEFAULT 'payment' CHECK (kind IN ('payment', 'reversal')),
    -- a payment is reversed at most once
    reverses_id   uuid UNIQUE REFERENCES payouts (id),
    reason        text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'payment') = (assignment_id IS NOT NULL)),
    CHECK ((kind = 'reversal') = (reverses_id IS NOT NULL))
);
CREATE INDEX payouts_expert ON payouts (expert_id, seq);
CREATE INDEX payouts_project ON payouts (project_id, seq);

CREATE FUNCTION payouts_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'payouts is an append-only ledger: write a reversal line instead';
END $$;
CREATE TRIGGER payouts_no_update_delete BEFORE UPDATE OR DELETE ON payouts
    FOR EACH ROW EXECUTE FUNCTION payouts_append_only();

-- Who received which customer's data, when.
CREATE TABLE audit_log (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    expert_id    uuid NOT NULL,
    customer_id  uuid NOT NULL,
    project_id   uuid NOT NULL,
    task_id      uuid NOT NULL,
    action       text NOT NULL,
    at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_project ON audit_log (project_id, seq);
CREATE INDEX audit_log_expert ON audit_log (expert_id, seq);
