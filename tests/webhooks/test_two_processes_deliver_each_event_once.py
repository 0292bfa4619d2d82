"""Two server processes share the deliveries: each event reaches a healthy receiver exactly
once (a lease per delivery, claimed with SKIP LOCKED), and each delivery took one attempt."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg

from ..helpers import Api, tasks_of, wait_for
from ..procs import ServeProcess
from .receiver import Receiver
from .world import create_endpoint, work_through

EVENTS = 40


async def test_two_processes_deliver_each_event_exactly_once(
    database_url: str, db: asyncpg.Connection, tmp_path: Path
) -> None:
    receiver = Receiver()
    await receiver.up()
    env = {
        "TASKROUTE_WEBHOOK_ALLOW_PRIVATE": "1",
        "TASKROUTE_WEBHOOK_INTERVAL": "0.02",
        # small batches, so both processes keep claiming while events arrive
        "TASKROUTE_WEBHOOK_IN_FLIGHT": "3",
    }
    servers = [ServeProcess(database_url, tmp_path / f"server{i}.log", **env) for i in range(2)]
    await asyncio.gather(*(s.astart() for s in servers))
    clients = [Api(s.url) for s in servers]
    try:
        customer = await clients[0].create_customer()
        await create_endpoint(clients[0], customer["token"], receiver.url)
        await clients[0].create_project(customer["token"], tasks_of("grading", EVENTS))
        experts = [await clients[i % 2].create_expert(["grading"], f"e{i}") for i in range(4)]
        await asyncio.gather(
            *(
                work_through(clients[i % 2], e["token"], EVENTS // len(experts))
                for i, e in enumerate(experts)
            )
        )
        expected = {r["id"] for r in await db.fetch("SELECT id FROM webhook_events")}
        assert len(expected) == EVENTS + 1  # every result, and the project's completion
        await wait_for(lambda: set(receiver.ok_ids()) == expected, "every event delivered")
        ids = receiver.ok_ids()
        assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
        assert len(receiver.received) == len(ids)  # no other request either

        # A sender records its attempt after the receiver answered: wait for every delivery's
        # record, then count the attempts.
        async def recorded() -> bool:
            left = await db.fetchval(
                "SELECT count(*) FROM webhook_deliveries WHERE state <> 'delivered'"
            )
            return bool(left == 0)

        await wait_for(recorded, "every delivery recorded as delivered")
        attempts = await db.fetchval("SELECT count(*) FROM webhook_attempts")
        assert attempts == len(expected)
    finally:
        for c in clients:
            await c.__aexit__()
        for s in servers:
            s.stop()
        await receiver.down()
