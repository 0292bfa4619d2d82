-- Releases: an expert gives a live claim back (SKIP, CANNOT_ANSWER, BAD_ITEM). The slot opens
-- at once and the release is not a failed attempt; the item is never offered to that expert
-- again (item_releases, probed by the eligibility rule); k BAD_ITEM releases flag the item.
-- Runs inside taskroute_release (functions/releases.sql), under the claim's lock order:
-- expert row, task, assignment, item.

-- name: release_allowance
-- $1 expert_id, $2 releases allowed per hour. The releases of the last hour (at most $2 index
-- entries of item_releases_expert_at read) and when the oldest of them leaves the window.
SELECT count(*)::int AS used, min(w.released_at) + interval '1 hour' AS resets_at
FROM (SELECT released_at FROM item_releases
      WHERE expert_id = $1 AND released_at > taskroute_now() - interval '1 hour'
      ORDER BY released_at
      LIMIT $2) w;

-- name: assignment_release
-- $1 assignment_id. The caller holds the task and the assignment locked and checked the
-- claim is live; by primary key alone (see assignment_submit on the partial indexes).
UPDATE assignments SET status = 'released' WHERE id = $1;

-- name: item_release_insert
-- $1 item_id, $2 expert_id, $3 assignment_id, $4 project_id, $5 reason.
INSERT INTO item_releases (item_id, expert_id, assignment_id, project_id, reason)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (item_id, expert_id) DO NOTHING;

-- name: item_flag_if_bad
-- $1 item_id. Run with the item locked (item_lock), as its own statement, so it counts every
-- committed BAD_ITEM release of the item (two racing ones: the second counts both). Once the
-- project's flag_after_bad_item_releases is reached: the item is flagged, its open and
-- pending slots canceled, a gold item retired from the pool. No row: not flagged now.
WITH bad AS (
    SELECT count(*) AS n FROM item_releases WHERE item_id = $1 AND reason = 'BAD_ITEM'
),
flagged AS (
    UPDATE items i SET flagged_at = taskroute_now()
    FROM projects p, bad b
    WHERE i.id = $1 AND p.id = i.project_id AND i.flagged_at IS NULL
      AND b.n >= p.flag_after_bad_item_releases
    RETURNING i.id, i.project_id
),
canceled AS (
    UPDATE tasks t SET status = 'canceled'
    FROM flagged f
    WHERE t.item_id = f.id AND t.status IN ('open', 'pending')
),
retired AS (
    UPDATE gold_pool g SET retired_at = coalesce(g.retired_at, taskroute_now())
    FROM flagged f WHERE g.item_id = f.id
)
SELECT id, project_id FROM flagged;

-- name: task_release
-- $1 task_id. The released slot: open again with its attempts unchanged (a release is not a
-- failed attempt); canceled when it was a gold serving (as any gold serving given back), its
-- project was canceled or its item flagged.
UPDATE tasks t
SET status = CASE WHEN t.kind = 'gold' OR p.status = 'canceled' OR i.flagged_at IS NOT NULL
                  THEN 'canceled' ELSE 'open' END,
    assignment_id = NULL,
    lease_until = NULL
FROM projects p, items i
WHERE t.id = $1 AND p.id = t.project_id AND i.id = t.item_id
RETURNING t.skill, t.project_id, t.status, t.min_quality;

-- name: release_call
-- $1 assignment_id, $2 expert_id, $3 reason, $4 releases allowed per hour. One round trip.
SELECT * FROM taskroute_release($1, $2, $3, $4);

-- name: releases_left
-- $1 expert_id, $2 releases allowed per hour. What `me { expert { releasesLeft } }` shows.
SELECT $2 - a.used AS releases_left, a.resets_at
FROM ({{ release_allowance($1, $2) }}) a;

-- name: project_flagged_items
-- $1 project_id, $2 max rows. Items that left the pool as flagged, newest first, with the
-- experts' release reasons counted.
SELECT i.id AS item_id, i.external_id, i.flagged_at,
       (SELECT jsonb_object_agg(r.reason, r.n)
        FROM (SELECT reason, count(*) AS n FROM item_releases
              WHERE item_id = i.id GROUP BY reason) r) AS reasons
FROM items i
WHERE i.project_id = $1 AND i.flagged_at IS NOT NULL
ORDER BY i.flagged_at DESC, i.id
LIMIT $2;
