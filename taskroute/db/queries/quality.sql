-- Quality: gold serving and scoring, agreement and adjudication, pausing, retraction, results.
-- Lock order: task row, its assignment, then the item (FOR NO KEY UPDATE). Retraction locks all
-- its items ordered by id. The change feed takes no lock (read up to a horizon: result_feed_horizon).

-- name: gold_claim
-- $1 expert_id, $2 skills to restrict to (NULL: all the expert holds), $3 project to restrict
-- to (NULL: any), $4 a uniform draw in [0,1).
-- Serves one gold item as a freshly created task row, claimed at once, shaped like task_claim's
-- answer. A (project, skill) serves gold only while it has open work the expert may take
-- (task_eligible: gold is mixed into real work, never all that is left), and only when the
-- draw falls under its gold share. Under the sequential pause rule, the suspect share until
-- the expert is cleared: until the pause test's evidence is clear_evidence times in their
-- favour (pause_llr <= -ln(clear_evidence); a new expert, at 0, starts as a suspect: more
-- gold, a sooner decision either way); the lower proven share once it is as sure of "good" as
-- a pause would need to be of "bad" (pause_llr <= ln(pause_risk)). Otherwise the onboarding
-- share during the expert's first `exploration_tasks` tasks of the skill, else gold_ratio.
-- A project with gold_ratio 0 serves gold during onboarding only (no steady budget to
-- reallocate). Which share applies depends only on answers already scored, so the pause
-- test's guarantee holds however the gold is allocated. Never an item this
-- expert has seen; least-exposed first, ties at random; retired at `gold_max_exposures`.
-- Indistinguishable from that real work: the serving copies the priority and the base
-- effective priority (no fairness boost) of the task the expert would get next there, so
-- neither the claim nor a heartbeat's hasHighPriorityTasks tells them apart.
-- The task has max_retries 0: an expired gold lease fails, it is never reopened or taken over.
WITH my_skills AS ({{ eligible_skills($1, $2) }}),
served AS (
    SELECT gp.project_id, s.skill, w.priority, w.eff_priority
    FROM my_skills s
    JOIN (SELECT DISTINCT project_id, skill FROM gold_pool WHERE retired_at IS NULL) gp
      ON gp.skill = s.skill
    JOIN projects p ON p.id = gp.project_id AND p.status = 'active'
                       AND ($3::uuid IS NULL OR p.id = $3::uuid)
    JOIN project_quality q ON q.project_id = p.id
    JOIN expert_skills ev ON ev.expert_id = $1 AND ev.skill = s.skill
    CROSS JOIN LATERAL (
        SELECT t.priority, routing_base_priority(t.eff_priority) AS eff_priority
        FROM tasks t
        WHERE t.project_id = p.id AND t.status = 'open' AND t.skill = s.skill
          AND {{ task_eligible(t, s, $1) }}
        ORDER BY t.eff_priority DESC, t.seq
        LIMIT 1
    ) w
    WHERE $4::float8 < CASE
        WHEN q.pause_rule = 'sequential' AND q.gold_ratio > 0
             AND ev.pause_llr > -ln(q.clear_evidence)
            THEN greatest(q.gold_ratio, q.suspect_gold_ratio,
                          CASE WHEN s.tasks_done < q.exploration_tasks
                               THEN q.exploration_gold_ratio ELSE 0 END)
        WHEN s.tasks_done < q.exploration_tasks
            THEN greatest(q.gold_ratio, q.exploration_gold_ratio)
        WHEN q.pause_rule = 'sequential' AND ev.pause_llr <= ln(q.pause_risk)
            THEN least(q.gold_ratio, q.proven_gold_ratio)
        ELSE q.gold_ratio END
),
pick AS (
    SELECT g.item_id, g.project_id, g.skill, sv.priority, sv.eff_priority
    FROM gold_pool g
    JOIN served sv ON sv.project_id = g.project_id AND sv.skill = g.skill
    WHERE g.retired_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM gold_exposures x WHERE x.expert_id = $1 AND x.item_id = g.item_id)
    ORDER BY g.exposures, random()
    LIMIT 1
    FOR UPDATE OF g SKIP LOCKED
),
task AS (
    INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, min_quality,
                       max_retries, status, kind, assignment_id, lease_until)
    SELECT k.item_id, k.project_id, k.skill, k.priority, k.eff_priority, 0, 0, 'claimed', 'gold',
           gen_random_uuid(), taskroute_now() + make_interval(secs => p.lease_seconds)
    FROM pick k JOIN projects p ON p.id = k.project_id
    RETURNING id AS task_id, item_id, project_id, skill, priority, assignment_id, lease_until
),
assignment AS (
    -- the project's instructions version, as claim_take records it
    INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, lease_until,
                             instructions_version)
    SELECT k.assignment_id, k.task_id, k.item_id, k.project_id, $1, k.lease_until,
           p.instructions_version
    FROM task k JOIN projects p ON p.id = k.project_id
    RETURNING id, candidates_swapped, instructions_version
),
exposure AS (
    INSERT INTO gold_exposures (expert_id, item_id, assignment_id)
    SELECT $1, item_id, assignment_id FROM task
),
counted AS (
    UPDATE gold_pool g
    SET exposures = g.exposures + 1,
        retired_at = CASE WHEN g.exposures + 1 >= q.gold_max_exposures THEN taskroute_now() END
    FROM task k, project_quality q
    WHERE g.item_id = k.item_id AND q.project_id = g.project_id
)
SELECT k.assignment_id, k.lease_until, k.task_id, k.project_id, k.skill, k.priority,
       k.item_id, p.customer_id, i.payload, i.payload_key, i.payload_bytes,
       a.candidates_swapped, a.instructions_version
FROM task k JOIN assignment a ON a.id = k.assignment_id
JOIN projects p ON p.id = k.project_id JOIN items i ON i.id = k.item_id;

-- fragment: gold_possible
-- $1 alias of an eligible_skills row, $2 project to restrict to (NULL: any). Whether
-- gold_claim could serve anything in that skill: an unretired gold item (of that project, when
-- scoped). One gold_pool_serve probe. The claim runs gold_claim only when some skill says so
-- (claim_paths, queries/claims.sql): its writing CTEs fire their tables' statement triggers
-- even when they write nothing (a third of an empty claim's work, where no project has gold).
EXISTS (
    SELECT 1 FROM gold_pool g
    WHERE g.skill = $1.skill AND g.retired_at IS NULL
      AND ($2::uuid IS NULL OR g.project_id = $2::uuid)
)

-- name: expert_skill_task_done
-- $1 expert_id, $2 skill. Counts a submitted task (drives the onboarding gold share).
UPDATE expert_skills SET tasks_done = tasks_done + 1 WHERE expert_id = $1 AND skill = $2;

-- name: expert_skill_gold_score
-- $1 expert_id, $2 skill, $3 correct (bool), $4 the bar (pause_below), $5 trusted_accuracy.
-- Records a gold answer; quality becomes the mean of the Beta(1 + correct, 1 + wrong)
-- posterior, pulled toward 0.5 while samples are few; pause_llr the pause test's evidence on
-- the gold answers since the last unpause (functions/quality.sql: taskroute_pause_llr).
UPDATE expert_skills
SET gold_seen = gold_seen + 1,
    gold_correct = gold_correct + $3::boolean::int,
    quality = (1 + gold_correct + $3::boolean::int)::real / (2 + gold_seen + 1),
    pause_llr = coalesce(taskroute_pause_llr(
        gold_correct + $3::boolean::int - pause_correct_from,
        gold_seen + 1 - pause_check_from - (gold_correct + $3::boolean::int - pause_correct_from),
        $4, $5), 0)
WHERE expert_id = $1 AND skill = $2
RETURNING gold_seen, gold_correct, quality, status, pause_check_from, pause_correct_from,
          pause_llr;

-- name: expert_skill_pause
-- $1 expert_id, $2 skill, $3 reason. A status change with reason and time, never a delete.
UPDATE expert_skills SET status = 'paused', status_reason = $3, status_at = taskroute_now()
WHERE expert_id = $1 AND skill = $2 AND status = 'active'
RETURNING expert_id;

-- name: expert_skill_unpause
-- $1 expert_id, $2 skill, $3 reason. The pause rule restarts counting gold answers from here
-- (the sequential test starts afresh: no evidence either way).
UPDATE expert_skills
SET status = 'active', status_reason = $3, status_at = taskroute_now(), pause_check_from = gold_seen,
    pause_correct_from = gold_correct, pause_llr = 0
WHERE expert_id = $1 AND skill = $2
RETURNING *;

-- name: expert_skills_of
-- $1 expert_id.
SELECT * FROM expert_skills WHERE expert_id = $1 ORDER BY skill;

-- name: leases_release_for_skill
-- $1 expert_id, $2 skill. Gives the expert's live claims on the skill back (task row first,
-- then the assignment): slots reopen, a gold serving is canceled (the item stays in the pool).
WITH held AS (
    SELECT t.id, t.assignment_id
    FROM tasks t
    JOIN assignments a ON a.id = t.assignment_id
    WHERE t.status = 'claimed' AND t.skill = $2 AND a.expert_id = $1 AND a.status = 'active'
    FOR UPDATE OF t
),
released AS (
    UPDATE tasks t
    SET status = CASE WHEN t.kind = 'gold' THEN 'canceled' ELSE 'open' END,
        assignment_id = NULL, lease_until = NULL
    FROM held h WHERE t.id = h.id
    RETURNING t.id, h.assignment_id, t.skill, t.project_id, t.status, t.min_quality
),
released_assignments AS (
    UPDATE assignments a SET status = 'released'
    FROM released r WHERE a.id = r.assignment_id AND a.status = 'active'
)
SELECT id, skill, project_id, status, min_quality FROM released;

-- name: item_lock
-- $1 item_id. Locks the item: serialises the resolution of its racing last answers.
SELECT id FROM items WHERE id = $1 FOR NO KEY UPDATE

-- name: item_lock_state
-- $1 item_id. What resolving the item needs: policy (quality and payment), live normal slots,
-- the current result.
-- Run after item_lock, as its own statement: a statement that waited for the lock reads the
-- other tables as of its start, so counts and versions written by the racing submit that held
-- the lock would be missed (two answers 3 ms apart each saw the other's slot as still live).
SELECT i.id AS item_id, i.project_id, p.redundancy, p.status AS project_status,
       p.payment_policy, p.pay_adjudicated_disagreements,
       q.answer_field, q.agreement_threshold, q.adjudication_min_quality, q.adjudicate,
       q.resolution, q.answer_choices, q.confidence_threshold,
       least(p.redundancy, coalesce(q.min_answers, p.redundancy)) AS min_answers,
       (SELECT count(*) FROM tasks t WHERE t.item_id = i.id AND t.kind = 'normal'
          AND t.status IN ('pending', 'open', 'claimed')) AS live_slots,
       r.status AS result_status, r.answer AS result_answer, r.agreement AS result_agreement,
       r.method AS result_method, coalesce(r.version, 0) AS version
FROM items i
JOIN projects p ON p.id = i.project_id
JOIN project_quality q ON q.project_id = i.project_id
LEFT JOIN item_results r ON r.item_id = i.id
WHERE i.id = $1;

-- name: items_lock_many
-- $1 item ids. Locks items in id order (retraction; deadlock-free against single-item locks).
SELECT id, project_id FROM items WHERE id = ANY ($1::uuid[]) ORDER BY id FOR NO KEY UPDATE;

-- name: item_valid_answers
-- $1 item_id. Answers that count: submitted, not retracted, on a normal or adjudication task.
SELECT a.id, a.answer, t.kind, a.submitted_at
FROM assignments a JOIN tasks t ON t.id = a.task_id
WHERE a.item_id = $1 AND a.status = 'submitted' AND a.retracted_at IS NULL
  AND t.kind IN ('normal', 'adjudication')
ORDER BY a.submitted_at, a.id;

-- name: item_weighted_answers
-- $1 item_id, $2 answer_field, $3 answer_choices. The valid answers (normal and adjudication:
-- an adjudicator is one more expert, weighed like the others) with their kind, what they are
-- compared on (k, NULL: field missing) and their weight: the log-odds that the expert is right
-- against one particular wrong answer under the one-coin model, ln(q / (1 - q)) + ln(choices - 1),
-- where q = (1 + correct) / (2 + gold answers) is their measured accuracy in the item's skill
-- (0.5 before any gold). Never negative: an expert no better than chance counts nothing.
SELECT a.id, a.answer, a.submitted_at, t.kind, taskroute_answer_key(a.answer, $2) AS k,
       greatest(0, ln(r.q / (1 - r.q)) + ln($3::int - 1)) AS weight
FROM assignments a
JOIN tasks t ON t.id = a.task_id AND t.kind IN ('normal', 'adjudication')
LEFT JOIN expert_skills es ON es.expert_id = a.expert_id AND es.skill = t.skill
CROSS JOIN LATERAL (
    SELECT least((1 + coalesce(es.gold_correct, 0))::float8 / (2 + coalesce(es.gold_seen, 0)),
                 0.999) AS q
) r
WHERE a.item_id = $1 AND a.status = 'submitted' AND a.retracted_at IS NULL

-- name: item_slots_add
-- $1 item_id, $2 how many. New open slots for relabelling, copied from the item's first slot.
INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, min_quality,
                   max_retries, status, kind)
SELECT t.item_id, t.project_id, t.skill, t.priority, t.eff_priority, t.min_quality,
       t.max_retries, 'open', 'normal'
FROM (SELECT * FROM tasks WHERE item_id = $1 AND kind = 'normal' ORDER BY seq LIMIT 1) t
CROSS JOIN generate_series(1, $2::int)
RETURNING skill, project_id, min_quality;

-- name: adjudication_open
-- $1 item_id, $2 min_quality. One live adjudication per item (partial unique index); it sorts
-- ahead of the item's slots and is refused to the experts who answered (task_claim's NOT EXISTS).
INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, min_quality,
                   max_retries, status, kind)
SELECT t.item_id, t.project_id, t.skill, t.priority, t.eff_priority + 1, $2, t.max_retries,
       'open', 'adjudication'
FROM (SELECT * FROM tasks WHERE item_id = $1 AND kind = 'normal' ORDER BY seq LIMIT 1) t
ON CONFLICT (item_id) WHERE kind = 'adjudication' AND status IN ('open', 'claimed') DO NOTHING
RETURNING skill, project_id, min_quality;

-- name: adjudication_cancel_open
-- $1 item_id. An adjudication nobody holds yet is no longer needed (resolved or back to pending).
UPDATE tasks SET status = 'canceled'
WHERE item_id = $1 AND kind = 'adjudication' AND status = 'open';

-- name: item_result_upsert
-- $1 item_id, $2 project_id, $3 status, $4 answer, $5 agreement, $6 answer count, $7 method,
-- $8 version, $9 confidence (weighted rule; NULL otherwise).
INSERT INTO item_results (item_id, project_id, status, answer, agreement, answers, method,
                          version, confidence, updated_at)
VALUES ($1, $2, $3::text, $4, $5, $6, $7, $8, $9, taskroute_now())
ON CONFLICT (item_id) DO UPDATE
SET status = EXCLUDED.status, answer = EXCLUDED.answer, agreement = EXCLUDED.agreement,
    answers = EXCLUDED.answers, method = EXCLUDED.method, version = EXCLUDED.version,
    confidence = EXCLUDED.confidence, updated_at = taskroute_now();

-- name: result_change_insert
-- $1 project_id, $2 item_id, $3 version, $4 change, $5 answer, $6 agreement, $7 method,
-- $8 confidence. `xact` is this transaction (its default): the feed's order. The row keeps
-- the item's whole exported state (its answers too: item_answers_snapshot), so an
-- export as of this change reads it alone (resolvers/exports/).
INSERT INTO result_changes (project_id, item_id, version, change, answer, agreement, method,
                            confidence, answers)
VALUES ($1, $2, $3, $4::text, $5, $6, $7, $8, ({{ item_answers_snapshot($2) }}));

-- fragment: item_answers_snapshot
-- $1 item_id. Every submitted answer of the item (normal and adjudication slots; gold has
-- none), in submission order, with its expert and whether it is retracted, as one jsonb array.
SELECT coalesce(jsonb_agg(jsonb_build_object(
           'expert_id', a.expert_id, 'answer', a.answer, 'kind', t.kind,
           'retracted', a.retracted_at IS NOT NULL) ORDER BY a.submitted_at, a.id), '[]')
FROM assignments a JOIN tasks t ON t.id = a.task_id
WHERE a.item_id = $1 AND a.status = 'submitted' AND t.kind IN ('normal', 'adjudication')

-- name: result_feed_horizon
-- No parameters. horizon: the oldest transaction still running in this database that has
-- written (else the next transaction id): every change of an older transaction is committed
-- or gone, and any change to come sorts after them. next: the next transaction id (the
-- horizon once everything running now has ended). Run as its own statement before the page,
-- so the page's snapshot is taken after every transaction older than the horizon had ended.
-- (The snapshot's in-progress list is the whole server's; only this database's sessions can
-- write its feed, so other databases hold nothing back. pg_stat_activity shows every
-- session's backend_xid to any role.) As bigint: asyncpg has no xid8.
SELECT coalesce(
           (SELECT min(x) FROM pg_snapshot_xip(s.snap) AS x
            WHERE x::xid IN (SELECT a.backend_xid FROM pg_stat_activity a
                             WHERE a.datname = current_database()
                               AND a.backend_xid IS NOT NULL)),
           pg_snapshot_xmax(s.snap))::text::bigint AS horizon,
       pg_snapshot_xmax(s.snap)::text::bigint AS next
FROM (SELECT pg_current_snapshot() AS snap) AS s;

-- name: results_page
-- $1 project_id, $2 after item_id (NULL: from the start), $3 limit. Resolved items by id.
SELECT r.item_id, i.external_id, r.answer, r.agreement, r.answers, r.method, r.version,
       r.confidence, r.updated_at
FROM item_results r JOIN items i ON i.id = r.item_id
WHERE r.project_id = $1 AND r.status = 'resolved' AND ($2::uuid IS NULL OR r.item_id > $2)
ORDER BY r.item_id
LIMIT $3;

-- name: result_changes_page
-- $1 project_id, $2 after seq (0: from the start), $3 horizon (result_feed_horizon), $4 limit.
-- In (xact, seq) order, after the cursor's change, older than the horizon.
SELECT c.seq, c.item_id, i.external_id, c.version, c.change, c.answer, c.agreement, c.at
FROM result_changes c JOIN items i ON i.id = c.item_id
WHERE c.project_id = $1 AND c.xact < $3::bigint::text::xid8
  AND (c.xact, c.seq) > (coalesce((SELECT a.xact FROM result_changes a
                                   WHERE a.seq = $2 AND a.project_id = $1), '0'::xid8), $2)
ORDER BY c.xact, c.seq
LIMIT $4;

-- name: quality_policy_get
-- $1 project_id.
SELECT * FROM project_quality WHERE project_id = $1;

-- name: quality_policy_set
-- $1 project_id, $2 gold_ratio, $3 exploration_tasks, $4 exploration_gold_ratio,
-- $5 gold_max_exposures, $6 gold_low_water, $7 answer_field, $8 agreement_threshold,
-- $9 adjudication_min_quality, $10 pause_min_gold, $11 pause_below, $12 adjudicate,
-- $13 pause_rule, $14 trusted_accuracy, $15 pause_risk, $16 suspect_gold_ratio,
-- $17 proven_gold_ratio, $18 resolution, $19 answer_choices, $20 confidence_threshold,
-- $21 min_answers, $22 clear_evidence.
UPDATE project_quality
SET gold_ratio = $2, exploration_tasks = $3, exploration_gold_ratio = $4,
    gold_max_exposures = $5, gold_low_water = $6, answer_field = $7, agreement_threshold = $8,
    adjudication_min_quality = $9, pause_min_gold = $10, pause_below = $11, adjudicate = $12,
    pause_rule = $13, trusted_accuracy = $14, pause_risk = $15, suspect_gold_ratio = $16,
    proven_gold_ratio = $17, resolution = $18, answer_choices = $19,
    confidence_threshold = $20, min_answers = $21, clear_evidence = $22,
    updated_at = taskroute_now()
WHERE project_id = $1
RETURNING *;

-- name: gold_pool_status
-- $1 project_id. Per skill: unretired and retired gold items, servings, and whether it runs low.
SELECT g.skill,
       count(*) FILTER (WHERE g.retired_at IS NULL) AS active,
       count(*) FILTER (WHERE g.retired_at IS NOT NULL) AS retired,
       coalesce(sum(g.exposures), 0) AS exposures,
       count(*) FILTER (WHERE g.retired_at IS NULL) < min(q.gold_low_water) AS low
FROM gold_pool g JOIN project_quality q ON q.project_id = g.project_id
WHERE g.project_id = $1
GROUP BY g.skill
ORDER BY g.skill;

-- name: retract_answers
-- $1 expert_id, $2 skill (NULL: every skill), $3 since (NULL: all time), $4 by, $5 reason.
-- Marks the expert's customer answers retracted (they stay stored); gold answers keep counting
-- as the evidence they are.
UPDATE assignments a
SET retracted_at = taskroute_now(), retracted_by = $4, retract_reason = $5
FROM tasks t
WHERE t.id = a.task_id AND t.kind IN ('normal', 'adjudication')
  AND a.expert_id = $1 AND a.status = 'submitted' AND a.retracted_at IS NULL
  AND ($2::text IS NULL OR t.skill = $2)
  AND ($3::timestamptz IS NULL OR a.submitted_at >= $3)
RETURNING a.id, a.item_id, a.project_id;

-- name: retract_lock
-- Serialises retractions (each locks many items; one at a time keeps that simple).
SELECT pg_advisory_xact_lock(2052915205);

-- name: payouts_clawback
-- $1 assignment ids, $2 reason. A reversal line per paid payment (the ledger stays append-only).
INSERT INTO payouts (expert_id, project_id, amount_cents, kind, reverses_id, reason)
SELECT p.expert_id, p.project_id, -p.amount_cents, 'reversal', p.id, $2
FROM payouts p
WHERE p.assignment_id = ANY ($1::uuid[]) AND p.kind = 'payment' AND p.amount_cents > 0
ON CONFLICT (reverses_id) DO NOTHING
RETURNING id;

-- name: adjudication_held
-- $1 task_id, $2 expert_id. The adjudication task, if this expert holds its live lease (the
-- payload's rule: only the live lease holder sees what the task carries). No row otherwise:
-- another kind of task, an expired or taken-over lease, a submitted or canceled one.
SELECT t.id AS task_id, t.item_id, t.project_id, p.customer_id
FROM tasks t
JOIN assignments a ON a.id = t.assignment_id
JOIN projects p ON p.id = t.project_id
WHERE t.id = $1 AND t.kind = 'adjudication' AND t.status = 'claimed'
  AND a.expert_id = $2 AND a.status = 'active' AND a.lease_until > taskroute_now();

-- name: adjudication_prior_answers
-- $1 item_id. The valid answers an adjudicator is shown (no expert ids).
SELECT a.answer
FROM assignments a
JOIN tasks st ON st.id = a.task_id AND st.kind = 'normal'
WHERE a.item_id = $1 AND a.status = 'submitted' AND a.retracted_at IS NULL
ORDER BY a.submitted_at, a.id;

-- name: project_answers_for_report
-- $1 project_id. Valid normal answers per item, for agreement statistics.
SELECT a.item_id, a.answer
FROM assignments a JOIN tasks t ON t.id = a.task_id AND t.kind = 'normal'
WHERE a.project_id = $1 AND a.status = 'submitted' AND a.retracted_at IS NULL;

-- name: project_result_counts
-- $1 project_id.
SELECT count(*) FILTER (WHERE status = 'resolved') AS resolved,
       count(*) FILTER (WHERE status = 'resolved' AND method = 'adjudicated') AS adjudicated,
       count(*) FILTER (WHERE status = 'adjudicating') AS adjudicating,
       count(*) FILTER (WHERE status = 'pending') AS pending,
       avg(agreement) FILTER (WHERE status = 'resolved') AS mean_agreement,
       avg(confidence) FILTER (WHERE status = 'resolved') AS mean_confidence,
       avg(answers) FILTER (WHERE status = 'resolved') AS answers_per_item
FROM item_results WHERE project_id = $1;

-- name: project_expert_evidence
-- $1 project_id. Per expert and skill that answered in this project: status and the gold
-- evidence behind pausing and weighting (no names: the report shows what decided, not who).
SELECT es.skill, es.status, es.gold_seen, es.gold_correct, es.pause_llr,
       es.gold_seen - es.pause_check_from AS gold_since_unpause
FROM expert_skills es
WHERE EXISTS (SELECT 1 FROM assignments a JOIN tasks t ON t.id = a.task_id
              WHERE a.project_id = $1 AND a.expert_id = es.expert_id AND t.skill = es.skill)
ORDER BY es.skill, es.pause_llr DESC;

-- name: expert_skill_pause_call
-- $1 expert_id, $2 skill, $3 reason. Pause + release (functions/quality.sql); returns the
-- reopened tasks as jsonb, NULL if the skill was not active.
SELECT taskroute_pause_skill($1, $2, $3);

-- name: item_resolve_call
-- $1 item_id, $2 refill (bool). Returns the tasks it opened as jsonb.
SELECT taskroute_resolve_item($1, $2);
