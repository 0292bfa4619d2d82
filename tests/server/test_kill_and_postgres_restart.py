"""Faults under load: the server killed with SIGKILL, Postgres restarted. Nothing lost or doubled.

Each simulated expert loops claim -> submit and retries whatever failed for transport reasons
(or UNAVAILABLE) with the same arguments, as a real client would. Afterwards the database must
show every task answered exactly once and paid exactly once, and every receipt a client was
given must be the stored one.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import asyncpg
import httpx
import pytest

from taskroute.db.migrate import migrate_url

from ..helpers import ADMIN_TOKEN, CLAIM, Api, DbRoute, tasks_of, wait_for
from ..procs import PrivatePostgres, ServeProcess

pytestmark = pytest.mark.timeout(180)

SUBMIT = "mutation($a: ID!, $x: JSON!) { submit(assignmentId: $a, answer: $x) { id assignmentId } }"
RETRYABLE = {"UNAVAILABLE"}


@dataclass
class Tally:
    receipts: dict[str, str] = field(default_factory=dict)  # assignment id -> receipt id
    transport_errors: int = 0
    unavailable: int = 0
    other_errors: list[Any] = field(default_factory=list)
    done: int = 0


class Poster(Protocol):
    """An httpx client, or anything that sends a POST somewhere like one (test_rolling_restart's
    load balancer)."""

    async def post(self, url: str, **kwargs: Any) -> httpx.Response: ...


async def call(http: Poster, tally: Tally, query: str, token: str, **variables: Any):
    """POST one operation until it gets an answer that is not a transient failure."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            r = await http.post(
                "/graphql",
                json={"query": query, "variables": variables},
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
            )
        except httpx.TransportError:
            tally.transport_errors += 1
            await asyncio.sleep(0.05)
            continue
        body = r.json()
        codes = {e.get("extensions", {}).get("code") for e in body.get("errors", [])}
        # 503 only as the retryable UNAVAILABLE (authentication runs before the document and
        # needs the database when the credential cache cannot be trusted, e.g. while the
        # listener reconnects); never an INTERNAL 500.
        assert r.status_code < 500 or (r.status_code == 503 and codes <= RETRYABLE), r.text
        if codes & RETRYABLE:
            tally.unavailable += 1
            await asyncio.sleep(0.1)
            continue
        if codes:
            tally.other_errors.append(body["errors"])
            raise AssertionError(body["errors"])
        return body["data"]
    raise AssertionError("no answer within 60 s")


async def expert_loop(http: Poster, token: str, tally: Tally, stop: asyncio.Event):
    while not stop.is_set():
        claim = (await call(http, tally, CLAIM, token))["claimNextTask"]
        if claim is None:
            await asyncio.sleep(0.05)
            continue
        aid = claim["assignmentId"]
        receipt = (await call(http, tally, SUBMIT, token, a=aid, x={"ok": aid}))["submit"]
        previous = tally.receipts.setdefault(aid, receipt["id"])
        assert previous == receipt["id"], "a retried submit got a different receipt"
        tally.done += 1


async def setup_world(url: str, experts: int, tasks: int) -> tuple[list[str], str]:
    async with Api(url) as api:
        customer = await api.create_customer()
        tokens = [(await api.create_expert(["s"], name=f"e{i}"))["token"] for i in range(experts)]
        created = await api.create_project(
            customer["token"], tasks_of("s", tasks), payCents=7, leaseSeconds=120
        )
    return tokens, created["project"]["id"]


async def run_until_all_done(
    url: str, tokens: list[str], tally: Tally, total: int, faults: Any
) -> None:
    limits = httpx.Limits(max_connections=50)
    async with httpx.AsyncClient(base_url=url, limits=limits) as http:
        await drive(http, tokens, tally, total, faults)


async def drive(http: Poster, tokens: list[str], tally: Tally, total: int, faults: Any) -> None:
    """Every expert loops claim -> submit through `http` while `faults()` runs, until `total`
    tasks are done; an expert's failure fails the test."""
    stop = asyncio.Event()
    loops = [asyncio.create_task(expert_loop(http, t, tally, stop)) for t in tokens]
    try:
        await faults()
        await wait_for(lambda: tally.done >= total or any(t.done() for t in loops), timeout=90)
    finally:
        stop.set()
        results = await asyncio.gather(*loops, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def check_exactly_once(conn: asyncpg.Connection, tally: Tally, total: int) -> None:
    statuses = dict(await conn.fetch("SELECT status, count(*) FROM tasks GROUP BY status"))
    assert statuses == {"done": total}
    per_task = await conn.fetch(
        "SELECT task_id, count(*) AS n FROM assignments WHERE status = 'submitted'"
        " GROUP BY task_id HAVING count(*) <> 1"
    )
    assert per_task == []
    assert await conn.fetchval("SELECT count(*) FROM assignments WHERE status = 'active'") == 0
    paid = await conn.fetchrow("SELECT count(*) AS n, sum(amount_cents) AS s FROM payouts")
    assert (paid["n"], paid["s"]) == (total, 7 * total)
    stored = {
        str(r["id"]): str(r["receipt_id"])
        for r in await conn.fetch(
            "SELECT id, receipt_id FROM assignments WHERE status = 'submitted'"
        )
    }
    # Every receipt a client holds is the stored one, and every stored answer reached its client.
    assert tally.receipts == stored


async def test_kill_9_under_load_loses_and_doubles_nothing(
    db_route: DbRoute, tmp_path: Path, db: asyncpg.Connection
) -> None:
    total = 150
    server = ServeProcess(
        db_route.url,
        tmp_path / "serve.log",
        TASKROUTE_ADMIN_TOKEN=ADMIN_TOKEN,
        TASKROUTE_SWEEP_INTERVAL="0.5",
        **db_route.env(),
    )
    await asyncio.to_thread(server.start)
    tally = Tally()
    kills = 0
    try:
        tokens, _ = await setup_world(server.url, 8, total)

        async def faults() -> None:
            nonlocal kills
            for threshold in (25, 70, 110):
                await wait_for(lambda t=threshold: tally.done >= t, timeout=60)
                refused = tally.transport_errors
                server.kill()  # mid-flight: 8 experts are claiming and submitting right now
                kills += 1
                # the experts run into the dead server before it comes back
                await wait_for(lambda r=refused: tally.transport_errors > r, timeout=60)
                await asyncio.to_thread(server.start)

        await run_until_all_done(server.url, tokens, tally, total, faults)
    finally:
        server.stop()
    assert kills == 3
    assert tally.transport_errors > 0, "the kills never interrupted a request"
    await check_exactly_once(db, tally, total)


@pytest.fixture
def private_pg() -> Any:
    pg = PrivatePostgres()
    pg.start()
    yield pg
    pg.destroy()


async def test_postgres_restart_under_load_recovers_without_operator(
    private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    total = 120
    await migrate_url(private_pg.dsn)
    server = ServeProcess(
        private_pg.dsn,
        tmp_path / "serve.log",
        TASKROUTE_ADMIN_TOKEN=ADMIN_TOKEN,
        TASKROUTE_SWEEP_INTERVAL="0.5",
        TASKROUTE_POOL_TIMEOUT="1",
    )
    await asyncio.to_thread(server.start)
    tally = Tally()
    ready_during_outage: list[int] = []
    try:
        tokens, _ = await setup_world(server.url, 6, total)

        async def faults() -> None:
            await wait_for(lambda: tally.done >= 30, timeout=60)
            await asyncio.to_thread(private_pg.stop, "fast")
            async with httpx.AsyncClient(base_url=server.url) as http:
                ready_during_outage.append((await http.get("/readyz", timeout=10)).status_code)
                # the experts keep trying against a dead database: it answers UNAVAILABLE
                unavailable = tally.unavailable
                await wait_for(lambda: tally.unavailable > unavailable, timeout=60)
                await asyncio.to_thread(private_pg.start)
                # The same server process, never restarted or told: it serves again.
                deadline = time.monotonic() + 20
                while (await http.get("/readyz", timeout=10)).status_code != 200:
                    assert time.monotonic() < deadline, "never ready again after the restart"
                    await asyncio.sleep(0.1)

        await run_until_all_done(server.url, tokens, tally, total, faults)
    finally:
        server.stop()
    assert ready_during_outage == [503]
    assert tally.unavailable > 0, "the outage was never observed as UNAVAILABLE"
    assert tally.other_errors == []
    conn = await asyncpg.connect(private_pg.dsn)
    try:
        await check_exactly_once(conn, tally, total)
    finally:
        await conn.close()
