-- Payment policy on_acceptance: a gold answer is decided on real work's schedule, not at
-- submit. Real work is decided when its item resolves, which is usually after the expert
-- submitted (other experts' answers are still missing); a gold answer decided at once told the
-- expert it was gold. Now each gold answer is decided together with a real answer of the same
-- project and skill (its twin): the latest one another expert submitted before it (at once if
-- that one is already decided), or, when there was none yet, the first one after it (the
-- auto-approval job links them). Its delay is then a real answer's delay.
ALTER TABLE gold_exposures
    -- the twin: the real assignment whose decision decides this gold answer
    ADD COLUMN decide_with uuid REFERENCES assignments (id),
    -- an on_acceptance gold answer waiting for its decision (with or without a twin yet)
    ADD COLUMN pending boolean NOT NULL DEFAULT false;
-- The trigger's lookup and the job's scan: gold answers in flight only (small).
CREATE INDEX gold_exposures_pending ON gold_exposures (decide_with) WHERE pending;

-- Every path that decides real work (the item's resolution, a customer's review, a retraction,
-- a cancel) decides the gold answers waiting on it, in its own transaction.
-- taskroute_gold_decide lives in functions/quality.sql (resolved when the trigger runs).
CREATE FUNCTION assignments_decide_gold_twins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM taskroute_gold_decide(array_agg(x.assignment_id))
    FROM gold_exposures x WHERE x.pending AND x.decide_with = NEW.id
    HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER assignments_gold_twins AFTER UPDATE OF review_status ON assignments
    FOR EACH ROW WHEN (OLD.review_status = 'submitted' AND NEW.review_status <> 'submitted')
    EXECUTE FUNCTION assignments_decide_gold_twins();
