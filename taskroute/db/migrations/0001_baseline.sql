-- taskroute's tables, indexes and constraints. Functions and triggers live in db/functions/
-- (migrate.py installs them: taskroute_now(), which the column defaults call, before this).
-- Public ids are random UUIDs so no id tells an expert anything (order, gold, customer).

-- Customers and experts -----------------------------------------------------------------------

CREATE TABLE customers (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT taskroute_now()
);

-- last_seen_at is rewritten on every claim and heartbeat: room on each page keeps those
-- updates HOT (no index writes).
CREATE TABLE experts (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name          text NOT NULL,
    -- a status, never a delete
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
    capabilities  text[] NOT NULL DEFAULT '{}',
    last_seen_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT taskroute_now()
) WITH (fillfactor = 70);

-- An expert's qualification and measured quality per skill.
CREATE TABLE expert_skills (
    expert_id          uuid NOT NULL REFERENCES experts (id),
    skill              text NOT NULL,
    -- the estimate the claim compares with a task's min_quality
    quality            real NOT NULL DEFAULT 1.0,
    gold_seen          integer NOT NULL DEFAULT 0,
    gold_correct       integer NOT NULL DEFAULT 0,
    tasks_done         integer NOT NULL DEFAULT 0,
    -- quality pause, per skill (never a delete)
    status             text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    status_reason      text,
    status_at          timestamptz,
    -- gold_seen at the last admin unpause: the pause rule counts gold answers from there
    pause_check_from   integer NOT NULL DEFAULT 0,
    -- the pause test's evidence: ln of the likelihood ratio "below the bar" vs "trusted" of
    -- the gold answers since the last unpause (0: none yet)
    pause_llr          double precision NOT NULL DEFAULT 0,
    -- gold_correct at the last unpause, so the test restarts from there
    pause_correct_from integer NOT NULL DEFAULT 0,
    PRIMARY KEY (expert_id, skill)
);

-- Each expert's pace (functions/pace.sql keeps it): their newest 40 submissions, newest first,
-- as parallel arrays. fillfactor 50 leaves room for the row's next version, so a submit's
-- update is HOT and page pruning removes old versions without a vacuum.
CREATE TABLE expert_pace (
    expert_id      uuid PRIMARY KEY REFERENCES experts (id),
    assignment_ids uuid[] NOT NULL,
    skills         text[] NOT NULL,
    -- submitted_at - claimed_at of each, in microseconds
    claim_us       bigint[] NOT NULL,
    -- submitted_at of each, in microseconds since 1970-01-01 UTC
    submitted_us   bigint[] NOT NULL
) WITH (fillfactor = 50);

-- Projects ------------------------------------------------------------------------------------

CREATE TABLE projects (
    id                            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    customer_id                   uuid NOT NULL REFERENCES customers (id),
    name                          text NOT NULL,
    -- 'ingesting': a background batch not yet stored; 'completed': no slot is pending, open or
    -- claimed and no batch is queued (functions/projects.sql keeps it so)
    status                        text NOT NULL DEFAULT 'active'
                                  CHECK (status IN ('ingesting', 'active', 'completed', 'canceled')),
    -- priority classes: high >= 100, low <= -100 (functions/routing.sql)
    priority                      integer NOT NULL DEFAULT 0,
    deadline                      timestamptz,
    lease_seconds                 integer NOT NULL DEFAULT 1800 CHECK (lease_seconds > 0),
    pay_cents                     integer NOT NULL DEFAULT 0 CHECK (pay_cents >= 0),
    min_quality                   real NOT NULL DEFAULT 0,
    redundancy                    integer NOT NULL DEFAULT 1 CHECK (redundancy BETWEEN 1 AND 5),
    max_retries                   integer NOT NULL DEFAULT 3 CHECK (max_retries >= 0),
    created_at                    timestamptz NOT NULL DEFAULT taskroute_now(),
    canceled_at                   timestamptz,
    -- the routing job's deadline bump (every change is in project_priority_events)
    deadline_bumped               boolean NOT NULL DEFAULT false,
    -- payloads are deleted this long after the project ended (0: as soon as it ends)
    payload_retention             interval NOT NULL DEFAULT interval '30 days'
                                  CHECK (payload_retention >= interval '0'),
    -- when retention last ran for the project
    payloads_purged_at            timestamptz,
    -- an expert silent (no claim, no heartbeat) for longer loses the live claim
    heartbeat_timeout_seconds     integer NOT NULL DEFAULT 300
                                  CHECK (heartbeat_timeout_seconds > 0),
    -- JSON Schema of an answer (NULL: any JSON); never updated once stored
    answer_schema                 jsonb,
    -- on_submit: paid at submit; on_acceptance: paid when the answer agrees with the resolved
    -- one (or is correct gold); on_review: the customer decides, or auto-approval does
    payment_policy                text NOT NULL DEFAULT 'on_submit'
                                  CHECK (payment_policy IN ('on_submit', 'on_acceptance', 'on_review')),
    auto_approve_seconds          integer NOT NULL DEFAULT 259200
                                  CHECK (auto_approve_seconds BETWEEN 0 AND 2592000),
    -- how long a rejection may still be turned into an acceptance
    override_seconds              integer NOT NULL DEFAULT 2592000
                                  CHECK (override_seconds BETWEEN 0 AND 31536000),
    -- on_acceptance: answers that disagree with an adjudicated result are paid too
    pay_adjudicated_disagreements boolean NOT NULL DEFAULT true,
    -- when it last became completed (NULL while not completed)
    completed_at                  timestamptz,
    CONSTRAINT projects_completed_at_check CHECK ((status = 'completed') = (completed_at IS NOT NULL)),
    CONSTRAINT projects_payload_retention_max CHECK (payload_retention <= interval '3650 days')
);
CREATE INDEX projects_customer ON projects (customer_id, created_at DESC);

-- One policy row per project (functions/quality.sql adds it; setQualityPolicy edits it).
CREATE TABLE project_quality (
    project_id               uuid PRIMARY KEY REFERENCES projects (id),
    -- share of claims served from the gold pool once an expert is past onboarding
    gold_ratio               real NOT NULL DEFAULT 0.1 CHECK (gold_ratio BETWEEN 0 AND 1),
    -- an expert's first N tasks of a skill get the (higher) onboarding gold share
    exploration_tasks        integer NOT NULL DEFAULT 10 CHECK (exploration_tasks >= 0),
    exploration_gold_ratio   real NOT NULL DEFAULT 0.3
                             CHECK (exploration_gold_ratio BETWEEN 0 AND 1),
    -- a gold item is retired after this many servings
    gold_max_exposures       integer NOT NULL DEFAULT 50 CHECK (gold_max_exposures > 0),
    -- the pool of a skill is reported "low" below this many unretired gold items
    gold_low_water           integer NOT NULL DEFAULT 5 CHECK (gold_low_water >= 0),
    -- answers are compared on this top-level field of the answer object (NULL: the whole answer)
    answer_field             text,
    -- share of the majority answer needed to resolve an item without adjudication
    agreement_threshold      real NOT NULL DEFAULT 0.6 CHECK (agreement_threshold BETWEEN 0 AND 1),
    adjudication_min_quality real NOT NULL DEFAULT 0.8
                             CHECK (adjudication_min_quality BETWEEN 0 AND 1),
    -- false: below the threshold the most common answer resolves the item ('plurality')
    adjudicate               boolean NOT NULL DEFAULT true,
    -- no pause before this many gold answers since the last unpause
    pause_min_gold           integer NOT NULL DEFAULT 3 CHECK (pause_min_gold >= 1),
    pause_below              real NOT NULL DEFAULT 0.5 CHECK (pause_below BETWEEN 0 AND 1),
    updated_at               timestamptz NOT NULL DEFAULT taskroute_now(),
    -- 'sequential': a sequential probability ratio test on the gold answers; 'fixed': a Beta
    -- mean below pause_below
    pause_rule               text NOT NULL DEFAULT 'sequential'
                             CHECK (pause_rule IN ('sequential', 'fixed')),
    -- experts at or above this accuracy are paused with probability at most pause_risk, ever
    trusted_accuracy         real NOT NULL DEFAULT 0.75
                             CHECK (trusted_accuracy > 0 AND trusted_accuracy < 1),
    pause_risk               real NOT NULL DEFAULT 0.005 CHECK (pause_risk > 0 AND pause_risk < 1),
    -- adaptive gold share (sequential rule): for a suspect, and once proven good
    suspect_gold_ratio       real NOT NULL DEFAULT 1.0 CHECK (suspect_gold_ratio BETWEEN 0 AND 1),
    proven_gold_ratio        real NOT NULL DEFAULT 0.05 CHECK (proven_gold_ratio BETWEEN 0 AND 1),
    -- 'majority': head count; 'weighted': answers weighted by each expert's measured accuracy
    resolution               text NOT NULL DEFAULT 'majority'
                             CHECK (resolution IN ('majority', 'weighted')),
    -- how many different answers an item can have (the weighted rule's model of mistakes)
    answer_choices           integer NOT NULL DEFAULT 2 CHECK (answer_choices >= 2),
    -- weighted rule: an item resolves once its best answer's probability reaches this
    confidence_threshold     real NOT NULL DEFAULT 0.99
                             CHECK (confidence_threshold > 0 AND confidence_threshold < 1),
    -- weighted rule: slots an item starts with (more one at a time while not confident, up to
    -- the redundancy); NULL: all redundancy slots
    min_answers              integer CHECK (min_answers >= 1),
    -- an expert is a suspect until their gold answers are this many times likelier from an
    -- expert at trusted_accuracy than from one below pause_below
    clear_evidence           real NOT NULL DEFAULT 5 CHECK (clear_evidence >= 1)
);

-- The risk state each project was last judged to be in, so a flip is recorded once.
CREATE TABLE project_risk (
    project_id   uuid PRIMARY KEY REFERENCES projects (id),
    state        text NOT NULL CHECK (state IN ('on_track', 'at_risk')),
    changed_at   timestamptz NOT NULL DEFAULT taskroute_now(),
    evaluated_at timestamptz NOT NULL DEFAULT taskroute_now()
);

-- One row per flip of project_risk.
CREATE TABLE project_alerts (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    project_id  uuid NOT NULL REFERENCES projects (id),
    kind        text NOT NULL CHECK (kind IN ('at_risk', 'recovered')),
    message     text NOT NULL,
    remaining   integer NOT NULL,
    eta         timestamptz,
    deadline    timestamptz,
    created_at  timestamptz NOT NULL DEFAULT taskroute_now()
);
CREATE INDEX project_alerts_project ON project_alerts (project_id, seq);

-- Every deadline bump and unbump, with the forecast it was decided on.
CREATE TABLE project_priority_events (
    seq              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id       uuid NOT NULL REFERENCES projects (id),
    kind             text NOT NULL CHECK (kind IN ('bump', 'unbump')),
    remaining        integer NOT NULL,
    -- done tasks per second over the forecast window
    rate_per_second  double precision NOT NULL,
    -- NULL: no progress at all in the window
    forecast_finish  timestamptz,
    deadline         timestamptz NOT NULL,
    at               timestamptz NOT NULL DEFAULT taskroute_now()
);
CREATE INDEX project_priority_events_project ON project_priority_events (project_id, seq);

-- Items and tasks -----------------------------------------------------------------------------

-- An item is the customer's unit of work: one payload, one resolved answer.
CREATE TABLE items (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id         uuid NOT NULL REFERENCES projects (id),
    skill              text NOT NULL,
    external_id        text,
    -- small payloads inline; large ones by content-addressed key in the blob store
    payload            jsonb,
    payload_key        text,
    payload_bytes      integer NOT NULL DEFAULT 0,
    -- never sent to experts
    gold_answer        jsonb,
    metadata           jsonb,
    created_at         timestamptz NOT NULL DEFAULT taskroute_now(),
    -- replaces the project's answer_schema for this item
    answer_schema      jsonb,
    -- when retention deleted the payload (payload_key and payload_bytes stay)
    payload_deleted_at timestamptz,
    UNIQUE (project_id, external_id)
);
CREATE INDEX items_project ON items (project_id);
-- "Does an item whose payload is kept still reference this blob": asked per deleted key.
CREATE INDEX items_payload_key_kept ON items (payload_key)
    WHERE payload_key IS NOT NULL AND payload_deleted_at IS NULL;

-- A task is one claimable slot of an item (an item with redundancy k has k tasks). Kept
-- small: the claim reads only this table and its partial indexes. It churns on every claim,
-- heartbeat and submit, so it is vacuumed and analyzed after a fixed, small amount of churn
-- rather than a share of its size.
CREATE TABLE tasks (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    seq            bigint GENERATED ALWAYS AS IDENTITY,
    item_id        uuid NOT NULL REFERENCES items (id),
    project_id     uuid NOT NULL REFERENCES projects (id),
    skill          text NOT NULL,
    -- the task's own priority inside its project, in [-1000, 1000]
    priority       integer NOT NULL DEFAULT 0,
    -- what the claim orders by (functions/routing.sql: routing_eff_priority)
    eff_priority   integer NOT NULL DEFAULT 0,
    min_quality    real NOT NULL DEFAULT 0,
    -- 'pending': payload not yet durable
    status         text NOT NULL
                   CHECK (status IN ('pending', 'open', 'claimed', 'done', 'failed', 'canceled')),
    assignment_id  uuid,
    lease_until    timestamptz,
    -- leases that expired without a submit
    attempts       integer NOT NULL DEFAULT 0,
    max_retries    integer NOT NULL DEFAULT 3,
    created_at     timestamptz NOT NULL DEFAULT taskroute_now(),
    -- 'normal': a redundancy slot; 'gold': one serving of a gold item to one expert, created
    -- claimed (max_retries 0: an expired one fails); 'adjudication': resolves a disagreement
    kind           text NOT NULL DEFAULT 'normal' CHECK (kind IN ('normal', 'gold', 'adjudication')),
    -- capability tags the expert must all carry (experts.capabilities)
    required_caps  text[] NOT NULL DEFAULT '{}',
    -- when the slot left the remaining work (done, failed, canceled): the burn-down's history
    finished_at    timestamptz
) WITH (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.0,
    autovacuum_vacuum_insert_threshold = 20000,
    autovacuum_analyze_scale_factor = 0.0,
    autovacuum_analyze_threshold = 5000
);
-- The claim probes this per skill: open tasks only, best first.
CREATE INDEX tasks_open_claim ON tasks (skill, eff_priority DESC, seq) WHERE status = 'open';
-- Project-scoped claims and the fairness job: open tasks of one project and skill.
CREATE INDEX tasks_open_project ON tasks (project_id, skill, eff_priority DESC, seq)
    WHERE status = 'open';
-- Leases that may have expired: the claim and the sweeper probe this.
CREATE INDEX tasks_claimed_lease ON tasks (skill, lease_until) WHERE status = 'claimed';
-- The sweeper walks all expiring leases in time order.
CREATE INDEX tasks_claimed_expiry ON tasks (lease_until) WHERE status = 'claimed';
CREATE INDEX tasks_project_status ON tasks (project_id, status);
-- Which (project, skill) pairs still have work: one probe per pair, for fair sharing.
CREATE INDEX tasks_project_skill_live ON tasks (project_id, skill)
    WHERE status IN ('open', 'pending', 'claimed');
CREATE INDEX tasks_item ON tasks (item_id);
-- One live adjudication per item, also under racing submits.
CREATE UNIQUE INDEX tasks_one_adjudication ON tasks (item_id)
    WHERE kind = 'adjudication' AND status IN ('open', 'claimed');

-- Task counts per (project, skill, status, gold): `task_counts` plus the deltas not yet folded
-- (functions/task_counts.sql appends them, resolvers/task_counts.py folds them).
CREATE TABLE task_counts (
    project_id uuid NOT NULL,
    skill      text NOT NULL,
    status     text NOT NULL,
    n          bigint NOT NULL,
    -- gold servings are counted apart (they are not customer work)
    gold       boolean NOT NULL DEFAULT false,
    PRIMARY KEY (project_id, skill, status, gold)
);

CREATE TABLE task_count_deltas (
    project_id uuid NOT NULL,
    skill      text NOT NULL,
    status     text NOT NULL,
    n          integer NOT NULL,
    gold       boolean NOT NULL DEFAULT false
);
CREATE INDEX task_count_deltas_project ON task_count_deltas (project_id);

-- Per-skill scarcity, refreshed by the routing job (never computed per claim).
CREATE TABLE skill_scarcity (
    skill           text PRIMARY KEY,
    -- active qualified experts and open tasks of the skill
    active_experts  integer NOT NULL,
    open_backlog    integer NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT taskroute_now(),
    -- the skill's typical cycle from the forecast's pace book, and its backlog in seconds of work
    typical_seconds real,
    backlog_seconds real NOT NULL DEFAULT 0,
    -- few other active holders per second of backlog: its holders take its work first
    scarce          boolean NOT NULL DEFAULT false
);

-- Assignments and the ledger ------------------------------------------------------------------

-- Churns like tasks, and is vacuumed the same way.
CREATE TABLE assignments (
    id             uuid PRIMARY KEY,
    task_id        uuid NOT NULL REFERENCES tasks (id),
    item_id        uuid NOT NULL REFERENCES items (id),
    project_id     uuid NOT NULL REFERENCES projects (id),
    expert_id      uuid NOT NULL REFERENCES experts (id),
    status         text NOT NULL DEFAULT 'active'
                   CHECK (status IN ('active', 'submitted', 'expired', 'released')),
    claimed_at     timestamptz NOT NULL DEFAULT taskroute_now(),
    lease_until    timestamptz NOT NULL,
    answer         jsonb,
    submitted_at   timestamptz,
    receipt_id     uuid UNIQUE,
    pay_cents      integer,
    retracted_at   timestamptz,
    retracted_by   text,
    retract_reason text,
    -- NULL until submitted; then 'submitted' (undecided), 'accepted' or 'rejected'
    review_status  text CHECK (review_status IN ('submitted', 'accepted', 'rejected')),
    reviewed_at    timestamptz,
    -- 'customer:<id>', 'policy', 'quality', 'auto', 'canceled' or 'retraction'
    reviewed_by    text,
    review_reason  text
) WITH (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.0,
    autovacuum_vacuum_insert_threshold = 20000,
    autovacuum_analyze_scale_factor = 0.0,
    autovacuum_analyze_threshold = 5000
);
-- At most one live claim per expert; at most one live or answered slot per expert and item.
CREATE UNIQUE INDEX assignments_one_active ON assignments (expert_id) WHERE status = 'active';
CREATE UNIQUE INDEX assignments_expert_item ON assignments (item_id, expert_id)
    WHERE status IN ('active', 'submitted');
CREATE INDEX assignments_project ON assignments (project_id, submitted_at);
CREATE INDEX assignments_expert ON assignments (expert_id, claimed_at);
-- The fairness job counts each skill's claims of the last window.
CREATE INDEX assignments_claimed_at ON assignments (claimed_at);
-- Throughput: submissions in a recent window.
CREATE INDEX assignments_submitted_recent ON assignments (submitted_at)
    WHERE status = 'submitted';
-- The auto-approval job's probe, and pending amounts: undecided work only.
CREATE INDEX assignments_review_pending ON assignments (submitted_at)
    WHERE review_status = 'submitted';
-- A customer's review list of a project.
CREATE INDEX assignments_project_review ON assignments (project_id, submitted_at, id)
    WHERE review_status IS NOT NULL;
-- An expert's pending amount.
CREATE INDEX assignments_expert_review_pending ON assignments (expert_id)
    WHERE review_status = 'submitted';

-- The payout ledger: rows are only ever inserted (functions/ledger.sql refuses the rest).
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
    created_at    timestamptz NOT NULL DEFAULT taskroute_now(),
    CHECK ((kind = 'payment') = (assignment_id IS NOT NULL)),
    CHECK ((kind = 'reversal') = (reverses_id IS NOT NULL))
);
CREATE INDEX payouts_expert ON payouts (expert_id, seq);
CREATE INDEX payouts_project ON payouts (project_id, seq);

-- Quality: gold and results --------------------------------------------------------------------

-- Items with a known answer, served from here (never as normal slots).
CREATE TABLE gold_pool (
    item_id     uuid PRIMARY KEY REFERENCES items (id),
    project_id  uuid NOT NULL REFERENCES projects (id),
    skill       text NOT NULL,
    exposures   integer NOT NULL DEFAULT 0,
    retired_at  timestamptz
);
CREATE INDEX gold_pool_serve ON gold_pool (skill, exposures) WHERE retired_at IS NULL;
CREATE INDEX gold_pool_project ON gold_pool (project_id, skill);

-- Who has seen which gold item: the key makes "never the same gold twice" hold under races.
CREATE TABLE gold_exposures (
    expert_id      uuid NOT NULL REFERENCES experts (id),
    item_id        uuid NOT NULL REFERENCES items (id),
    assignment_id  uuid NOT NULL,
    at             timestamptz NOT NULL DEFAULT taskroute_now(),
    -- the twin: the real assignment whose decision decides this gold answer (on_acceptance)
    decide_with    uuid REFERENCES assignments (id),
    -- an on_acceptance gold answer waiting for its decision (with or without a twin yet)
    pending        boolean NOT NULL DEFAULT false,
    PRIMARY KEY (expert_id, item_id)
);
-- The twin trigger's lookup and the auto-approval job's scan: gold answers in flight only.
CREATE INDEX gold_exposures_pending ON gold_exposures (decide_with) WHERE pending;

-- The customer's result per item (normal items only).
CREATE TABLE item_results (
    item_id     uuid PRIMARY KEY REFERENCES items (id),
    project_id  uuid NOT NULL REFERENCES projects (id),
    -- 'pending': fewer answers than needed (e.g. after a retraction)
    status      text NOT NULL CHECK (status IN ('pending', 'adjudicating', 'resolved')),
    answer      jsonb,
    -- share of the majority answer among the valid answers
    agreement   real,
    answers     integer NOT NULL DEFAULT 0,
    -- how it was resolved ('majority', 'adjudicated', 'plurality', 'weighted', ...)
    method      text,
    -- bumped on every change a customer can see (resolved, retracted, re-resolved)
    version     integer NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT taskroute_now(),
    -- the weighted rule's probability of the answer (NULL for the majority rule)
    confidence  real
);
CREATE INDEX item_results_resolved ON item_results (project_id, item_id) WHERE status = 'resolved';

-- The change feed: one row per visible result change. Read in (xact, seq) order, and only the
-- changes of transactions older than every one still running (queries/quality.sql
-- result_feed_horizon), so a reader paging by cursor is never handed a change behind it.
CREATE TABLE result_changes (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id  uuid NOT NULL REFERENCES projects (id),
    item_id     uuid NOT NULL REFERENCES items (id),
    version     integer NOT NULL,
    change      text NOT NULL CHECK (change IN ('resolved', 're-resolved', 'retracted')),
    answer      jsonb,
    agreement   real,
    at          timestamptz NOT NULL DEFAULT taskroute_now(),
    -- the writing transaction
    xact        xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX result_changes_project ON result_changes (project_id, seq);
CREATE INDEX result_changes_feed ON result_changes (project_id, xact, seq);

-- Credentials and audits ----------------------------------------------------------------------

-- Bearer tokens; only a SHA-256 of each is stored. Rotation makes a new row and gives the old
-- one an expiry (the grace period).
CREATE TABLE credentials (
    token_hash   bytea PRIMARY KEY,
    role         text NOT NULL CHECK (role IN ('admin', 'customer', 'expert')),
    customer_id  uuid REFERENCES customers (id),
    expert_id    uuid REFERENCES experts (id),
    created_at   timestamptz NOT NULL DEFAULT taskroute_now(),
    revoked_at   timestamptz,
    -- the public id
    id           uuid NOT NULL DEFAULT gen_random_uuid(),
    label        text NOT NULL DEFAULT '',
    expires_at   timestamptz,
    -- may read, never mutate
    read_only    boolean NOT NULL DEFAULT false,
    -- a customer token limited to one project
    project_id   uuid REFERENCES projects (id),
    -- the credential this one replaced
    rotated_from uuid,
    CHECK ((role = 'customer') = (customer_id IS NOT NULL)),
    CHECK ((role = 'expert') = (expert_id IS NOT NULL)),
    CONSTRAINT credentials_id_unique UNIQUE (id),
    CONSTRAINT credentials_project_scope CHECK (project_id IS NULL OR role = 'customer')
);
CREATE INDEX credentials_customer ON credentials (customer_id, created_at)
    WHERE customer_id IS NOT NULL;
CREATE INDEX credentials_expert ON credentials (expert_id, created_at)
    WHERE expert_id IS NOT NULL;

-- Last use, apart from `credentials`: written often (batched), while a credentials row changes
-- only when its meaning does, so the invalidation trigger (functions/credentials.sql) stays quiet.
CREATE TABLE credential_last_use (
    credential_id  uuid PRIMARY KEY REFERENCES credentials (id),
    last_used_at   timestamptz NOT NULL
);

-- Every admin action: who (actor), when, what (action, subject), why (reason), and details.
-- Actor: 'admin-token' (the configured bootstrap token), 'credential:<id>' (an admin
-- credential), 'cli:<os user>' (taskroute admin ...), or 'system' (the service itself).
CREATE TABLE admin_audit (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT taskroute_now(),
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

-- Who received which customer's data, when.
CREATE TABLE audit_log (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    expert_id    uuid NOT NULL,
    customer_id  uuid NOT NULL,
    project_id   uuid NOT NULL,
    task_id      uuid NOT NULL,
    action       text NOT NULL,
    at           timestamptz NOT NULL DEFAULT taskroute_now()
);
CREATE INDEX audit_log_project ON audit_log (project_id, seq);
CREATE INDEX audit_log_expert ON audit_log (expert_id, seq);
CREATE INDEX audit_log_customer ON audit_log (customer_id, seq);

-- Background ingest and blobs -----------------------------------------------------------------

-- One accepted batch (createProject or addTasks with many tasks), stored in the same
-- transaction that answers 202, so it survives any crash.
CREATE TABLE ingest_jobs (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id      uuid NOT NULL REFERENCES projects (id),
    customer_id     uuid NOT NULL REFERENCES customers (id),
    -- 'create': the project is 'ingesting' until the job is done; 'add': addTasks
    kind            text NOT NULL CHECK (kind IN ('create', 'add')),
    -- 'retrying': the last attempt failed, waiting; 'canceled': the project was canceled first
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
    next_attempt_at timestamptz NOT NULL DEFAULT taskroute_now(),
    created_at      timestamptz NOT NULL DEFAULT taskroute_now(),
    updated_at      timestamptz NOT NULL DEFAULT taskroute_now(),
    finished_at     timestamptz
);
CREATE INDEX ingest_jobs_project ON ingest_jobs (project_id, created_at);
-- What workers poll: unfinished jobs whose (back-off) time has come.
CREATE INDEX ingest_jobs_due ON ingest_jobs (next_attempt_at)
    WHERE state IN ('queued', 'running', 'retrying');

-- A job's validated task specs, a chunk at a time. A chunk row is deleted in the transaction
-- that inserts its items and tasks, so each chunk is stored exactly once even across crashes.
CREATE TABLE ingest_chunks (
    job_id       uuid NOT NULL REFERENCES ingest_jobs (id),
    chunk_no     integer NOT NULL,
    -- index of the chunk's first task in the request
    first_index  integer NOT NULL,
    task_count   integer NOT NULL,
    -- the chunk's text, when the blob store refused it at accept (else it is at body_key)
    body         text,
    -- blob key of the chunk's text in the blob store (random, never shared)
    body_key     text,
    -- the blob keys of the chunk's payloads, in task order: what the worker writes, and what a
    -- cancel that drops the chunk queues for deletion
    payload_keys text[] NOT NULL,
    CONSTRAINT ingest_chunks_text_in_one_place CHECK ((body IS NULL) <> (body_key IS NULL)),
    PRIMARY KEY (job_id, chunk_no)
);
-- Written once, read once, soon deleted: skip compression.
ALTER TABLE ingest_chunks ALTER COLUMN body SET STORAGE EXTERNAL;

-- Blob keys waiting to be deleted. A payload key is deleted only if no item whose payload is
-- kept still references it (content addressing: another project may hold the same payload);
-- the row goes either way.
CREATE TABLE blob_deletions (
    key         text PRIMARY KEY,
    -- the project whose retention or canceled batch queued the key (for the audit)
    project_id  uuid NOT NULL,
    queued_at   timestamptz NOT NULL,
    -- 'payload' (retention, or a dropped chunk's payloads) or 'request' (a chunk's stored text)
    kind        text NOT NULL DEFAULT 'payload' CHECK (kind IN ('payload', 'request'))
);

-- Secrets every server process shares without configuration (e.g. the key that signs payload
-- URLs), created once by whichever process starts first.
CREATE TABLE server_secrets (
    name        text PRIMARY KEY,
    secret      bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT taskroute_now()
);

-- Wake-ups (realtime/tickets.py) ----------------------------------------------------------------

-- UNLOGGED: coordination state that lives for seconds. After a crash it is empty, which loses
-- nothing: every listener lost its LISTEN connection too and tells its subscribers to re-check.
-- One announcement of opened tasks, taken in units (one per task) by the processes with idle
-- subscribers, so together they wake at most as many experts as tasks were opened.
CREATE UNLOGGED TABLE wake_tickets (
    key         text PRIMARY KEY,          -- "<payload nonce>:<project id>"
    announced   integer NOT NULL CHECK (announced > 0),  -- tasks it announced
    taken       integer NOT NULL CHECK (taken BETWEEN 0 AND announced),
    last_take   integer NOT NULL,          -- what the latest taker got (its RETURNING reads it)
    created_at  timestamptz NOT NULL DEFAULT taskroute_now()
);
CREATE INDEX wake_tickets_created ON wake_tickets (created_at);

-- Each unit handed to a subscriber, kept until its window passes: an expert not seen since
-- being woken has gone or ignored it, and the unit is announced again to the others.
CREATE UNLOGGED TABLE wake_deliveries (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ticket      text NOT NULL,
    subscriber  bigint NOT NULL,           -- the taking process's own id of the subscription
    expert_id   uuid NOT NULL,
    skill       text NOT NULL,
    project_id  uuid NOT NULL,
    min_quality real NOT NULL DEFAULT 0,
    attempt     integer NOT NULL DEFAULT 1,  -- 1: first announcement; n: announced again n-1 times
    woken_at    timestamptz NOT NULL DEFAULT taskroute_now(),
    due_at      timestamptz NOT NULL
);
CREATE INDEX wake_deliveries_due ON wake_deliveries (due_at);
