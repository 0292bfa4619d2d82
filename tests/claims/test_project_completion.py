"""A project is 'completed' when all its work is resolved, and active again when work comes
back (issue 13): visible in GraphQL, REST, progress and its subscription, and kept in the
same transaction as the work that ends (or adds) it, also when the last submits race.

Invariant checked in the database after every step: status 'completed' exactly when the
project has task slots and none is pending, open or claimed; completed_at set exactly then.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import UUID

import asyncpg
import pytest_asyncio

from taskroute.db.pool import Database, create_pool
from taskroute.db.queries import Q
from taskroute.resolvers.jobs.sweeper import sweep_once

from ..clock import DbClock
from ..helpers import ADMIN_TOKEN, Api, InProcessServer, settings_for, tasks_of
from ..ws import WsClient

PROJECT = "query($p: ID!) { project(id: $p) { status completedAt progress { status done } } }"
ADD = (
    "mutation($p: ID!, $t: [TaskInput!]!) { addTasks(projectId: $p, tasks: $t) {"
    " accepted project { status completedAt } } }"
)
PROGRESS_SUB = (
    "subscription($p: ID!) { projectProgress(projectId: $p) { status completedAt total done } }"
)


async def check_invariant(db: asyncpg.Connection, project_id: str) -> str:
    row = await db.fetchrow(
        """SELECT p.status, p.completed_at,
                  EXISTS (SELECT 1 FROM tasks t WHERE t.project_id = p.id
                          AND t.kind <> 'gold') AS has_work,
                  EXISTS (SELECT 1 FROM tasks t WHERE t.project_id = p.id AND t.kind <> 'gold'
                          AND t.status IN ('pending', 'open', 'claimed')) AS work_left,
                  EXISTS (SELECT 1 FROM tasks t WHERE t.project_id = p.id
                          AND t.status IN ('done', 'failed', 'canceled')
                          AND t.finished_at IS NULL) AS unstamped
           FROM projects p WHERE p.id = $1""",
        UUID(project_id),
    )
    assert row is not None
    assert (row["status"] == "completed") == (row["has_work"] and not row["work_left"]), dict(row)
    assert (row["status"] == "completed") == (row["completed_at"] is not None), dict(row)
    assert not row["unstamped"], "every finished slot records when it finished"
    return str(row["status"])


async def work_all(api: Api, token: str, answer: object) -> int:
    n = 0
    while (claim := await api.claim(token)) is not None:
        await api.submit(token, claim["assignmentId"], answer)
        n += 1
    return n


async def test_completed_on_the_last_submit_and_active_again_when_tasks_are_added(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    pid = (await api.create_project(customer["token"], tasks_of("grading", 3)))["project"]["id"]

    async with WsClient(api.base_url, customer["token"]) as ws:
        await ws.subscribe(PROGRESS_SUB, {"p": pid})
        first = (await ws.next())["data"]["projectProgress"]
        assert first == {"status": "active", "completedAt": None, "total": 3, "done": 0}

        assert await work_all(api, expert["token"], {"grade": 2}) == 3
        assert await check_invariant(db, pid) == "completed"
        while (event := (await ws.next())["data"]["projectProgress"])["done"] < 3:
            pass
        # The subscription says so with the counts that made it so.
        assert event["status"] == "completed" and event["completedAt"]

    project = (await api.gql(PROJECT, {"p": pid}, customer["token"]))["project"]
    assert project["status"] == "completed" and project["completedAt"]
    assert project["progress"] == {"status": "completed", "done": 3}
    r = await api.rest("GET", f"/v1/projects/{pid}", customer["token"])
    body = r.json()
    assert (r.status_code, body["status"]) == (200, "completed")
    assert body["completed_at"] == project["completedAt"].replace("Z", "+00:00")
    assert "status" not in body["progress"]
    listed = await api.gql(
        'query { projects(status: "completed") { edges { node { id } } } }',
        token=customer["token"],
    )
    assert [e["node"]["id"] for e in listed["projects"]["edges"]] == [pid]
    summary = await api.gql(
        "query { me { customer { projectsSummary { active completed } } } }",
        token=customer["token"],
    )
    assert summary["me"]["customer"]["projectsSummary"] == {"active": 0, "completed": 1}

    # New work: active again, in the transaction that added it.
    added = await api.gql(ADD, {"p": pid, "t": tasks_of("grading", 1)}, customer["token"])
    assert added["addTasks"]["project"] == {"status": "active", "completedAt": None}
    assert await check_invariant(db, pid) == "active"
    assert await work_all(api, expert["token"], {"grade": 1}) == 1
    assert await check_invariant(db, pid) == "completed"

    # REST add (201) reopens it the same way.
    r = await api.rest(
        "POST", f"/v1/projects/{pid}/tasks", customer["token"], json={"tasks": tasks_of("x", 1)}
    )
    assert r.status_code == 201, r.text
    assert await check_invariant(db, pid) == "active"


async def test_racing_last_submits_complete_the_project(api: Api, db: asyncpg.Connection) -> None:
    """Under READ COMMITTED each of the last submits sees the others' slots still claimed;
    the settle lock makes exactly the right one complete the project, every round."""
    customer = await api.create_customer()
    experts = [await api.create_expert(["grading"], name=f"e{i}") for i in range(6)]
    pid = (await api.create_project(customer["token"], tasks_of("grading", 6)))["project"]["id"]
    for round_no in range(5):
        claims = [await api.claim(e["token"]) for e in experts]
        assert all(c is not None for c in claims)
        assert await check_invariant(db, pid) == "active"
        await asyncio.gather(
            *(
                api.submit(e["token"], c["assignmentId"], {"grade": round_no})
                for e, c in zip(experts, claims, strict=True)
                if c is not None
            )
        )
        assert await check_invariant(db, pid) == "completed", f"round {round_no}"
        await api.gql(ADD, {"p": pid, "t": tasks_of("grading", 6)}, customer["token"])
        assert await check_invariant(db, pid) == "active"


async def test_last_submits_that_overlap_in_the_database_complete_the_project(
    quiet: tuple[Api, Database], db: asyncpg.Connection, database_url: str
) -> None:
    """The race forced: every last submit runs its statement before any of them commits.
    Each transaction either finished its submit or waits for a lock (the settle lock, or a
    slot another one locked FOR SHARE); only then may they commit. The last submits here
    resolve nothing (each item's other slot failed: one answer of two), so no other lock
    orders them; without the settle lock none would see the others' slots done and the
    project would stay active."""
    api, sweeper_db = quiet
    customer = await api.create_customer()
    n = 3
    experts = [await api.create_expert(["grading"], name=f"e{i}") for i in range(2 * n)]
    pid = (
        await api.create_project(
            customer["token"], tasks_of("grading", n), redundancy=2, maxRetries=0
        )
    )["project"]["id"]
    claims = [await api.claim(e["token"]) for e in experts]
    assert all(c is not None for c in claims)
    # One slot of each item runs out of time and fails (out of retries).
    first_of_item: dict[UUID, int] = {}
    for k, c in enumerate(claims):
        assert c is not None
        item = await db.fetchval("SELECT item_id FROM tasks WHERE id = $1", UUID(c["task"]["id"]))
        first_of_item.setdefault(item, k)
    expiring = sorted(first_of_item.values())
    for k in expiring:
        aid = UUID(claims[k]["assignmentId"])  # type: ignore[index]
        await db.execute(
            "UPDATE tasks SET lease_until = now() - interval '1 s' WHERE assignment_id = $1", aid
        )
        await db.execute(
            "UPDATE assignments SET lease_until = now() - interval '1 s' WHERE id = $1", aid
        )
    assert await sweep_once(sweeper_db) == n
    last = [k for k in range(2 * n) if k not in expiring]
    assert await check_invariant(db, pid) == "active"

    conns = [await asyncpg.connect(database_url) for _ in last]
    pids = [c.get_server_pid() for c in conns]
    release = asyncio.Event()
    submitted: set[int] = set()

    async def submit(i: int) -> None:
        conn, claim, expert = conns[i], claims[last[i]], experts[last[i]]
        assert claim is not None
        async with conn.transaction():
            answer = json.dumps({"g": i})
            row = await conn.fetchrow(
                Q["submit_call"], UUID(claim["assignmentId"]), UUID(expert["id"]), answer
            )
            assert row is not None and row["outcome"] == "stored"
            submitted.add(pids[i])
            await release.wait()

    async def release_when_all_ran_or_wait() -> None:
        while True:
            waiting = await db.fetchval(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE pid = ANY ($1::int[]) AND wait_event_type = 'Lock'",
                [p for p in pids if p not in submitted],
            )
            if len(submitted) + waiting == len(pids):
                release.set()
                return
            await asyncio.sleep(0.01)  # polling a condition, not waiting for time to pass

    try:
        await asyncio.wait_for(
            asyncio.gather(release_when_all_ran_or_wait(), *(submit(i) for i in range(len(conns)))),
            60,
        )
    finally:
        for c in conns:
            await c.close()
    assert await check_invariant(db, pid) == "completed"


async def test_retraction_reopens_and_relabelling_completes_again(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    bad = await api.create_expert(["grading"], name="bad")
    good = await api.create_expert(["grading"], name="good")
    pid = (await api.create_project(customer["token"], tasks_of("grading", 2)))["project"]["id"]
    assert await work_all(api, bad["token"], {"grade": 0}) == 2
    assert await check_invariant(db, pid) == "completed"

    await api.gql(
        'mutation($e: ID!) { retractLabels(expertId: $e, reason: "careless") { answers } }',
        {"e": bad["id"]},
        ADMIN_TOKEN,
    )
    project = (await api.gql(PROJECT, {"p": pid}, customer["token"]))["project"]
    assert project["status"] == "active" and project["completedAt"] is None
    assert await check_invariant(db, pid) == "active"
    assert await work_all(api, good["token"], {"grade": 4}) == 2
    assert await check_invariant(db, pid) == "completed"


@pytest_asyncio.fixture
async def quiet(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[Api, Database]]:
    """A server whose own sweeper never runs, and a pool for the test's sweeps."""
    srv = InProcessServer(settings_for(database_url, tmp_path, sweep_interval=3600))
    await srv.start()
    pool = await create_pool(database_url, min_size=1, max_size=2)
    try:
        async with Api(srv.url) as client:
            yield client, Database(pool, timeout=10)
    finally:
        await pool.close()
        await srv.stop()


async def test_a_last_slot_that_fails_completes_the_project(
    quiet: tuple[Api, Database], db: asyncpg.Connection
) -> None:
    api, sweeper_db = quiet
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    pid = (await api.create_project(customer["token"], tasks_of("grading", 2), maxRetries=0))[
        "project"
    ]["id"]
    first = await api.claim(expert["token"])
    assert first is not None
    await api.submit(expert["token"], first["assignmentId"], {"grade": 1})
    last = await api.claim(expert["token"])
    assert last is not None
    assert await check_invariant(db, pid) == "active"
    # The lease ran out (the test moves it, no sleeping): out of retries, the slot fails.
    for table in ("tasks", "assignments"):
        column = "assignment_id" if table == "tasks" else "id"
        await db.execute(
            f"UPDATE {table} SET lease_until = now() - interval '1 second' WHERE {column} = $1",
            UUID(last["assignmentId"]),
        )
    assert await sweep_once(sweeper_db) == 1
    assert await check_invariant(db, pid) == "completed"
    progress = (await api.gql(PROJECT, {"p": pid}, customer["token"]))["project"]["progress"]
    assert progress == {"status": "completed", "done": 1}


async def test_a_project_completed_while_at_risk_is_recorded_as_recovered(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    deadline = await db.fetchval("SELECT taskroute_now() + interval '1 minute'")
    pid = (
        await api.create_project(
            customer["token"], tasks_of("grading", 2), deadline=deadline.isoformat()
        )
    )["project"]["id"]
    await clock.advance(120)  # past the deadline with work left: at risk
    await api.gql("mutation { evaluateDeadlines }", token=ADMIN_TOKEN)
    alerts = "query($p: ID!) { project(id: $p) { forecast { atRisk } alerts { kind message } } }"
    seen = (await api.gql(alerts, {"p": pid}, customer["token"]))["project"]
    assert seen["forecast"]["atRisk"] and seen["alerts"][0]["kind"] == "at_risk"

    assert await work_all(api, expert["token"], {"grade": 3}) == 2
    assert await check_invariant(db, pid) == "completed"
    # No longer active, yet judged once more: the risk ends with an alert that says why.
    await api.gql("mutation { evaluateDeadlines }", token=ADMIN_TOKEN)
    seen = (await api.gql(alerts, {"p": pid}, customer["token"]))["project"]
    assert not seen["forecast"]["atRisk"]
    assert seen["alerts"][0] == {"kind": "recovered", "message": "all work done"}
    # ... and only once.
    assert await api.gql("mutation { evaluateDeadlines }", token=ADMIN_TOKEN) == {
        "evaluateDeadlines": 0
    }


async def test_a_last_slot_failed_by_its_holders_next_claim_completes_the_project(
    quiet: tuple[Api, Database], db: asyncpg.Connection
) -> None:
    """The claim gives the expert's own expired leases back first (taskroute_claim); a slot
    out of retries fails there, and that may be the project's last work."""
    api, _ = quiet
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    pid = (await api.create_project(customer["token"], tasks_of("grading", 1), maxRetries=0))[
        "project"
    ]["id"]
    claim = await api.claim(expert["token"])
    assert claim is not None
    for table, column in (("tasks", "assignment_id"), ("assignments", "id")):
        await db.execute(
            f"UPDATE {table} SET lease_until = now() - interval '1 second' WHERE {column} = $1",
            UUID(claim["assignmentId"]),
        )
    assert await api.claim(expert["token"]) is None
    assert await check_invariant(db, pid) == "completed"
