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
