-- The value lists of the columns every claim and submit writes, as domains instead of table
-- CHECK constraints. Postgres reads a table's CHECK expressions back from their stored node
-- text in every statement that writes the table (16 times per claim+submit cycle, a twentieth
-- of its instructions: bench/cycle_instructions.py); a domain's constraints are read once per
-- session and kept in its type cache. The same values are allowed and a bad one is refused
-- with the same error class (check_violation). payouts keeps its checks across columns.
-- Triggers whose WHEN names a converted column block the type change: they are dropped here
-- and created again, unchanged, from functions/*.sql right after the migrations.
DROP TRIGGER IF EXISTS tasks_finished ON tasks;
DROP TRIGGER IF EXISTS assignments_pace_update ON assignments;
DROP TRIGGER IF EXISTS assignments_gold_twins ON assignments;
DROP TRIGGER IF EXISTS assignments_webhooks ON assignments;
DROP TRIGGER IF EXISTS experts_invalidate_status ON experts;

CREATE DOMAIN task_status AS text
    CHECK (VALUE = ANY ('{pending,open,claimed,done,failed,canceled}'::text[]));
CREATE DOMAIN task_kind AS text CHECK (VALUE = ANY ('{normal,gold,adjudication,review}'::text[]));
CREATE DOMAIN assignment_status AS text
    CHECK (VALUE = ANY ('{active,submitted,expired,released}'::text[]));
CREATE DOMAIN review_status AS text CHECK (VALUE = ANY ('{submitted,accepted,rejected}'::text[]));
CREATE DOMAIN payout_kind AS text CHECK (VALUE = ANY ('{payment,reversal,bonus}'::text[]));
CREATE DOMAIN item_result_status AS text
    CHECK (VALUE = ANY ('{pending,adjudicating,resolved}'::text[]));
CREATE DOMAIN result_change AS text CHECK (VALUE = ANY ('{resolved,re-resolved,retracted}'::text[]));
CREATE DOMAIN expert_status AS text CHECK (VALUE = ANY ('{active,disabled}'::text[]));
CREATE DOMAIN expert_skill_status AS text CHECK (VALUE = ANY ('{active,paused}'::text[]));

ALTER TABLE tasks
    DROP CONSTRAINT tasks_status_check,
    DROP CONSTRAINT tasks_kind_check,
    ALTER COLUMN status TYPE task_status,
    ALTER COLUMN kind TYPE task_kind;
ALTER TABLE assignments
    DROP CONSTRAINT assignments_status_check,
    DROP CONSTRAINT assignments_review_status_check,
    ALTER COLUMN status TYPE assignment_status,
    ALTER COLUMN review_status TYPE review_status;
ALTER TABLE payouts
    DROP CONSTRAINT payouts_kind_check,
    ALTER COLUMN kind TYPE payout_kind;
ALTER TABLE item_results
    DROP CONSTRAINT item_results_status_check,
    ALTER COLUMN status TYPE item_result_status;
ALTER TABLE result_changes
    DROP CONSTRAINT result_changes_change_check,
    ALTER COLUMN change TYPE result_change;
ALTER TABLE experts
    DROP CONSTRAINT experts_status_check,
    ALTER COLUMN status TYPE expert_status;
ALTER TABLE expert_skills
    DROP CONSTRAINT expert_skills_status_check,
    ALTER COLUMN status TYPE expert_skill_status;
