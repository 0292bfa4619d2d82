-- Exports: a project's results as of a change-feed position, read from result_changes alone
-- (each change keeps its item's whole exported state), in item-id pages.

-- name: export_head
-- $1 project_id, $2 horizon (result_feed_horizon). The project's newest change older than the
-- horizon, in feed order (xact, seq): what an export without as_of reflects. Every change
-- before it is committed, and every change to come sorts after it.
SELECT c.seq, c.xact::text::bigint AS xact
FROM result_changes c
WHERE c.project_id = $1 AND c.xact < $2::bigint::text::xid8
ORDER BY c.xact DESC, c.seq DESC
LIMIT 1;

-- name: export_position
-- $1 project_id, $2 seq. The feed position of one of this project's changes (no row: not one).
SELECT c.seq, c.xact::text::bigint AS xact
FROM result_changes c
WHERE c.seq = $2 AND c.project_id = $1;

-- name: export_page
-- $1 project_id, $2 as-of xact, $3 as-of seq, $4 after item_id (NULL: from the start),
-- $5 limit. Per item in id order, its newest change (highest version) at or before the
-- position (xact, seq); the item's payload as it is stored now (payloads never change; the
-- retention job may have deleted it). Gold items have no changes, so none appear.
SELECT c.item_id, i.external_id, i.payload, i.payload_key, i.payload_deleted_at, c.seq,
       c.version, c.change, c.answer, c.agreement, c.method, c.confidence, c.answers, c.at
FROM (
    SELECT DISTINCT ON (c.item_id) c.*
    FROM result_changes c
    WHERE c.project_id = $1 AND ($4::uuid IS NULL OR c.item_id > $4::uuid)
      AND (c.xact, c.seq) <= ($2::bigint::text::xid8, $3::bigint)
    ORDER BY c.item_id, c.version DESC
    LIMIT $5
) c
JOIN items i ON i.id = c.item_id
ORDER BY c.item_id;

-- name: item_payload_get
-- $1 item_id. Where an item's payload lives, and its project (for the ownership check).
SELECT i.id, i.project_id, i.payload, i.payload_key, i.payload_deleted_at
FROM items i WHERE i.id = $1;
