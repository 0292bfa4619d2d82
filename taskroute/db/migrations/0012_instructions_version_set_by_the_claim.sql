-- The claim's insert records the project's instructions version itself (queries/claims.sql
-- claim_take, queries/quality.sql gold_claim) and returns it: the row trigger that read the
-- project again for every new assignment goes.
DROP TRIGGER IF EXISTS assignments_instructions_version ON assignments;
DROP FUNCTION IF EXISTS taskroute_assignment_instructions();
