-- A project's customer items (not gold), counted by an index-only scan for item-level progress
-- (queries/customer_views.sql: project_item_progress); resolved items come from the existing
-- partial index item_results_resolved.
CREATE INDEX items_project_customer ON items (project_id) WHERE gold_answer IS NULL;
