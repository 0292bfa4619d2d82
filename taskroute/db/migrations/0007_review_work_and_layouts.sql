-- Review as work and the workbench's layouts (docs/quality-and-payment.md: Review by experts;
-- docs/dashboard-and-workbench.md: Layouts).

-- How the workbench presents a project's tasks, and whether its review (payment policy
-- on_review) is routed to experts holding the skill `review:<skill>`.
ALTER TABLE projects
    ADD COLUMN layout text NOT NULL DEFAULT 'GENERIC'
        CHECK (layout IN ('GENERIC', 'GRADE', 'PAIRWISE', 'REVIEW')),
    -- PAIRWISE: the payload keys of the two candidates (NULL: a and b)
    ADD COLUMN candidate_keys text[] CHECK (cardinality(candidate_keys) = 2),
    ADD COLUMN expert_review boolean NOT NULL DEFAULT false,
    ADD COLUMN review_pay_cents integer NOT NULL DEFAULT 0 CHECK (review_pay_cents >= 0),
    -- a corrected answer is paid (false: it is rejected, the correction becomes the label)
    ADD COLUMN pay_corrected boolean NOT NULL DEFAULT false;

-- 'review': an expert's review of one submitted answer (expert_reviews).
-- NOT VALID, then VALIDATE: the check scans the table without blocking its writers.
ALTER TABLE tasks DROP CONSTRAINT tasks_kind_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_kind_check
    CHECK (kind IN ('normal', 'gold', 'adjudication', 'review')) NOT VALID;
ALTER TABLE tasks VALIDATE CONSTRAINT tasks_kind_check;

-- PAIRWISE: true when candidate b was shown on the left to this assignment's expert. Drawn by
-- the column default as the claim inserts the assignment (no extra write); added without a
-- default first, so existing rows stay NULL and the table is not rewritten.
ALTER TABLE assignments ADD COLUMN candidates_swapped boolean;
ALTER TABLE assignments ALTER COLUMN candidates_swapped SET DEFAULT (random() < 0.5);

-- One row per review task: the answer it reviews and, once submitted, the verdict.
CREATE TABLE expert_reviews (
    task_id              uuid PRIMARY KEY REFERENCES tasks (id),
    reviewed_id          uuid NOT NULL UNIQUE REFERENCES assignments (id),
    item_id              uuid NOT NULL REFERENCES items (id),
    project_id           uuid NOT NULL REFERENCES projects (id),
    created_at           timestamptz NOT NULL DEFAULT taskroute_now(),
    review_assignment_id uuid UNIQUE REFERENCES assignments (id),
    verdict              text CHECK (verdict IN ('accept', 'reject', 'correct')),
    correction           jsonb,
    -- the verdict decided the answer (false: it was decided already, by the customer or
    -- auto-approval, while the review was being done)
    applied              boolean,
    decided_at           timestamptz
);
-- The item's resolution reads its applied corrections (functions/quality.sql).
CREATE INDEX expert_reviews_corrections ON expert_reviews (item_id, decided_at DESC)
    WHERE verdict = 'correct' AND applied;
