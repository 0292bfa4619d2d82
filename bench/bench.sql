-- Seeding for bench/claim.py (bench only; the service never runs these).

-- name: bench_customer
-- No parameters.
INSERT INTO customers (name) VALUES ('bench') RETURNING id;

-- name: bench_project
-- $1 customer_id. Long leases: the benchmark measures claims and submits, not expiries.
INSERT INTO projects (customer_id, name, lease_seconds, pay_cents)
VALUES ($1, 'bench', 3600, 10) RETURNING id;

-- name: bench_tasks
-- $1 project_id, $2 one skill per task (text[]). One item and one open task each.
WITH it AS (
    INSERT INTO items (project_id, skill, payload, payload_bytes)
    SELECT $1, u.skill, jsonb_build_object('text', 'bench item ' || u.ord), 24
    FROM unnest($2::text[]) WITH ORDINALITY AS u(skill, ord)
    RETURNING id, skill
)
INSERT INTO tasks (item_id, project_id, skill, status)
SELECT id, $1, skill, 'open' FROM it;

-- name: bench_experts
-- $1 names text[]. Returns the new ids in order.
INSERT INTO experts (name) SELECT n FROM unnest($1::text[]) WITH ORDINALITY AS u(n, ord)
ORDER BY ord RETURNING id;

-- name: bench_expert_skills
-- $1 expert ids, $2 skills (parallel arrays, one row per pair).
INSERT INTO expert_skills (expert_id, skill, quality)
SELECT e, s, 1.0 FROM unnest($1::uuid[], $2::text[]) AS u(e, s);

-- name: bench_credentials
-- $1 expert ids, $2 token hashes (parallel arrays).
INSERT INTO credentials (token_hash, role, expert_id)
SELECT h, 'expert', e FROM unnest($1::uuid[], $2::bytea[]) AS u(e, h);

-- name: bench_reopen
-- No parameters. Puts every task back in the pool between phases, so each phase starts with
-- the same number of open tasks (answered assignments stay: the table grows as in real life).
UPDATE tasks SET status = 'open', assignment_id = NULL, lease_until = NULL
WHERE status <> 'open';

-- name: bench_release_active
-- No parameters. Ends live claims left by a phase's last in-flight cycles.
UPDATE assignments SET status = 'released' WHERE status = 'active';

-- name: bench_open_count
-- No parameters.
SELECT count(*) FROM tasks WHERE status = 'open';
