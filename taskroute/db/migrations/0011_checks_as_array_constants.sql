-- The value lists checked on the rows every claim and submit writes, as one array constant
-- instead of an IN list. Postgres reads a table's CHECK expressions back from their stored
-- node text for every statement that writes the table, and constant-folds them again: an IN
-- list is stored as one node per value, an array constant as one node. The same rules; read
-- per cycle, they were a tenth of the cycle's instructions (bench/cycle_instructions.py).
ALTER TABLE tasks
    DROP CONSTRAINT tasks_status_check,
    ADD CONSTRAINT tasks_status_check
        CHECK (status = ANY ('{pending,open,claimed,done,failed,canceled}'::text[])),
    DROP CONSTRAINT tasks_kind_check,
    ADD CONSTRAINT tasks_kind_check
        CHECK (kind = ANY ('{normal,gold,adjudication,review}'::text[]));
ALTER TABLE assignments
    DROP CONSTRAINT assignments_status_check,
    ADD CONSTRAINT assignments_status_check
        CHECK (status = ANY ('{active,submitted,expired,released}'::text[])),
    DROP CONSTRAINT assignments_review_status_check,
    ADD CONSTRAINT assignments_review_status_check
        CHECK (review_status = ANY ('{submitted,accepted,rejected}'::text[]));
ALTER TABLE payouts
    DROP CONSTRAINT payouts_kind_check,
    ADD CONSTRAINT payouts_kind_check CHECK (kind = ANY ('{payment,reversal,bonus}'::text[]));
ALTER TABLE item_results
    DROP CONSTRAINT item_results_status_check,
    ADD CONSTRAINT item_results_status_check
        CHECK (status = ANY ('{pending,adjudicating,resolved}'::text[]));
ALTER TABLE result_changes
    DROP CONSTRAINT result_changes_change_check,
    ADD CONSTRAINT result_changes_change_check
        CHECK (change = ANY ('{resolved,re-resolved,retracted}'::text[]));
ALTER TABLE experts
    DROP CONSTRAINT experts_status_check,
    ADD CONSTRAINT experts_status_check CHECK (status = ANY ('{active,disabled}'::text[]));
ALTER TABLE expert_skills
    DROP CONSTRAINT expert_skills_status_check,
    ADD CONSTRAINT expert_skills_status_check CHECK (status = ANY ('{active,paused}'::text[]));
