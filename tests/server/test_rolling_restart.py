"""Restarts that lose nothing: a restart rolled through two processes under claim/submit load.

SIGTERM drains a process (drain.py): WebSockets are closed with 1001, in-flight requests
finish, background jobs stop at a safe point, then it exits. The clients behave like clients
behind a load balancer: each request goes to either process, and a connection error or a 503
is retried (on either). No request may fail in a way a retry does not fix, and the database
must show every task claimed, answered and paid exactly once.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from taskroute.client import Worker

from ..helpers import ADMIN_TOKEN, Api, DbRoute, InProcessServer
from ..procs import ServeProcess
from ..ws import TASK_AVAILABLE, Rejected, WsClient
from .test_kill_and_postgres_restart import Tally, check_exactly_once, drive, setup_world, wait_for

pytestmark = pytest.mark.timeout(240)


class Balancer:
    """Each request to a random one of the processes, like a load balancer without health
    checks (the worst case: it keeps sending to a process that is restarting)."""

    def __init__(self, urls: list[str]) -> None:
        limits = httpx.Limits(max_connections=50)
        self.clients = [httpx.AsyncClient(base_url=u, limits=limits) for u in urls]

    async def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return await random.choice(self.clients).post(path, **kwargs)

    async def aclose(self) -> None:
        for c in self.clients:
            await c.aclose()


async def idle_subscriber(url: str, token: str) -> WsClient:
    """An expert waiting on taskAvailable for a skill no task has: the socket stays quiet
    until the server closes it."""
    client = WsClient(url, token)
    await client.open()
    await client.subscribe(TASK_AVAILABLE, {"s": ["nothing-to-do"]})
    return client


async def close_code(client: WsClient) -> int | None:
    """The code of the close frame the server sends (whatever messages come before it)."""
    assert client.ws is not None
    while True:
        try:
            await asyncio.wait_for(client.ws.recv(), 30)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else None


async def test_rolling_restart_under_load_loses_and_doubles_nothing(
    db_route: DbRoute, tmp_path: Path, db: asyncpg.Connection
) -> None:
    total = 240
    servers = [
        ServeProcess(
            db_route.url,
            tmp_path / f"server{i}.log",
            TASKROUTE_ADMIN_TOKEN=ADMIN_TOKEN,
            TASKROUTE_SWEEP_INTERVAL="0.5",
            TASKROUTE_SHUTDOWN_GRACE="20",
            **db_route.env(),
        )
        for i in range(2)
    ]
    await asyncio.gather(*(s.astart() for s in servers))
    tally = Tally()
    exit_codes: list[int] = []
    ws_codes: list[int | None] = []
    balancer = Balancer([s.url for s in servers])
    try:
        tokens, _ = await setup_world(servers[0].url, 8, total)
        async with Api(servers[0].url) as api:
            waiting = await api.create_expert(["nothing-to-do"], name="waiting")

        async def roll() -> None:
            for i, server in enumerate(servers):
                await wait_for(lambda t=(i + 1) * total // 3: tally.done >= t, 90)
                sockets = [await idle_subscriber(server.url, waiting["token"]) for _ in range(3)]
                # SIGTERM while 8 experts are claiming and submitting through both processes
                exit_codes.append(await asyncio.to_thread(server.sigterm, 60))
                ws_codes.extend(await asyncio.gather(*(close_code(s) for s in sockets)))
                await server.astart()

        await drive(balancer, tokens, tally, total, roll)
    finally:
        await balancer.aclose()
        for s in servers:
            s.stop()

    assert exit_codes == [0, 0], "a process did not drain and exit cleanly"
    assert ws_codes == [1001] * 6, "WebSockets must be told to go elsewhere (1001)"
    for s in servers:
        log = s.log_path.read_text()
        # nothing was cut off: no request past the grace, no job cancelled mid-pass
        assert "timeout graceful shutdown exceeded" not in log
        assert "cancelled (its transaction rolls back)" not in log
    # Requests did hit the restarting processes (refused connections, retried elsewhere).
    assert tally.transport_errors + tally.unavailable > 0
    assert tally.other_errors == []
    await check_exactly_once(db, tally, total)


async def test_drain_closes_sockets_with_1001_and_turns_readiness_off(
    server: InProcessServer, api: Api
) -> None:
    expert = await api.create_expert(["nothing-to-do"])
    before = await idle_subscriber(api.base_url, expert["token"])
    assert (await api.rest("GET", "/readyz", None)).status_code == 200
    drain = server.server.lifespan.state["services"].drain
    await drain.begin()
    assert await close_code(before) == 1001
    ready = await api.rest("GET", "/readyz", None)
    assert ready.status_code == 503 and ready.json()["checks"]["accepting"] != "ok"
    # A socket opened while draining (the listening socket is still open until uvicorn's own
    # shutdown) is accepted and told at once to go elsewhere.
    late = WsClient(api.base_url, expert["token"])
    try:
        await late.open()  # the handshake succeeds, then the close comes
    except Rejected as refused:  # while waiting for connection_ack
        assert refused.code == 1001
    except ConnectionClosed as closed:  # already while sending connection_init
        assert closed.rcvd is not None and closed.rcvd.code == 1001
    else:
        pytest.fail("a WebSocket opened while draining was kept")
    # HTTP requests are still served meanwhile: uvicorn finishes them during its shutdown.
    assert await api.claim(expert["token"]) is None


async def test_an_idle_worker_claims_again_at_once_when_its_server_goes_away(
    server: InProcessServer, api: Api
) -> None:
    """taskroute.client waits on taskAvailable; a 1001 ends the wait at once (not after its
    re-check period), so the worker claims again through the load balancer."""
    expert = await api.create_expert(["nothing-to-do"])
    drain = server.server.lifespan.state["services"].drain
    async with Worker(api.base_url, expert["token"], recheck_every=600) as worker:
        waiting = asyncio.create_task(worker.wait_for_work(["nothing-to-do"]))
        while not drain.sockets:  # the worker's socket is open
            await asyncio.sleep(0.01)
        await drain.begin()
        await asyncio.wait_for(waiting, 30)
