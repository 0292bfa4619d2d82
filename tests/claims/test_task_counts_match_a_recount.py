"""The maintained task counts equal a recount of the tasks after a concurrent mix of
claims, submits, expiries, a cancel, a retraction, the sweeper and the compactor, per (skill,
status, gold). Gold servings themselves are counted in the quality tests' gold
test, through projectProgress, which leaves them out.

Experts race through three projects over the API while side tasks expire leases, sweep, fold
the deltas and cancel a project; the counts are checked against `tasks` once the dust settles,
both as the forecast reads them (folded + deltas) and folded alone after a last compaction.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import asyncpg

from taskroute.db.queries import Q

from ..helpers import ADMIN_TOKEN, Api, GraphQLError, tasks_of

EXPERTS = 8
ROUNDS = 12


Key = tuple[str, str, bool]  # (skill, status, gold)


async def _recount(db: asyncpg.Connection, project: str) -> dict[Key, int]:
    rows = await db.fetch(
        "SELECT skill, status, kind = 'gold' AS gold, count(*)::int AS n FROM tasks"
        " WHERE project_id = $1 GROUP BY 1, 2, 3",
        project,
    )
    return {(r["skill"], r["status"], r["gold"]): r["n"] for r in rows}


async def _counted(db: asyncpg.Connection, project: str) -> dict[Key, int]:
    rows = await db.fetch(Q["task_counts_project"], project)
    return {(r["skill"], r["status"], r["gold"]): r["n"] for r in rows}


async def _folded(db: asyncpg.Connection, project: str) -> dict[Key, int]:
    rows = await db.fetch(
        "SELECT skill, status, gold, n::int FROM task_counts WHERE project_id = $1 AND n <> 0",
        project,
    )
    return {(r["skill"], r["status"], r["gold"]): r["n"] for r in rows}


async def _worker(api: Api, db: asyncpg.Pool, token: str, seed: int) -> None:
    """Claims and answers; every third claim is abandoned (its lease expires)."""
    rng = random.Random(seed)
    for _ in range(ROUNDS):
        try:
            got = await api.claim(token)
            if got is None:
                return
            if rng.random() < 1 / 3:
                # Gone silent: the lease ends now and the sweeper returns it (ours or the
                # server's job). The next claim waits for that: a claim racing the sweeper
                # over its own expired lease is a separate, known race (see the report).
                aid = got["assignmentId"]
                await db.execute(
                    "WITH a AS (UPDATE assignments SET lease_until = now() - interval '1 second'"
                    " WHERE id = $1 RETURNING task_id)"
                    " UPDATE tasks SET lease_until = now() - interval '1 second'"
                    " FROM a WHERE tasks.id = a.task_id AND tasks.assignment_id = $1",
                    aid,
                )
                while await db.fetchval(
                    "SELECT status = 'active' FROM assignments WHERE id = $1", aid
                ):
                    await db.fetch(Q["leases_release_expired"], 1000, None)
                    await asyncio.sleep(0.01)
            else:
                await api.submit(token, got["assignmentId"], {"label": rng.randint(0, 1)})
        except GraphQLError as exc:
            # the project was canceled under the claim, or the lease ended: part of the mix
            assert exc.code in ("NOT_FOUND", "LEASE_EXPIRED", "CONFLICT", "GONE"), exc


async def _churn(database_url: str, stop: asyncio.Event) -> int:
    """Folds deltas, as the background job does, as often as it can until stopped."""
    conn = await asyncpg.connect(database_url)
    runs = 0
    try:
        while not stop.is_set():
            await conn.fetchval(Q["task_counts_compact"])
            runs += 1
            await asyncio.sleep(0)
    finally:
        await conn.close()
    return runs


async def test_counts_equal_a_recount_after_a_concurrent_mix(
    api: Api, db: asyncpg.Connection, database_url: str
) -> None:
    customer = (await api.create_customer())["token"]
    keep = (await api.create_project(customer, tasks_of("grading", 40)))["project"]["id"]
    cancel = (await api.create_project(customer, tasks_of("grading", 30)))["project"]["id"]
    other = (await api.create_project(customer, tasks_of("ranking", 20)))["project"]["id"]
    experts = [
        await api.create_expert(["grading", "ranking"], name=f"e{i}") for i in range(EXPERTS)
    ]
    side = await asyncpg.create_pool(database_url, min_size=1, max_size=4)

    async def cancel_midway() -> None:
        while (
            await side.fetchval("SELECT count(*) FROM assignments WHERE project_id = $1", cancel)
            < 5
        ):
            await asyncio.sleep(0.01)
        await api.gql(
            "mutation($p: ID!) { cancelProject(id: $p) { status } }", {"p": cancel}, customer
        )

    async def retract_midway() -> dict[str, Any]:
        victim = experts[0]["id"]
        while (
            await side.fetchval(
                "SELECT count(*) FROM assignments WHERE expert_id = $1 AND status = 'submitted'",
                victim,
            )
            < 3
        ):
            await asyncio.sleep(0.01)
        data = await api.gql(
            'mutation($e: ID!) { retractLabels(expertId: $e, reason: "test") { answers } }',
            {"e": victim},
            ADMIN_TOKEN,
        )
        return data["retractLabels"]

    stop = asyncio.Event()
    churn = asyncio.create_task(_churn(database_url, stop))
    try:
        _, retracted, *_ = await asyncio.gather(
            cancel_midway(),
            retract_midway(),
            *(_worker(api, side, e["token"], i) for i, e in enumerate(experts)),
        )
    finally:
        stop.set()
        await side.close()
    assert await churn > 0
    assert retracted["answers"] >= 3

    statuses = set()
    for project in (keep, cancel, other):
        recount = await _recount(db, project)
        statuses |= {status for _, status, _ in recount}
        assert await _counted(db, project) == recount
    # The mix reached every state the counts must follow (claims all ended: their rows are 0).
    assert {"open", "done", "canceled"} <= statuses
    assert await db.fetchval("SELECT count(*) FROM task_counts WHERE status = 'claimed'") > 0
    assert (
        await db.fetchval(
            "SELECT count(*) FROM assignments WHERE status IN ('expired', 'released')"
        )
        > 0
    )

    await db.fetchval(Q["task_counts_compact"])
    assert await db.fetchval("SELECT count(*) FROM task_count_deltas") == 0
    for project in (keep, cancel, other):
        assert await _folded(db, project) == await _recount(db, project)
