-- Adaptive gold share (sequential pause rule): an expert is a suspect, and gets
-- suspect_gold_ratio gold, until their gold answers are at least clear_evidence times likelier
-- from an expert at trusted_accuracy than from one below pause_below. A brand-new expert has
-- no evidence either way (a ratio of 1), so with clear_evidence above 1 they start as a
-- suspect: the first gold answers come at once, and an early lucky answer no longer drops a
-- bad expert to the steady gold share (the random expert's pause took 16.5 tasks, issue 15).
-- 1 is the rule before: suspect only while the evidence leans against the expert.
-- Projects made before this migration keep 1; new projects get 5.
ALTER TABLE project_quality
    ADD COLUMN clear_evidence real NOT NULL DEFAULT 1 CHECK (clear_evidence >= 1);
ALTER TABLE project_quality ALTER COLUMN clear_evidence SET DEFAULT 5;
