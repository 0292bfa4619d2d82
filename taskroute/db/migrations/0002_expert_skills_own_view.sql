-- What an expert is shown of their own quality (queries/accounts.sql: expert_skills_own_view)
-- must not move with a single gold answer, so it cannot come from the live estimate: it is
-- the admin-given quality until enough old-enough gold answers are counted. Kept apart here
-- because gold overwrites `quality`; a skill measured before this migration keeps the
-- quality it had then (a constant, so it says nothing about later answers).
ALTER TABLE expert_skills ADD COLUMN starting_quality real;
UPDATE expert_skills SET starting_quality = quality;
ALTER TABLE expert_skills ALTER COLUMN starting_quality SET NOT NULL;

-- The expert's view counts the gold answers given since the skill was granted (removing a
-- skill drops its measured history, as the live counters do); earlier grants: all history.
ALTER TABLE expert_skills ADD COLUMN granted_at timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE expert_skills ALTER COLUMN granted_at SET DEFAULT taskroute_now();
