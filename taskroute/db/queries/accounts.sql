-- Customers, experts, their skills and credentials.

-- name: customer_insert
-- $1 name
INSERT INTO customers (name) VALUES ($1) RETURNING id;

-- name: expert_insert
-- $1 name, $2 capabilities
INSERT INTO experts (name, capabilities) VALUES ($1, $2) RETURNING id;

-- name: expert_skills_insert
-- $1 expert_id, $2 skills, $3 qualities (parallel arrays)
INSERT INTO expert_skills (expert_id, skill, quality)
SELECT $1, s.skill, s.quality FROM unnest($2::text[], $3::real[]) AS s(skill, quality);

-- name: credential_insert
-- $1 sha256(token), $2 role, $3 customer_id, $4 expert_id
INSERT INTO credentials (token_hash, role, customer_id, expert_id) VALUES ($1, $2, $3, $4);

-- name: credential_lookup
-- $1 sha256(token). Revoked credentials do not authenticate.
SELECT role, customer_id, expert_id FROM credentials
WHERE token_hash = $1 AND revoked_at IS NULL;
