"""The claim and the heartbeat probe indexes, whatever the backlog: 100k open tasks of other
skills, 500k of other skills ahead in priority, 100k done ones cost them nothing.

The backlogs are built directly in SQL (INSERT ... SELECT generate_series) because hundreds of
thousands of tasks through the API would take minutes; the statements are the real
`task_claim` and `assignment_heartbeat`, run under EXPLAIN in a transaction that is rolled back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from taskroute.db.queries import Q

from ..helpers import Api, tasks_of

OTHER_TASKS = 500_000
# The per-skill probes, plus the primary key the UPDATE of the one chosen row uses.
TASKS_INDEXES = {"tasks_open_claim", "tasks_claimed_lease", "tasks_open_project", "tasks_pkey"}


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


async def _world(db: asyncpg.Connection) -> tuple[Any, Any, Any]:
    customer = await db.fetchval("INSERT INTO customers (name) VALUES ('c') RETURNING id")
    project = await db.fetchval(
        "INSERT INTO projects (customer_id, name, priority) VALUES ($1, 'p', 100) RETURNING id",
        customer,
    )
    item = await db.fetchval(
        "INSERT INTO items (project_id, skill, payload) VALUES ($1, 'bulk', '{}') RETURNING id",
        project,
    )
    # 500k open tasks over 100 other skills (5k each), higher priority than the rare one.
    await db.execute(
        "INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, status)"
        " SELECT $1, $2, 'bulk-' || (g % 100), 0, 1000000, 'open'"
        " FROM generate_series(1, $3::int) g",
        item,
        project,
        OTHER_TASKS,
    )
    rare_item = await db.fetchval(
        "INSERT INTO items (project_id, skill, payload) VALUES ($1, 'rare', '{}') RETURNING id",
        project,
    )
    rare_task = await db.fetchval(
        "INSERT INTO tasks (item_id, project_id, skill, status) VALUES ($1, $2, 'rare', 'open')"
        " RETURNING id",
        rare_item,
        project,
    )
    expert = await db.fetchval("INSERT INTO experts (name) VALUES ('e') RETURNING id")
    # The expert holds the rare skill and one of the flooded ones.
    await db.execute(
        "INSERT INTO expert_skills (expert_id, skill, starting_quality)"
        " VALUES ($1, 'rare', 1), ($1, 'bulk-7', 1)",
        expert,
    )
    others = await db.fetch(
        "INSERT INTO experts (name) SELECT 'o' || g FROM generate_series(1, 20) g RETURNING id"
    )
    await db.execute(
        "INSERT INTO expert_skills (expert_id, skill, starting_quality)"
        " SELECT unnest($1::uuid[]), 'bulk-7', 1",
        [r["id"] for r in others],
    )
    await db.execute("ANALYZE")
    await db.execute(Q["routing_scarcity_refresh"], None, 3600.0, [], [], 0.5)
    return expert, rare_task, project


async def _explain(db: asyncpg.Connection, statement: str, *args: Any) -> dict[str, Any]:
    tr = db.transaction()
    await tr.start()
    try:
        raw = await db.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + Q[statement], *args)
    finally:
        await tr.rollback()
    return (json.loads(raw) if isinstance(raw, str) else raw)[0]


def _check_probes(explained: dict[str, Any]) -> None:
    plan = explained["Plan"]
    scans = [
        n
        for n in nodes(plan)
        if n.get("Relation Name") == "tasks" and n["Node Type"] != "ModifyTable"
    ]
    assert scans, "the plan must read tasks"
    kinds = {n["Node Type"] for n in scans}
    assert kinds <= {"Index Scan", "Index Only Scan"}, kinds
    used = {n["Index Name"] for n in scans if "Index Name" in n}
    assert "tasks_open_claim" in used and used <= TASKS_INDEXES, used
    # Each probe stops at its first row (LIMIT 1 per skill), whatever the backlog.
    assert max(n.get("Actual Rows", 0) for n in scans) <= 1
    # (Small tables such as experts or projects may be seq-scanned: they hold a few rows here.)
    assert not any(n["Node Type"] == "Bitmap Heap Scan" for n in scans)
    # Block reads bounded by the probes, not by the 500k rows (a scan would read thousands).
    blocks = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    assert blocks < 200, blocks


@pytest.mark.slow
async def test_claim_for_a_rare_skill_probes_indexes_with_500k_other_open_tasks(
    db: asyncpg.Connection,
) -> None:
    expert, rare_task, project = await _world(db)
    assert await db.fetchval("SELECT count(*) FROM tasks WHERE status = 'open'") == OTHER_TASKS + 1

    # The whole claim, and its open-work half (an unscoped claim with no lease to take over).
    for statement, scope in (("task_claim", (None,)), ("task_claim_open", ())):
        _check_probes(await _explain(db, statement, expert, None, *scope))  # scarcity first
        _check_probes(await _explain(db, statement, expert, ["rare"], *scope))  # named skill
    # The generic plan (what a prepared statement settles on) probes the same way.
    await db.execute("SET plan_cache_mode = force_generic_plan")
    _check_probes(await _explain(db, "task_claim", expert, None, None))
    _check_probes(await _explain(db, "task_claim_open", expert, None))
    # Asking whether a lease ran out probes the claimed index per skill, however many are open.
    paths = (await _explain(db, "claim_paths", expert, None, None))["Plan"]
    scans = [n for n in nodes(paths) if n.get("Relation Name") == "tasks"]
    assert {n.get("Index Name") for n in scans} == {"tasks_claimed_lease"}, scans
    assert paths["Shared Hit Blocks"] + paths["Shared Read Blocks"] < 50
    scoped = await _explain(db, "task_claim", expert, None, project)
    used = {n.get("Index Name") for n in nodes(scoped["Plan"]) if n.get("Relation Name") == "tasks"}
    assert "tasks_open_project" in used, used
    await db.execute("RESET plan_cache_mode")

    # And the claim itself takes the rare task, ahead of the higher-priority flood.
    async with db.transaction():
        row = await db.fetchrow(Q["task_claim"], expert, None, None)
    assert row is not None and row["task_id"] == rare_task
    status = await db.fetchval("SELECT status FROM tasks WHERE id = $1", rare_task)
    assert status == "claimed"


# --- a backlog of other skills, and of done tasks ----------------------------------------


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


async def test_the_claim_call_reads_the_claimed_item_by_key(
    api: Api, db: asyncpg.Connection
) -> None:
    """The call the API sends joins the claim's one row to its item, project and review by
    key: at the planner's default guess for a function (1000 rows) it hashed every item (a
    hash beats 1000 probes of 10k items)."""
    customer = await api.create_customer()
    await api.create_project(customer["token"], tasks_of("skill7", 1))
    await seed_open_tasks(db, 10_000, 50)
    expert = await api.create_expert(["skill7"])
    # The held-claim probes take a list of experts (one statement per batch of refusals):
    # planned for the list they get, and generically (a prepared statement's plan, whatever
    # the list's length), each expert is still a probe by key.
    for mode in ("auto", "force_generic_plan"):
        await db.execute(f"SET plan_cache_mode = {mode}")
        for statement, args in (
            ("claim_call", (expert["id"], None, None, 0.5)),
            ("claim_held", (expert["id"],)),
            ("claims_held", ([expert["id"]] * 3,)),
            ("experts_holding_claims", ([expert["id"]] * 3,)),
        ):
            plan = json.loads(await db.fetchval(f"EXPLAIN (FORMAT JSON) {Q[statement]}", *args))
            scanned = {
                n.get("Relation Name")
                for n in nodes(plan[0]["Plan"])
                if n["Node Type"] in ("Seq Scan", "Bitmap Heap Scan")
            }
            assert not scanned & {"items", "tasks"}, (mode, statement, scanned)


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
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {Q['assignment_heartbeat']}", *args
        )
    finally:
        await tx.rollback()
    plan = json.loads(raw) if isinstance(raw, str) else raw
    text = json.dumps(plan)
    assert "Seq Scan on tasks" not in text and "Bitmap Heap Scan on tasks" not in text
    assert "tasks_open_claim" in text
    # a handful of buffers, not the table: the flag is found (or not) at the top of the index
    # (the top node's counts include its children's; 200k tasks fill thousands of blocks)
    top = plan[0]["Plan"]
    blocks = top["Shared Hit Blocks"] + top["Shared Read Blocks"]
    assert blocks < 500, blocks
    beat = await api.gql(
        "mutation($a: ID!) { heartbeat(assignmentId: $a) { hasHighPriorityTasks } }",
        {"a": claim["assignmentId"]},
        expert["token"],
    )
    assert beat["heartbeat"]["hasHighPriorityTasks"] is False  # all have the same priority
