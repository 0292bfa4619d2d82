-- Seeding and the bare (seed-shaped) cycle for bench/claim.py; the service never runs these.

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
INSERT INTO expert_skills (expert_id, skill, quality, starting_quality)
SELECT e, s, 1.0, 1.0 FROM unnest($1::uuid[], $2::text[]) AS u(e, s);

-- name: bench_credentials
-- $1 expert ids, $2 token hashes (parallel arrays).
INSERT INTO credentials (token_hash, role, expert_id)
SELECT h, 'expert', e FROM unnest($1::uuid[], $2::bytea[]) AS u(e, h);

-- name: bench_bare_schema
-- No parameters (two statements: run without arguments). The seed's data model, as pgbench
-- would have it: one table, no items/assignments/ledger, and one partial index for the claim.
CREATE TABLE bare_tasks (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    skill       text NOT NULL,
    priority    integer NOT NULL DEFAULT 0,
    status      text NOT NULL DEFAULT 'open',
    claimed_by  uuid,
    lease_until timestamptz,
    payload     jsonb,
    answer      jsonb
);
CREATE INDEX bare_tasks_open ON bare_tasks (skill, priority DESC, id) WHERE status = 'open';

-- name: bench_mission_schema
-- No parameters (several statements: run without arguments). What the mission writes per
-- cycle beyond the seed, in its leanest form, for the `mission1` cycle
-- (bench/mission_cycle_one_skill.pgbench): a claim record with one live claim per expert, the
-- audit line of who saw the payload, one ledger line per assignment, and the item's result.
-- Only the indexes those invariants need; no triggers, no counts, no quality.
CREATE TABLE bare_assignments (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id      bigint NOT NULL,
    expert_id    uuid NOT NULL,
    status       text NOT NULL DEFAULT 'active',
    lease_until  timestamptz NOT NULL,
    answer       jsonb,
    submitted_at timestamptz
);
CREATE UNIQUE INDEX bare_assignments_one_active ON bare_assignments (expert_id)
    WHERE status = 'active';
CREATE TABLE bare_audit (
    seq       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    expert_id uuid NOT NULL,
    task_id   bigint NOT NULL,
    at        timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE bare_payouts (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    assignment_id bigint NOT NULL UNIQUE,
    expert_id     uuid NOT NULL,
    amount_cents  integer NOT NULL
);
CREATE TABLE bare_results (
    task_id bigint PRIMARY KEY,
    answer  jsonb NOT NULL,
    at      timestamptz NOT NULL DEFAULT now()
);

-- name: bench_bare_fill
-- No parameters. The service world's open tasks, one row each (same skill, priority and payload,
-- in the same order), so both worlds have the same open work and the same skill distribution.
INSERT INTO bare_tasks (skill, priority, payload)
SELECT t.skill, t.priority, i.payload
FROM tasks t JOIN items i ON i.id = t.item_id
WHERE t.status = 'open'
ORDER BY t.seq;

-- name: bench_bare_claim
-- $1 expert id, $2 the expert's skills (text[]). The seed's claim: one autocommit statement.
UPDATE bare_tasks
SET status = 'claimed', claimed_by = $1, lease_until = now() + interval '30 min'
WHERE id = (
    SELECT id FROM bare_tasks
    WHERE status = 'open' AND skill = ANY ($2)
    ORDER BY priority DESC, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING id, payload;

-- name: bench_bare_submit
-- $1 task id, $2 answer (jsonb), $3 expert id. The seed's submit: one autocommit statement.
UPDATE bare_tasks SET status = 'done', answer = $2
WHERE id = $1 AND claimed_by = $3 AND status = 'claimed';

-- name: bench_bare_experts
-- No parameters. Who each pgbench client plays (bench/bare_cycle.pgbench).
CREATE TABLE IF NOT EXISTS bare_experts (n integer PRIMARY KEY, expert uuid, skills text[]);

-- name: bench_bare_experts_fill
-- $1 client numbers, $2 expert ids, $3 their skills, comma-joined (parallel arrays).
INSERT INTO bare_experts (n, expert, skills)
SELECT u.n, u.expert, string_to_array(u.skills, ',')
FROM unnest($1::int[], $2::uuid[], $3::text[]) AS u(n, expert, skills);

-- name: bench_bare_drained
-- $1 the one-skill cycle (claims from the first skill only). Clients with nothing left to
-- claim: once one runs dry it only spins through empty claims.
SELECT count(*) FROM bare_experts e
WHERE NOT EXISTS (
    SELECT 1 FROM bare_tasks t
    WHERE t.status = 'open' AND t.skill = ANY (CASE WHEN $1 THEN e.skills[1:1] ELSE e.skills END)
);

-- name: bench_bare_done
-- No parameters. Cycles completed on bare_tasks.
SELECT count(*) FROM bare_tasks WHERE status = 'done';

-- name: bench_cycle_procedure
-- No parameters. `bench_cycles(first, n, heartbeats)` for bench/cycle_instructions.py: n
-- claim+submit cycles through the service's own functions, with `heartbeats` heartbeats
-- between the claim and the submit, each call committed on its own (as the API runs them),
-- by experts in a fixed order (the k-th cycle: expert number (first + k) * 7919 mod the
-- experts, by id). CALLed at top level, so it may COMMIT.
CREATE PROCEDURE bench_cycles(p_first integer, p_n integer, p_heartbeats integer DEFAULT 0)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_experts uuid[] := (SELECT array_agg(id ORDER BY id) FROM experts);
    v_expert uuid;
    v_assignment uuid;
BEGIN
    FOR k IN p_first .. p_first + p_n - 1 LOOP
        v_expert := v_experts[1 + (k * 7919) % cardinality(v_experts)];
        SELECT assignment_id INTO v_assignment FROM taskroute_claim(v_expert, NULL, NULL, 0.5);
        COMMIT;
        FOR h IN 1 .. CASE WHEN v_assignment IS NULL THEN 0 ELSE p_heartbeats END LOOP
            PERFORM taskroute_heartbeat(v_assignment, v_expert);
            COMMIT;
        END LOOP;
        IF v_assignment IS NOT NULL THEN
            PERFORM taskroute_submit(v_assignment, v_expert, '{"grade": 4}');
            COMMIT;
        END IF;
    END LOOP;
END
$fn$;
