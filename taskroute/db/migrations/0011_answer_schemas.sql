-- Issue 13: what an answer is. A JSON Schema per project, optionally one per item (which
-- then replaces the project's for that item); NULL: any JSON is an answer. Checked in Python
-- (resolvers/answer_schema.py) when declared, against gold answers, and before a submit
-- writes anything. Never updated once stored, so processes may cache compiled validators.
ALTER TABLE projects ADD COLUMN answer_schema jsonb;
ALTER TABLE items ADD COLUMN answer_schema jsonb;
