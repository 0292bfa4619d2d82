-- Per-project instructions (Markdown), versioned: a new version per change, old ones kept.
-- The project points at its current version; an assignment records the version its expert
-- was given at claim (functions/instructions.sql), so every answer says which text it was
-- given under. Versions never change, so processes cache them by (project, version).
CREATE TABLE project_instructions (
    project_id          uuid NOT NULL REFERENCES projects (id),
    version             integer NOT NULL CHECK (version >= 1),
    markdown            text NOT NULL,
    -- images from other origins render only when the customer allowed them for this version
    allow_remote_images boolean NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL DEFAULT taskroute_now(),
    PRIMARY KEY (project_id, version)
);

ALTER TABLE projects ADD COLUMN instructions_version integer;
ALTER TABLE assignments ADD COLUMN instructions_version integer;

-- An expert's own submitted work, newest first (`me { expert { work } }`).
CREATE INDEX assignments_expert_submitted ON assignments (expert_id, submitted_at DESC, id DESC)
    WHERE status = 'submitted';
-- Their rejected work, for the rejected total and the REJECTED filter.
CREATE INDEX assignments_expert_rejected ON assignments (expert_id, submitted_at DESC, id DESC)
    WHERE review_status = 'rejected';
