-- What customers see of their projects: lists and progress.

-- name: projects_page
-- $1 customer_id (NULL: all, for admins), $2 status (NULL: any), $3 after created_at,
-- $4 after id ($3 NULL: from the newest), $5 max rows. Newest first; (created_at, id) is
-- the cursor, so pages never skip or repeat a row.
SELECT * FROM projects
WHERE ($1::uuid IS NULL OR customer_id = $1)
  AND ($2::text IS NULL OR status = $2)
  AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4::uuid))
ORDER BY created_at DESC, id DESC
LIMIT $5;

-- name: project_item_progress
-- $1 project_id. Items, not slots: the customer's items (gold excluded) and how many are
-- resolved (an agreed or adjudicated result). Two index-only scans of this project's entries
-- (items_project_customer, item_results_resolved): bounded by the project's size.
SELECT (SELECT count(*) FROM items WHERE project_id = $1 AND gold_answer IS NULL)::int AS total,
       (SELECT count(*) FROM item_results
        WHERE project_id = $1 AND status = 'resolved')::int AS resolved;

-- name: project_progress_by_skill
-- $1 project_id. Task counts by skill and state.
SELECT skill,
       count(*)::int AS total,
       count(*) FILTER (WHERE status IN ('open', 'pending'))::int AS open,
       count(*) FILTER (WHERE status = 'claimed')::int AS claimed,
       count(*) FILTER (WHERE status = 'done')::int AS done,
       count(*) FILTER (WHERE status = 'failed')::int AS failed,
       count(*) FILTER (WHERE status = 'canceled')::int AS canceled
FROM tasks WHERE project_id = $1
GROUP BY skill ORDER BY skill;
