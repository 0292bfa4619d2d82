-- Every assignment records the project's instructions version current when it was created,
-- whatever inserts it (the claim's task_claim and gold_claim): one primary-key read of the
-- project row the claim already holds.
CREATE OR REPLACE FUNCTION taskroute_assignment_instructions() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    {{ project_instructions_version(NEW.project_id) }} INTO NEW.instructions_version;
    RETURN NEW;
END
$fn$;

CREATE OR REPLACE TRIGGER assignments_instructions_version BEFORE INSERT ON assignments
    FOR EACH ROW EXECUTE FUNCTION taskroute_assignment_instructions();
