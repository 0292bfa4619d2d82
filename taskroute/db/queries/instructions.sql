-- Project instructions: versioned Markdown (resolvers/instructions.py). Versions are never
-- updated, only added; the project row names the current one.

-- name: project_instructions_version
-- $1 project_id. The current version (NULL: none yet).
SELECT instructions_version FROM projects WHERE id = $1;

-- name: instructions_set
-- $1 project_id, $2 markdown, $3 allow_remote_images. A new version, one more than the
-- current, under the project's row lock (two racing writers get consecutive versions).
WITH p AS (
    SELECT id, coalesce(instructions_version, 0) + 1 AS version
    FROM projects WHERE id = $1 FOR UPDATE
),
added AS (
    INSERT INTO project_instructions (project_id, version, markdown, allow_remote_images)
    SELECT id, version, $2, $3 FROM p
    RETURNING project_id, version, markdown, allow_remote_images, created_at
),
current AS (
    UPDATE projects SET instructions_version = a.version
    FROM added a WHERE projects.id = a.project_id
)
SELECT * FROM added;

-- name: instructions_get
-- $1 project_id, $2 version.
SELECT project_id, version, markdown, allow_remote_images, created_at
FROM project_instructions WHERE project_id = $1 AND version = $2;

-- name: instructions_history
-- $1 project_id, $2 max rows. Newest first, by primary key.
SELECT project_id, version, markdown, allow_remote_images, created_at
FROM project_instructions WHERE project_id = $1
ORDER BY version DESC
LIMIT $2;
