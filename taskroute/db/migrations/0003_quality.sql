-- Quality (issue 5): per-project quality policy, the gold pool and its exposures, task kinds
-- (normal slots, gold served on the fly, adjudication), resolved results and their change feed.

-- One policy row per project (a trigger adds it with these defaults; setQualityPolicy edits it).
CREATE TABLE project_quality (
    project_id               uuid PRIMARY KEY REFERENCES projects (id),
    -- share of claims served from the gold pool once an expert is past onboarding
    gold_ratio               real NOT NULL DEFAULT 0.1 CHECK (gold_ratio BETWEEN 0 AND 1),
    -- an expert's first N tasks of a skill get the (higher) onboarding gold share
    exploration_tasks        integer NOT NULL DEFAULT 10 CHECK (exploration_tasks >= 0),
    exploration_gold_ratio   real NOT NULL DEFAULT 0.3
                             CHECK (exploration_gold_ratio BETWEEN 0 AND 1),
    -- a gold item is retired after this many servings (rotation against over-exposure)
    gold_max_exposures       integer NOT NULL DEFAULT 50 CHECK (gold_max_exposures > 0),
    -- the pool of a skill is reported "low" below this many unretired gold items
    gold_low_water           integer NOT NULL DEFAULT 5 CHECK (gold_low_water >= 0),
    -- answers are compared on this top-level field of the answer object (NULL: the whole answer)
    answer_field             text,
    -- share of the majority answer needed to resolve an item without adjudication
    agreement_threshold      real NOT NULL DEFAULT 0.6 CHECK (agreement_threshold BETWEEN 0 AND 1),
    adjudication_min_quality real NOT NULL DEFAULT 0.8
                             CHECK (adjudication_min_quality BETWEEN 0 AND 1),
    -- false: below the threshold the most common answer (earliest on a tie) resolves the item
    -- ('plurality') and no adjudication task is opened (nor paid for)
    adjudicate               boolean NOT NULL DEFAULT true,
    -- pause an expert for a skill once they have >= pause_min_gold gold answers (since their
    -- last unpause) and their quality estimate is below pause_below
    pause_min_gold           integer NOT NULL DEFAULT 5 CHECK (pause_min_gold >= 1),
    pause_below              real NOT NULL DEFAULT 0.5 CHECK (pause_below BETWEEN 0 AND 1),
    updated_at               timestamptz NOT NULL DEFAULT now()
);
INSERT INTO project_quality (project_id) SELECT id FROM projects;

CREATE FUNCTION project_quality_default() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO project_quality (project_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER projects_quality_default AFTER INSERT ON projects
    FOR EACH ROW EXECUTE FUNCTION project_quality_default();

-- 'normal': a redundancy slot; 'gold': one serving of a gold item to one expert, created
-- already claimed by the gold claim (max_retries 0, so an expired one fails instead of being
-- reopened or taken over); 'adjudication': resolves a disagreement.
ALTER TABLE tasks ADD COLUMN kind text NOT NULL DEFAULT 'normal'
    CHECK (kind IN ('normal', 'gold', 'adjudication'));
-- One live adjudication per item, also under racing submits.
CREATE UNIQUE INDEX tasks_one_adjudication ON tasks (item_id)
    WHERE kind = 'adjudication' AND status IN ('open', 'claimed');

-- gold_seen at the last admin unpause: the pause rule counts gold answers from there.
ALTER TABLE expert_skills ADD COLUMN pause_check_from integer NOT NULL DEFAULT 0;

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
INSERT INTO gold_pool (item_id, project_id, skill)
SELECT id, project_id, skill FROM items WHERE gold_answer IS NOT NULL;

-- Every insert path (createProject, addTasks, background ingest, addGoldItems) fills the pool.
CREATE FUNCTION gold_pool_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gold_pool (item_id, project_id, skill)
    VALUES (NEW.id, NEW.project_id, NEW.skill) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER items_gold_pool AFTER INSERT ON items
    FOR EACH ROW WHEN (NEW.gold_answer IS NOT NULL) EXECUTE FUNCTION gold_pool_add();

-- Who has seen which gold item: the key makes "never the same gold twice" hold under races.
CREATE TABLE gold_exposures (
    expert_id      uuid NOT NULL REFERENCES experts (id),
    item_id        uuid NOT NULL REFERENCES items (id),
    assignment_id  uuid NOT NULL,
    at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (expert_id, item_id)
);

-- The customer's result per item (normal items only).
CREATE TABLE item_results (
    item_id     uuid PRIMARY KEY REFERENCES items (id),
    project_id  uuid NOT NULL REFERENCES projects (id),
    -- 'pending' (fewer than k valid answers, e.g. after a retraction) | 'adjudicating' | 'resolved'
    status      text NOT NULL CHECK (status IN ('pending', 'adjudicating', 'resolved')),
    answer      jsonb,
    -- share of the majority answer among the valid answers
    agreement   real,
    answers     integer NOT NULL DEFAULT 0,
    -- 'majority' | 'adjudicated' (when resolved)
    method      text,
    -- bumped on every change a customer can see (resolved, retracted, re-resolved)
    version     integer NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX item_results_resolved ON item_results (project_id, item_id) WHERE status = 'resolved';

-- The change feed: one row per visible result change. Rows of one project are inserted under
-- a per-project advisory lock held to commit, so seq order is commit order within a project
-- and a reader paging with `seq > cursor` never skips a late-committing row.
CREATE TABLE result_changes (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id  uuid NOT NULL REFERENCES projects (id),
    item_id     uuid NOT NULL REFERENCES items (id),
    version     integer NOT NULL,
    change      text NOT NULL CHECK (change IN ('resolved', 're-resolved', 'retracted')),
    answer      jsonb,
    agreement   real,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX result_changes_project ON result_changes (project_id, seq);
