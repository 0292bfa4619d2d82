-- The rows every claim and submit inserts (the assignment, its payout line, the item's result
-- and its change) carry the project id copied from the task row in the same statement. Their
-- foreign keys to projects made each insert lock the project row FOR KEY SHARE: four locks per
-- cycle on one row that every expert of a big project shares, a multixact each time two
-- overlap. Projects are never deleted, so the keys guarded nothing the copy does not; the
-- task, item and expert keys stay.
ALTER TABLE assignments DROP CONSTRAINT assignments_project_id_fkey;
ALTER TABLE payouts DROP CONSTRAINT payouts_project_id_fkey;
ALTER TABLE item_results DROP CONSTRAINT item_results_project_id_fkey;
ALTER TABLE result_changes DROP CONSTRAINT result_changes_project_id_fkey;
