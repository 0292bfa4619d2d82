"""Several stateless server processes on one Postgres, straight or through PgBouncer."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import asyncpg

from .conftest import DbRoute
from .helpers import Api, tasks_of
from .procs import ServeProcess


async def test_two_processes_never_claim_a_task_twice(
    db_route: DbRoute, db: asyncpg.Connection, tmp_path: Path
) -> None:
    servers = [
        ServeProcess(db_route.url, tmp_path / f"server{i}.log", **db_route.env())
        for i in range(2)
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
