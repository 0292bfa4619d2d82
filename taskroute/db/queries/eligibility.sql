-- Eligibility: "may this expert take this task", written once. Spliced (queries.py) into every
-- statement that asks it: task_claim (each probe), gold_claim (is there real work to mix gold
-- into), open_work_held_by_others (a claim that found nothing free), assignment_heartbeat
-- (hasHighPriorityTasks) and expert_skills_available (the subscription's catch-up). tests/claims/test_one_eligibility_rule.py feeds one world to all of
-- them and checks that they agree.

-- fragment: eligible_skills
-- $1 expert_id, $2 skills to restrict to (text[]; NULL: every skill the expert holds).
-- A row source: the skills the expert may claim in now, i.e. an active (not paused) skill of
-- an active expert. Columns: skill, quality (what a task's min_quality is compared with),
-- capabilities (the expert's tags), tasks_done (drives the onboarding gold share).
SELECT es.skill, es.quality, e.capabilities, es.tasks_done
FROM expert_skills es
JOIN experts e ON e.id = es.expert_id
WHERE es.expert_id = $1 AND es.status = 'active' AND e.status = 'active'
  AND ($2::text[] IS NULL OR es.skill = ANY ($2::text[]))

-- fragment: task_eligible
-- $1 alias of the task row, $2 alias of an eligible_skills row, $3 expert_id.
-- The task is of that skill, asks no more quality than the expert has in it and no capability
-- tag the expert lacks, belongs to an active project (not ingesting, not canceled) whose
-- max_items_per_expert (if any) the expert has not reached, and is not an item the expert
-- already holds, answered (redundancy needs independent experts) or released (item_releases).
-- A review task is a slot of the reviewed item, so this also keeps a reviewer off their own
-- answer (queries/reviews.sql).
-- The caller states which rows it probes (status, and scope via task_in_scope): that picks
-- the partial index. The project check is EXISTS: a scalar subquery compared with 'active'
-- gets the planner's default selectivity (0.5%), which made it sort every open task of the
-- skill instead of walking the index to the first match (15 ms instead of 1 ms per claim).
-- OFFSET 0 keeps it a per-row check: pulled up into a semi-join, the planner walked every
-- active project's tasks instead of probing the skill's index
-- (tests/db/test_claim_and_heartbeat_probe_indexes.py).
-- The cap reads at most max_items_per_expert entries of assignments_expert_project, only in a
-- capped project; the claim holds the expert's row lock, so one expert's claims cannot race it.
-- The release check is one primary-key probe of item_releases.
$1.skill = $2.skill AND $1.min_quality <= $2.quality
AND ($1.required_caps = '{}' OR $1.required_caps <@ $2.capabilities)
AND EXISTS (SELECT 1 FROM projects p WHERE p.id = $1.project_id AND p.status = 'active'
              AND (p.max_items_per_expert IS NULL
                   OR (SELECT count(*) FROM (
                           SELECT 1 FROM assignments ac
                           WHERE ac.expert_id = $3 AND ac.project_id = p.id
                             AND ac.status IN ('active', 'submitted')
                           LIMIT p.max_items_per_expert) capped) < p.max_items_per_expert)
              OFFSET 0)
AND NOT EXISTS (SELECT 1 FROM assignments a
                WHERE a.item_id = $1.item_id AND a.expert_id = $3
                  AND a.status IN ('active', 'submitted'))
AND NOT EXISTS (SELECT 1 FROM item_releases r WHERE r.item_id = $1.item_id AND r.expert_id = $3)

-- fragment: task_in_scope
-- $1 alias of the task row, $2 project_id the claim is scoped to (uuid; NULL: any project).
($2::uuid IS NULL OR $1.project_id = $2::uuid)
