"""The wake-ticket take (queries/realtime.sql wake_take) locks its tickets in one order.

Processes take units of the announcements they heard in batches of their own making: one
round may hold [t1], the next [t2, t3, t1] (a ticket taken again after a denial goes to the
back). Locking rows in batch order, two takers holding t1 and t2 each wait for the other;
Postgres breaks the deadlock after deadlock_timeout by failing one take, whose process then
wakes its subscribers uncoordinated (more wake-ups than tasks: test_several_processes' burst
test saw 16 for 12, CI e830236). Locked in key order, whatever the batch order, the second
taker waits for the first instead.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from taskroute.db.queries import Q

from ..helpers import wait_for

SKILL = "grading"


async def _take(conn: asyncpg.Connection, keys: list[str], project: uuid.UUID) -> list[str]:
    """One take of one unit of each ticket in `keys` (announced 1), for one subscriber."""
    expert = uuid.uuid4()
    n = len(keys)
    rows = await conn.fetch(
        Q["wake_take"], keys, [1] * n, [1] * n, keys, [1] * n, list(range(1, n + 1)),
        [expert] * n, [SKILL] * n, [project] * n, [0.0] * n, [1] * n, 600.0,
    )  # fmt: skip
    return sorted(r["ticket"] for r in rows)


async def _waiting_on_a_lock(admin: asyncpg.Connection, pid: int) -> bool:
    state = await admin.fetchval("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid)
    return bool(state == "Lock")


async def test_a_take_locks_its_tickets_in_key_order_whatever_the_batch_order(
    database_url: str, db: asyncpg.Connection
) -> None:
    project = uuid.uuid4()
    first, second = "a:" + str(project), "b:" + str(project)
    holder = await asyncpg.connect(database_url)
    taker = await asyncpg.connect(database_url)
    prober = await asyncpg.connect(database_url)
    try:
        # The holder takes `first` and keeps its transaction open: its ticket row is locked.
        tx = holder.transaction()
        await tx.start()
        assert await _take(holder, [first], project) == [first]
        # The taker's batch names `second` before `first`.
        taker_pid = await taker.fetchval("SELECT pg_backend_pid()")
        take = asyncio.ensure_future(_take(taker, [second, first], project))
        await wait_for(lambda: _waiting_on_a_lock(db, taker_pid), "the taker to wait for a lock")
        # Waiting for `first`, the taker must hold nothing after it: a third taker of
        # `second` alone goes through at once (it would wait for the taker otherwise, which
        # waits for the holder: the cycle a deadlock needs once the holder asks for `second`).
        await prober.execute("SET lock_timeout = '5s'")
        assert await _take(prober, [second], project) == [second]
        await tx.commit()
        # The holder's and the prober's units were the only ones announced: none is left.
        assert await asyncio.wait_for(take, 30) == []
        taken = await db.fetch("SELECT key, taken FROM wake_tickets ORDER BY key")
        assert [(r["key"], r["taken"]) for r in taken] == [(first, 1), (second, 1)]
    finally:
        for conn in (holder, taker, prober):
            await conn.close()
