-- What an expert is shown of their own quality starts from the quality a skill was granted
-- with (queries/accounts.sql: expert_skills_own_view); gold overwrites `quality` later, so the
-- grant's value is kept apart, whoever inserts the row.
CREATE OR REPLACE FUNCTION expert_skills_starting_quality() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.starting_quality := coalesce(NEW.starting_quality, NEW.quality);
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER expert_skills_starting_quality BEFORE INSERT ON expert_skills
    FOR EACH ROW EXECUTE FUNCTION expert_skills_starting_quality();
