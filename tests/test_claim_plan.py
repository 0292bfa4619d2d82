"""The claim query probes the partial index, whatever the backlog."""

from __future__ import annotations

import json

import asyncpg

from taskroute.db.queries import Q

from .helpers import Api, tasks_of


async def seed_open_tasks(db: asyncpg.Connection, n: int, skills: int) -> None:
    """Bulk rows straight in SQL: the API path is tested elsewhere, this is about the plan."""
    project_id = await db.fetchval("SELECT id FROM projects LIMIT 1")
    await db.execute(
        """
        WITH i AS (
            INSERT INTO items (project_id, skill, payload)
            SELECT $1, 'skill' || (g % $3), '{}'::jsonb FROM generate_series(1, $2) g
            RETURNING id, skill
        )
        INSERT INTO tasks (item_id, project_id, skill, status)
        SELECT id, $1, skill, 'open' FROM i
        """,
        project_id,
        n,
        skills,
    )
    await db.execute("ANALYZE")


async def test_claim_uses_the_partial_index_with_100k_open_tasks(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    await api.create_project(customer["token"], tasks_of("skill7", 1))
    await seed_open_tasks(db, 100_000, 50)
    expert = await api.create_expert(["skill7", "skill8"])

    plan = await db.fetchval(f"EXPLAIN (FORMAT JSON) {Q['task_claim']}", expert["id"], None, None)
    text = json.dumps(plan)
    assert "tasks_open_claim" in text
    assert "Seq Scan on tasks" not in text
    # and the claim works at this size
    claim = await api.claim(expert["token"])
    assert claim is not None and claim["task"]["skill"] in ("skill7", "skill8")


async def test_heartbeat_probes_indexes_with_100k_open_and_100k_done_tasks(
    api: Api, db: asyncpg.Connection
) -> None:
    """hasHighPriorityTasks used to scan every task, done ones included (1.5 ms a heartbeat at
    30k tasks, growing with history); it is one index probe per skill of the expert."""
    customer = await api.create_customer()
    await api.create_project(customer["token"], tasks_of("skill7", 1))
    await seed_open_tasks(db, 100_000, 50)
    await seed_open_tasks(db, 100_000, 50)
    await db.execute(
        "UPDATE tasks SET status = 'done' WHERE id IN"
        " (SELECT id FROM tasks WHERE status = 'open' ORDER BY seq DESC LIMIT 100000)"
    )
    await db.execute("ANALYZE tasks")
    expert = await api.create_expert(["skill7", "skill8", "skill9"])
    claim = await api.claim(expert["token"])
    assert claim is not None
    args = (claim["assignmentId"], expert["id"])
    tx = db.transaction()
    await tx.start()
    try:
        raw = await db.fetchval(
            f"EXPLAIN (ANALYZE, FORMAT JSON) {Q['assignment_heartbeat']}", *args
        )
    finally:
        await tx.rollback()
    plan = json.loads(raw) if isinstance(raw, str) else raw
    text = json.dumps(plan)
    assert "Seq Scan on tasks" not in text and "Bitmap Heap Scan on tasks" not in text
    assert "tasks_open_claim" in text
    # a handful of buffers, not the table: the flag is found (or not) at the top of the index
    assert plan[0]["Plan"].get("Shared Hit Blocks", 0) < 500 or "Buffers" not in text
    beat = await api.gql(
        "mutation($a: ID!) { heartbeat(assignmentId: $a) { hasHighPriorityTasks } }",
        {"a": claim["assignmentId"]},
        expert["token"],
    )
    assert beat["heartbeat"]["hasHighPriorityTasks"] is False  # all have the same priority
