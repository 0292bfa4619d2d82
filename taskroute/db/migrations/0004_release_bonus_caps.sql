-- An expert gives a claim back (SKIP, CANNOT_ANSWER, BAD_ITEM). One row per (item, expert):
-- the eligibility rule (queries/eligibility.sql: task_eligible) probes its primary key, so a
-- released item is never offered to that expert again; the per-hour allowance counts the
-- expert's rows (item_releases_expert_at); BAD_ITEM rows of an item decide its flagging.
CREATE TABLE item_releases (
    item_id       uuid NOT NULL REFERENCES items (id),
    expert_id     uuid NOT NULL REFERENCES experts (id),
    assignment_id uuid NOT NULL REFERENCES assignments (id),
    project_id    uuid NOT NULL REFERENCES projects (id),
    reason        text NOT NULL CHECK (reason IN ('SKIP', 'CANNOT_ANSWER', 'BAD_ITEM')),
    released_at   timestamptz NOT NULL DEFAULT taskroute_now(),
    PRIMARY KEY (item_id, expert_id)
);
CREATE INDEX item_releases_expert_at ON item_releases (expert_id, released_at);
CREATE INDEX item_releases_project ON item_releases (project_id) WHERE reason = 'BAD_ITEM';

-- An item k experts called bad leaves the pool (its open slots canceled), shown to the customer.
ALTER TABLE items ADD COLUMN flagged_at timestamptz;

ALTER TABLE projects
    ADD COLUMN flag_after_bad_item_releases integer NOT NULL DEFAULT 2
        CHECK (flag_after_bad_item_releases BETWEEN 1 AND 100),
    -- NULL: no cap. Counted over the expert's live and answered assignments of the project.
    ADD COLUMN max_items_per_expert integer CHECK (max_items_per_expert > 0),
    -- NULL: no minimum. A faster answer (claim to submit) is stored and flagged `too_fast`.
    ADD COLUMN min_seconds_per_task integer CHECK (min_seconds_per_task BETWEEN 1 AND 86400),
    -- 'count': a too-fast answer counts like any other; 'exclude': it is never auto-accepted
    -- (it waits for the customer's review) and gold it answers is scored as failed.
    ADD COLUMN too_fast_policy text NOT NULL DEFAULT 'count'
        CHECK (too_fast_policy IN ('count', 'exclude'));

ALTER TABLE assignments ADD COLUMN too_fast boolean NOT NULL DEFAULT false;

-- The cap's count: the expert's live and answered assignments in one project, an index range.
CREATE INDEX assignments_expert_project ON assignments (expert_id, project_id)
    WHERE status IN ('active', 'submitted');

-- Bonuses: a customer's grant to an expert who worked on the project, once per key.
ALTER TABLE payouts ADD COLUMN idempotency_key text;
ALTER TABLE payouts DROP CONSTRAINT payouts_kind_check;
ALTER TABLE payouts ADD CONSTRAINT payouts_kind_check
    CHECK (kind IN ('payment', 'reversal', 'bonus'));
ALTER TABLE payouts ADD CONSTRAINT payouts_bonus_key
    CHECK ((kind = 'bonus') = (idempotency_key IS NOT NULL));
CREATE UNIQUE INDEX payouts_bonus_once ON payouts (project_id, idempotency_key)
    WHERE kind = 'bonus';
