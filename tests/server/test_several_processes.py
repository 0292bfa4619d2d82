"""Several stateless server processes on one Postgres, straight or through PgBouncer."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from ..clock import DbClock
from ..helpers import Api, DbRoute, tasks_of
from ..procs import ServeProcess
from ..realtime.test_websocket_wake_ups_and_progress import (
    Collector,
    realtime_status,
    subscribe_tasks,
    wait_for_waiters,
)
from ..ws import WsClient


async def test_two_processes_never_claim_a_task_twice(
    db_route: DbRoute, db: asyncpg.Connection, tmp_path: Path
) -> None:
    servers = [
        ServeProcess(db_route.url, tmp_path / f"server{i}.log", **db_route.env()) for i in range(2)
    ]
    await asyncio.gather(*(s.astart() for s in servers))
    try:
        clients = [Api(s.url) for s in servers]
        customer = await clients[0].create_customer()
        experts = [await clients[i % 2].create_expert(["grading"], f"e{i}") for i in range(30)]
        await clients[1].create_project(customer["token"], tasks_of("grading", 200), payCents=1)
        submitted: list[str] = []

        async def work(token: str) -> None:
            while True:
                api = random.choice(clients)  # each step may land on either process
                claim = await api.claim(token)
                if claim is None:
                    return
                receipt = await random.choice(clients).submit(token, claim["assignmentId"], 1)
                submitted.append(receipt["assignmentId"])

        await asyncio.gather(*(work(e["token"]) for e in experts))
        for c in clients:
            await c.__aexit__()
    finally:
        for s in servers:
            s.stop()

    assert len(submitted) == len(set(submitted)) == 200
    assert await db.fetchval("SELECT count(*) FROM tasks WHERE status = 'done'") == 200
    assert await db.fetchval("SELECT count(*) FROM assignments") == 200
    assert await db.fetchval("SELECT count(DISTINCT task_id) FROM assignments") == 200
    assert await db.fetchval("SELECT count(*) FROM payouts") == 200


async def test_workers_flag_serves_from_several_processes(
    db_route: DbRoute, tmp_path: Path
) -> None:
    server = ServeProcess(db_route.url, tmp_path / "server.log", workers=2, **db_route.env())
    await server.astart()
    try:
        async with Api(server.url) as api:
            customer = await api.create_customer()
            await api.create_project(customer["token"], tasks_of("grading", 3))
            expert = await api.create_expert(["grading"])
            claim = await api.claim(expert["token"])
            assert claim is not None
        pid = server.proc.pid  # type: ignore[union-attr]
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        # uvicorn's supervisor runs one process per worker (plus none else of ours)
        assert len(children) >= 2
    finally:
        server.stop()


# --- one wake-up per opened task across processes (issue 16) ---------------------------------


async def _settled(apis: list[Api], heard: list[int]) -> list[dict[str, Any]]:
    """Until every process has heard `heard[i]` wake tickets and has none left to take."""
    async with asyncio.timeout(60):
        while True:
            bodies = [await realtime_status(a) for a in apis]
            if all(
                b["wake_tickets"]["heard"] >= h and b["wake_tickets"]["settled"]
                for b, h in zip(bodies, heard, strict=True)
            ):
                return bodies
            await asyncio.sleep(0.02)


async def test_a_burst_wakes_one_subscriber_per_task_across_processes(
    db_route: DbRoute, tmp_path: Path
) -> None:
    """Three processes, six idle subscribers on each; twelve tasks opened through all three
    at once (three NOTIFYs, each heard by every process). Every process could wake 4 of its
    own per NOTIFY (36 in all); the tickets hand out one unit per task, so exactly 12."""
    servers = [
        # a window longer than the test: no unit is announced again, the bound is the tickets';
        # and a take that waits out a loaded machine (a 2 s take timed out once in CI, 3
        # processes and PgBouncer on 2 cores): this is the tickets' count, not the fallback's
        ServeProcess(
            db_route.url,
            tmp_path / f"s{i}.log",
            TASKROUTE_WAKE_ACK_SECONDS="600",
            TASKROUTE_WAKE_TAKE_TIMEOUT="60",
            **db_route.env(),
        )
        for i in range(3)
    ]
    await asyncio.gather(*(s.astart() for s in servers))
    apis = [Api(s.url) for s in servers]
    subs: list[WsClient] = []
    try:
        customer = await apis[0].create_customer()
        for i, api in enumerate(apis):
            for j in range(6):
                expert = await api.create_expert(["grading"], f"e{i}-{j}")
                subs.append(await subscribe_tasks(api, expert["token"], ["grading"]))
        for api in apis:
            await wait_for_waiters(api, 6)
        before = await _settled(apis, [0, 0, 0])
        collector = Collector(subs)
        k = 12
        await asyncio.gather(
            *(
                api.create_project(customer["token"], tasks_of("grading", k // 3), name=f"p{i}")
                for i, api in enumerate(apis)
            )
        )
        await collector.until_total(k)  # none lost: all twelve arrive
        heard = [b["wake_tickets"]["heard"] + 3 for b in before]
        after = await _settled(apis, heard)
        wakeups = sum(a["wakeups"] - b["wakeups"] for a, b in zip(after, before, strict=True))
        taken = sum(a["wake_tickets"]["taken"] for a in after)
        # (the message names each process's local fallbacks: a take that failed wakes locally)
        tickets = " | ".join(
            " ".join(f"{k_}={v}" for k_, v in a["wake_tickets"].items()) for a in after
        )
        assert wakeups == taken == k, f"wakeups={wakeups} taken={taken}: {tickets}"
        assert collector.total == k
        await collector.close()
    finally:
        for sub in subs:
            await sub.close()
        for api in apis:
            await api.__aexit__()
        for s in servers:
            s.stop()


@pytest.mark.parametrize("gone", ["disconnects", "its process is killed"])
async def test_a_wake_up_whose_subscriber_is_gone_goes_to_another(
    db_route: DbRoute, tmp_path: Path, db: asyncpg.Connection, clock: DbClock, gone: str
) -> None:
    """Two idle subscribers on two processes, one task: one of them is woken (not both).
    It goes away without claiming; once its window passes the other one is woken, and its
    claim gets the task. The window passes when the test moves the database clock past it
    (a 1-second window passed under load before the first wake-up was counted)."""
    servers = [
        ServeProcess(
            db_route.url, tmp_path / f"s{i}.log", TASKROUTE_WAKE_ACK_SECONDS="10", **db_route.env()
        )
        for i in range(2)
    ]
    await asyncio.gather(*(s.astart() for s in servers))
    apis = [Api(s.url) for s in servers]
    subs: list[WsClient] = []
    try:
        customer = await apis[0].create_customer()
        experts = [await apis[i].create_expert(["grading"], f"e{i}") for i in range(2)]
        for i in range(2):
            subs.append(await subscribe_tasks(apis[i], experts[i]["token"], ["grading"]))
            await wait_for_waiters(apis[i], 1)
        before = await _settled(apis, [0, 0])
        collector = Collector(subs)
        created = await apis[0].create_project(customer["token"], tasks_of("grading", 1))
        project_id = created["project"]["id"]
        await collector.until_total(1)
        chosen = 0 if collector.events[0] else 1
        other = 1 - chosen
        after = await _settled(apis, [b["wake_tickets"]["heard"] + 1 for b in before])
        assert sum(a["wakeups"] - b["wakeups"] for a, b in zip(after, before, strict=True)) == 1
        assert not collector.events[other]

        if gone == "disconnects":
            collector.tasks[chosen].cancel()
            await subs[chosen].close()
        else:
            servers[chosen].kill()
        # Not seen within its window: announced again without the chosen expert.
        await clock.advance(11.0)
        await collector.until_total(2)
        event = collector.events[other][0]["data"]["taskAvailable"]
        assert event == {"skill": "grading", "projectId": project_id, "recheck": False}
        claim = await apis[other].claim(experts[other]["token"])
        assert claim is not None and claim["task"]["projectId"] == project_id
        second = await db.fetchrow(
            "SELECT attempt, expert_id::text FROM wake_deliveries ORDER BY id DESC LIMIT 1"
        )
        assert second is not None and second["attempt"] == 2
        assert second["expert_id"] == experts[other]["id"]
        await collector.close()
    finally:
        for sub in subs:
            await sub.close()
        for api in apis:
            await api.__aexit__()
        for s in servers:
            s.stop()
