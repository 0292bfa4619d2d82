-- Issue 15: quality decisions that use the evidence. Pausing becomes a sequential test on the
-- gold answers (with adaptive gold shares), items may be resolved by answers weighted with each
-- expert's measured reliability, and may collect answers one at a time until confident
-- (dynamic overlap). The rules themselves live in functions/quality.sql; these are the knobs.

ALTER TABLE project_quality
    -- 'sequential': pause once the gold answers since the last unpause are at least
    -- 1 / pause_risk times likelier from an expert at or below pause_below than from one at
    -- trusted_accuracy (a mixture sequential probability ratio test); 'fixed': the rule before
    -- issue 15 (>= pause_min_gold gold answers and a Beta mean below pause_below)
    ADD COLUMN pause_rule text NOT NULL DEFAULT 'sequential'
        CHECK (pause_rule IN ('sequential', 'fixed')),
    -- experts at or above this accuracy are paused with probability at most pause_risk, ever
    ADD COLUMN trusted_accuracy real NOT NULL DEFAULT 0.75
        CHECK (trusted_accuracy > 0 AND trusted_accuracy < 1),
    ADD COLUMN pause_risk real NOT NULL DEFAULT 0.005 CHECK (pause_risk > 0 AND pause_risk < 1),
    -- adaptive gold share (sequential rule only): while the evidence leans towards "below the
    -- bar" an expert gets this share of gold, so the test decides sooner; once it is as sure the
    -- expert is good as a pause would need to be sure of the opposite, the lower proven share
    ADD COLUMN suspect_gold_ratio real NOT NULL DEFAULT 1.0
        CHECK (suspect_gold_ratio BETWEEN 0 AND 1),
    ADD COLUMN proven_gold_ratio real NOT NULL DEFAULT 0.05
        CHECK (proven_gold_ratio BETWEEN 0 AND 1),
    -- 'majority': today's head count (agreement_threshold, adjudication); 'weighted': answers
    -- weighted by the log-odds of each expert's measured accuracy (one-coin model)
    ADD COLUMN resolution text NOT NULL DEFAULT 'majority'
        CHECK (resolution IN ('majority', 'weighted')),
    -- how many different answers an item can have (the weighted rule's model of mistakes;
    -- 2 assumes every mistake lands on the same wrong answer: the cautious choice)
    ADD COLUMN answer_choices integer NOT NULL DEFAULT 2 CHECK (answer_choices >= 2),
    -- weighted rule: an item resolves once the probability of its best answer reaches this
    ADD COLUMN confidence_threshold real NOT NULL DEFAULT 0.99
        CHECK (confidence_threshold > 0 AND confidence_threshold < 1),
    -- dynamic overlap (weighted rule): items start with this many slots and get one more at a
    -- time while not confident, up to the project's redundancy; NULL: all redundancy slots
    ADD COLUMN min_answers integer CHECK (min_answers >= 1);
-- Three gold answers is the earliest a sequential pause may happen (new projects).
ALTER TABLE project_quality ALTER COLUMN pause_min_gold SET DEFAULT 3;

-- The pause test's running evidence per (expert, skill): the natural log of the likelihood
-- ratio "below the bar" vs "trusted" of the gold answers since the last unpause (0: none yet).
-- gold_correct at the last unpause, so the test restarts from there.
ALTER TABLE expert_skills
    ADD COLUMN pause_llr double precision NOT NULL DEFAULT 0,
    ADD COLUMN pause_correct_from integer NOT NULL DEFAULT 0;

-- The weighted rule's probability of the resolved answer (NULL for the majority rule).
ALTER TABLE item_results ADD COLUMN confidence real;
