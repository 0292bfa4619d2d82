"""Postgres work per request must not grow with history (issue 19): on a churned table (100k
done tasks with their submitted assignments next to 100k open ones), every statement submit
splices into `taskroute_submit`, and the background jobs' statements (sweeper, routing job,
forecasts: issue 16), plan index probes on `tasks` and `assignments`, never a scan of either table.

Built in SQL (INSERT ... SELECT generate_series): 200k tasks through the API would take minutes.
Plans only (EXPLAIN without ANALYZE: nothing runs); the statements are the real named blocks.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from taskroute.db.queries import Q

from ..helpers import Dropper, copy_database, dsn_for

OPEN = 100_000
DONE = 100_000
BIG = ("tasks", "assignments", "items")


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def scans_of_big_tables(plan: Any) -> list[str]:
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return [
        f"{n['Node Type']} on {n['Relation Name']}"
        for n in nodes(plan[0]["Plan"])
        if n.get("Relation Name") in BIG and n["Node Type"] in ("Seq Scan", "Bitmap Heap Scan")
    ]


@dataclass(frozen=True)
class World:
    """A database built once per module that each test copies (`database` is its name), and
    the ids the tests need."""

    database: str
    facts: dict[str, Any]


async def build_world(admin_dsn: str, template: str, *steps: Any) -> World:
    """Runs `steps` (each `async (conn, facts) -> facts`) on a new copy of `template`. The
    copy is a template itself, so it must have no connection left when a test copies it."""
    name = await copy_database(admin_dsn, template)
    conn = await asyncpg.connect(dsn_for(admin_dsn, name))
    facts: dict[str, Any] = {}
    try:
        for step in steps:
            facts = await step(conn, facts)
    finally:
        await conn.close()
    return World(name, facts)


@asynccontextmanager
async def copy_of(admin_dsn: str, world: World, dropper: Dropper) -> AsyncIterator[str]:
    """A test's own copy of `world` (CREATE DATABASE ... TEMPLATE: under a second, where
    building the world takes most of a minute); dropped in the background afterwards."""
    name = await copy_database(admin_dsn, world.database)
    try:
        yield dsn_for(admin_dsn, name)
    finally:
        dropper.drop(name)


@pytest_asyncio.fixture(scope="module")
async def churned_world(
    pg_admin_dsn: str, template_db: str, dropper: Dropper
) -> AsyncIterator[World]:
    world = await build_world(pg_admin_dsn, template_db, build_churned)
    yield world
    dropper.drop(world.database)


@pytest_asyncio.fixture
async def database_url(
    pg_admin_dsn: str, churned_world: World, dropper: Dropper
) -> AsyncIterator[str]:
    """This module's tests start from a copy of the churned world, not the empty template."""
    async with copy_of(pg_admin_dsn, churned_world, dropper) as url:
        yield url


@pytest.fixture
def churned(churned_world: World) -> dict[str, Any]:
    return churned_world.facts


async def build_churned(db: asyncpg.Connection, _facts: dict[str, Any]) -> dict[str, Any]:
    customer = await db.fetchval("INSERT INTO customers (name) VALUES ('c') RETURNING id")
    project = await db.fetchval(
        "INSERT INTO projects (customer_id, name, deadline)"
        " VALUES ($1, 'p', now() + interval '1 day') RETURNING id",
        customer,
    )
    experts = [
        r["id"]
        for r in await db.fetch(
            "INSERT INTO experts (name) SELECT 'e' || g FROM generate_series(1, 50) g RETURNING id"
        )
    ]
    await db.execute(
        "INSERT INTO expert_skills (expert_id, skill, quality, starting_quality)"
        " SELECT e, 'skill' || (k % 50), 1.0, 1.0 FROM unnest($1::uuid[]) WITH ORDINALITY u(e, k)",
        experts,
    )
    await db.execute(
        """
        WITH i AS (
            INSERT INTO items (project_id, skill, payload)
            SELECT $1, 'skill' || (g % 50), '{}'::jsonb FROM generate_series(1, $2::int) g
            RETURNING id, skill
        )
        INSERT INTO tasks (item_id, project_id, skill, status)
        SELECT id, $1, skill, 'open' FROM i
        """,
        project,
        OPEN + DONE,
    )
    # History: the older half was claimed and answered, over the past weeks, by the experts.
    await db.execute(
        """
        WITH d AS (
            SELECT id, item_id, skill, gen_random_uuid() AS aid,
                   row_number() OVER (ORDER BY seq) AS n
            FROM tasks ORDER BY seq LIMIT $1
        ), a AS (
            INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, status,
                                     claimed_at, lease_until, answer, submitted_at,
                                     receipt_id, pay_cents)
            SELECT d.aid, d.id, d.item_id, $2, ($3::uuid[])[1 + d.n % 50], 'submitted',
                   now() - make_interval(secs => d.n * 20), now() - make_interval(secs => d.n * 20),
                   '{"label": 1}', now() - make_interval(secs => d.n * 20 - 10),
                   gen_random_uuid(), 10
            FROM d
            RETURNING task_id, id
        )
        UPDATE tasks t SET status = 'done', assignment_id = a.id FROM a WHERE t.id = a.task_id
        """,
        DONE,
        project,
        experts,
    )
    await db.execute("VACUUM ANALYZE")
    # One live claim to submit and heartbeat: the newest open task of the first expert's skill.
    expert = experts[0]
    skill = await db.fetchval("SELECT skill FROM expert_skills WHERE expert_id = $1", expert)
    task = await db.fetchrow(
        "SELECT id, item_id FROM tasks WHERE status = 'open' AND skill = $1 LIMIT 1", skill
    )
    assignment = await db.fetchval(
        "INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, lease_until)"
        " VALUES (gen_random_uuid(), $1, $2, $3, $4, now() + interval '1 hour') RETURNING id",
        task["id"], task["item_id"], project, expert,
    )  # fmt: skip
    await db.execute(
        "UPDATE tasks SET status = 'claimed', assignment_id = $2,"
        " lease_until = now() + interval '1 hour' WHERE id = $1",
        task["id"], assignment,
    )  # fmt: skip
    return {
        "project": project,
        "expert": expert,
        "skill": skill,
        "task": task["id"],
        "assignment": assignment,
    }


async def plan(db: asyncpg.Connection, name: str, *args: Any) -> Any:
    return await db.fetchval(f"EXPLAIN (FORMAT JSON) {Q[name]}", *args)


async def test_submit_statements_probe_indexes_on_a_churned_table(
    db: asyncpg.Connection, churned: dict[str, Any]
) -> None:
    w = churned
    a, t, e = w["assignment"], w["task"], w["expert"]
    statements = {
        "assignment_get": (a,),
        "task_lock": (t,),
        "assignment_lock": (a,),
        "assignment_submit": (a, '{"label": 1}', 10, "on_submit", False),
        "task_done": (t, a),
        "payout_insert": (a, e, w["project"], 10),
        "expert_skill_task_done": (e, w["skill"]),
        "assignment_heartbeat": (a, e),
        "assignment_heartbeat_both": (a, e),
    }
    found = {
        name: scans_of_big_tables(await plan(db, name, *args)) for name, args in statements.items()
    }
    assert found == {name: [] for name in statements}


async def test_completion_probes_read_one_end_of_an_index(
    db: asyncpg.Connection, churned: dict[str, Any]
) -> None:
    """Every submit probes its project for one remaining slot (taskroute_project_settle): an
    index read from one end, never a scan or a sort of the project's open work."""
    for name in ("project_work_probe_open", "project_work_probe_claimed"):
        found = json.loads(await plan(db, name, churned["project"]))
        kinds = [n["Node Type"] for n in nodes(found[0]["Plan"])]
        assert scans_of_big_tables(found) == [], name
        assert "Sort" not in kinds and "Incremental Sort" not in kinds, (name, kinds)


async def test_background_jobs_probe_indexes_on_a_churned_table(
    db: asyncpg.Connection, churned: dict[str, Any]
) -> None:
    statements = {
        "leases_release_expired": (1000, None),
        "leases_expire_absent": (None,),
        "routing_fair_boost": (None, 60.0, ["high", "normal", "low"], [0.5, 0.25, 0.1]),
        "routing_scarcity_refresh": (None, 3600.0, ["s"], [60.0], 0.5),
    }
    found = {
        name: scans_of_big_tables(await plan(db, name, *args)) for name, args in statements.items()
    }
    assert found == {name: [] for name in statements}


async def test_forecast_statements_probe_indexes_on_a_churned_table(
    db: asyncpg.Connection, churned: dict[str, Any]
) -> None:
    """Issue 16: forecasts read the maintained counts and paces, never the task history."""
    statements = {
        "forecast_counts": (churned["project"], None),
        "forecast_counts_all": (None, None),
        "forecast_experts": (900.0, None, [churned["skill"]]),
        "forecast_experts_all": (900.0, None, None),
        "forecast_skill_history": ([churned["skill"]], 3600.0, None),
        "forecast_demand": ([churned["skill"]],),
        "forecast_in_flight": ([churned["project"]], [churned["skill"]], None),
        "task_counts_project": (churned["project"],),
    }
    found = {
        name: scans_of_big_tables(await plan(db, name.removesuffix("_all"), *args))
        for name, args in statements.items()
    }
    assert found == {name: [] for name in statements}


async def test_deadline_bump_probes_indexes_on_a_churned_table(
    db: asyncpg.Connection, churned: dict[str, Any]
) -> None:
    """As the routing job runs it (its planner settings in the same transaction): the counts
    come from the maintained task counts, the rates from the recent submissions, the queues
    from the open-task indexes, the backlog's rewrite through an index, never a table scan."""
    forecast = ([churned["project"]], [None], [True])
    async with db.transaction():
        await db.execute(Q["routing_bump_planning"])
        found = scans_of_big_tables(
            await plan(db, "routing_deadline_bump", None, 600.0, 0.5, *forecast)
        )
    assert found == []
