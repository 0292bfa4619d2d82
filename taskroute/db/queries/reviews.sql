-- Review as work: a project whose payment policy is on_review may route the review of each
-- answer to experts holding the skill `review:<skill>` (projects.expert_review). A review task
-- is a slot of the reviewed item (kind 'review'), so the one eligibility rule keeps an expert
-- off a review of their own answer (task_eligible: not an item the expert holds or answered),
-- and the claim, lease, heartbeat and submit are the ones every task has.
-- Lock order: the review task, then the reviewer's assignment, then the reviewed answer.

-- name: review_open
-- $1 a normal or adjudication answer just submitted. Its review task (skill review:<skill>,
-- the project's min_quality, the slot's priority) and the expert_reviews row naming it, when
-- the project routes review to experts and is active. Returns what opened (wake-up hints).
WITH t AS (
    INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, min_quality,
                       max_retries, status, kind, required_caps)
    SELECT s.item_id, s.project_id, 'review:' || s.skill, s.priority, s.eff_priority,
           p.min_quality, s.max_retries, 'open', 'review', s.required_caps
    FROM assignments a
    JOIN tasks s ON s.id = a.task_id AND s.kind IN ('normal', 'adjudication')
    JOIN projects p ON p.id = a.project_id AND p.expert_review AND p.status = 'active'
    WHERE a.id = $1
    RETURNING id, item_id, project_id, skill, min_quality
),
r AS (
    INSERT INTO expert_reviews (task_id, reviewed_id, item_id, project_id)
    SELECT id, $1, item_id, project_id FROM t
)
SELECT skill, project_id, min_quality FROM t;

-- name: review_of_assignment
-- $1 the reviewer's assignment. The review it is doing (no row: not a review task), with what
-- deciding needs.
SELECT er.task_id, er.reviewed_id, er.item_id, er.project_id, p.review_pay_cents,
       p.pay_corrected
FROM assignments a
JOIN expert_reviews er ON er.task_id = a.task_id
JOIN projects p ON p.id = er.project_id
WHERE a.id = $1;

-- name: review_record
-- $1 review task, $2 the reviewer's assignment, $3 verdict, $4 correction, $5 applied.
UPDATE expert_reviews
SET review_assignment_id = $2, verdict = $3, correction = $4, applied = $5,
    decided_at = taskroute_now()
WHERE task_id = $1;

-- name: item_review_correction
-- $1 item_id. The latest correction an expert reviewer made to one of the item's answers (it
-- decided that answer): the item's label.
SELECT correction FROM expert_reviews
WHERE item_id = $1 AND verdict = 'correct' AND applied
ORDER BY decided_at DESC
LIMIT 1;

-- name: review_tasks_lock
-- $1 answers a customer is deciding. Their live review tasks, locked before the answers (the
-- lock order: a reviewer's submit holds the task while it decides the answer).
SELECT t.id FROM expert_reviews er JOIN tasks t ON t.id = er.task_id
WHERE er.reviewed_id = ANY ($1::uuid[]) AND t.status IN ('open', 'claimed')
ORDER BY t.id
FOR UPDATE OF t;

-- name: review_tasks_close
-- $1 answers just decided (by a customer or auto-approval). Their review tasks still open or
-- claimed are canceled; a reviewer holding one loses the claim unpaid (their assignment is
-- released: heartbeat and submit answer LEASE_EXPIRED). SKIP LOCKED: a task a reviewer is
-- submitting right now is left to that submit (the review is stored and paid; its verdict
-- finds the answer decided and changes nothing). Returns the projects to settle.
WITH closing AS (
    SELECT t.id, t.assignment_id
    FROM expert_reviews er
    JOIN tasks t ON t.id = er.task_id
    JOIN assignments o ON o.id = er.reviewed_id
    WHERE er.reviewed_id = ANY ($1::uuid[]) AND t.status IN ('open', 'claimed')
      AND o.review_status <> 'submitted'
    ORDER BY t.id
    FOR UPDATE OF t SKIP LOCKED
),
closed AS (
    UPDATE tasks t SET status = 'canceled', assignment_id = NULL, lease_until = NULL
    FROM closing c
    WHERE t.id = c.id
    RETURNING t.project_id, c.assignment_id
),
released AS (
    UPDATE assignments a SET status = 'released'
    FROM closed c
    WHERE a.id = c.assignment_id AND a.status = 'active'
)
SELECT DISTINCT project_id FROM closed;
