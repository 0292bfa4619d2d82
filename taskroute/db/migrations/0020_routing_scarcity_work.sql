-- Issue 17: scarcity in work, not tasks, and a yes/no verdict the claim orders by.
-- The routing job measures each skill's open backlog in seconds of work (open tasks x the
-- skill's typical cycle from the forecast's pace book) and marks a skill `scarce` when its
-- other active holders per second of backlog fall below `scarcity_ratio` of the average over
-- all skills: an expert holding such a skill takes its work before common work that others
-- can do. Between skills of the same verdict, priority decides (it used to be the exact
-- helpers-per-task figure, so tiny differences overrode priority).
ALTER TABLE skill_scarcity
    ADD COLUMN typical_seconds real,
    ADD COLUMN backlog_seconds real NOT NULL DEFAULT 0,
    ADD COLUMN scarce boolean NOT NULL DEFAULT false;

