-- Exports as of a change-feed position: each change row keeps the whole exported state of its
-- item at that change (method, confidence, every submitted answer with its expert and whether
-- it was retracted), so "the project as of change N" is the newest change per item at or
-- before N, read from this table alone, however the item changed later.
ALTER TABLE result_changes
    ADD COLUMN method     text,
    ADD COLUMN confidence real,
    -- [{"expert_id", "answer", "kind": "normal" | "adjudication", "retracted": bool}, ...]
    ADD COLUMN answers    jsonb;

-- The export walks a project's items in id order and takes each one's newest change.
CREATE INDEX result_changes_item ON result_changes (project_id, item_id, version DESC);

-- Changes recorded before this column existed: the newest change of an item whose result has
-- not moved since gets the current state (which is then its state); older ones stay NULL.
UPDATE result_changes c
SET method = r.method, confidence = r.confidence,
    answers = (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'expert_id', a.expert_id, 'answer', a.answer, 'kind', t.kind,
                   'retracted', a.retracted_at IS NOT NULL) ORDER BY a.submitted_at, a.id), '[]')
        FROM assignments a JOIN tasks t ON t.id = a.task_id
        WHERE a.item_id = c.item_id AND a.status = 'submitted'
          AND t.kind IN ('normal', 'adjudication'))
FROM item_results r
WHERE r.item_id = c.item_id AND r.version = c.version;
