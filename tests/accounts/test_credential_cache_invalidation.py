"""The credential cache (issue 11): no query per request, yet a revoked token (or a disabled
expert) is noticed by every server process within a second, and never trusted blindly while
the LISTEN connection that carries the invalidations is down or has just reconnected."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.realtime.backend import LISTENER_APPLICATION_NAME
from taskroute.resolvers.accounts.credential_cache import CredentialCache
from taskroute.resolvers.accounts.credentials import Viewer

from ..helpers import ADMIN_TOKEN, Api, tasks_of
from ..procs import ServeProcess
from ..ws import TASK_AVAILABLE, WsClient

# Revocations must reach every process within a second; this covers the polling itself.
MARGIN = 0.25

BALANCE = "{ expertBalance { expertId balanceCents } }"


async def accepted(api: Api, token: str) -> bool:
    """Does the server take `token`? (A read-only GraphQL query; any other error fails.)"""
    body = await api.gql_raw(BALANCE, token=token)
    if body.get("errors"):
        code = body["errors"][0].get("extensions", {}).get("code")
        assert code == "UNAUTHENTICATED", body
        return False
    return True


async def cache_stats(api: Api) -> dict[str, Any]:
    r = await api.rest("GET", "/v1/realtime/status", ADMIN_TOKEN)
    assert r.status_code == 200, r.text
    body = r.json()
    return {
        **body["credential_cache"],
        "listener": body["listener"],
        "reconnects": body["reconnects"],
    }


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout: float, what: str, interval: float = 0.01
) -> float:
    """Poll `check` until it holds; return the seconds it took, fail after `timeout`."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not await check():
        if loop.time() - start > timeout:
            raise AssertionError(f"not within {timeout:.2f}s: {what}")
        await asyncio.sleep(interval)
    return loop.time() - start


# --- 1. no query per request ------------------------------------------------------------------


async def test_repeated_requests_do_not_query_credentials(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    expert = await api.create_expert(["grading"])
    token = expert["token"]
    # Count every look-up of a token the (in-process) server runs, whatever the method (the
    # expiry job's periodic question about expired tokens is not a look-up per request).
    lookup = Q["credential_lookup"]
    lookups = 0

    def counting(name: str) -> None:
        original = getattr(Database, name)

        async def wrapper(self: Database, query: str, *args: Any) -> Any:
            nonlocal lookups
            if query == lookup:
                lookups += 1
            return await original(self, query, *args)

        monkeypatch.setattr(Database, name, wrapper)

    for name in ("fetchrow", "fetch", "fetchval"):
        counting(name)

    assert await accepted(api, token)
    assert lookups == 1  # the counter sees the lookup: the first request reads the row
    for _ in range(10):
        assert await accepted(api, token)
        r = await api.rest("GET", f"/v1/payouts.csv?expert_id={expert['id']}", token)
        assert r.status_code == 200, r.text
    async with WsClient(api.base_url, token) as ws:  # WebSocket connect authenticates too
        await ws.subscribe(TASK_AVAILABLE, {"s": None})
    assert lookups == 1
    stats = await cache_stats(api)
    assert stats["trusted"] and stats["hits"] >= 21 and stats["entries"] == 1

    # Unknown tokens are not cached: each costs its query, and stays refused.
    for _ in range(3):
        assert not await accepted(api, "tr_e_unknown")
    assert lookups == 4
    assert (await cache_stats(api))["entries"] == 1


# --- 2. revocation reaches every process ------------------------------------------------------


async def test_revocation_reaches_every_process_within_a_second(
    database_url: str, db: asyncpg.Connection, tmp_path: Path
) -> None:
    servers = [ServeProcess(database_url, tmp_path / f"server{i}.log") for i in range(2)]
    await asyncio.gather(*(s.astart() for s in servers))
    clients = [Api(s.url) for s in servers]
    try:
        expert = await clients[0].create_expert(["grading"])
        other = await clients[1].create_expert(["grading"], "other")
        for api in clients:
            for _ in range(3):
                assert await accepted(api, expert["token"])
                assert await accepted(api, other["token"])
            stats = await cache_stats(api)
            # both caches hold the token (without invalidation it would serve for 60 s)
            assert stats["trusted"] and stats["entries"] == 2 and stats["hits"] >= 4, stats

        await db.execute(
            "UPDATE credentials SET revoked_at = now() WHERE expert_id = $1",
            uuid.UUID(expert["id"]),
        )

        async def refused_by(api: Api) -> float:
            async def refused() -> bool:
                return not await accepted(api, expert["token"])

            return await eventually(refused, 1.0 + MARGIN, f"{api.base_url} refuses the token")

        await asyncio.gather(*(refused_by(api) for api in clients))
        for api in clients:
            r = await api.rest("POST", "/v1/tasks/next", expert["token"])
            assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHENTICATED"
            # only that credential was dropped: the other expert is still served from cache
            before = (await cache_stats(api))["hits"]
            assert await accepted(api, other["token"])
            assert (await cache_stats(api))["hits"] == before + 1
    finally:
        for api in clients:
            await api.__aexit__()
        for s in servers:
            s.stop()


# --- 3. disabled experts ----------------------------------------------------------------------


async def test_disabled_expert_looks_the_same_cached_or_not(
    api: Api, database_url: str, db: asyncpg.Connection, tmp_path: Path
) -> None:
    """A disabled (deactivated) expert's token stops authenticating (issue 18; it used to
    authenticate and claim nothing). The cached process (`api`) must answer exactly as a
    process without the cache, before and after the change; the status change drops the
    expert's cached credentials."""
    uncached = ServeProcess(
        database_url, tmp_path / "uncached.log", TASKROUTE_CREDENTIAL_CACHE_SIZE="0"
    )
    await uncached.astart()
    try:
        async with Api(uncached.url) as plain:
            assert (
                "credential_cache"
                not in (await plain.rest("GET", "/v1/realtime/status", ADMIN_TOKEN)).json()
            )
            customer = await api.create_customer()
            expert = await api.create_expert(["grading"])
            token = expert["token"]
            await api.create_project(customer["token"], tasks_of("grading", 3), payCents=5)
            claim = await api.claim(token)
            assert claim is not None
            for _ in range(3):
                assert await accepted(api, token)
            assert (await cache_stats(api))["entries"] == 2  # the customer's and the expert's

            async def answers(client: Api) -> list[Any]:
                balance = await client.gql_raw(BALANCE, token=token)
                claimed = await client.gql_raw(
                    "mutation { claimNextTask { assignmentId } }", token=token
                )
                rest_claim = await client.rest("POST", "/v1/tasks/next", token)
                heartbeat = await client.rest(
                    "POST", f"/v1/assignments/{claim['assignmentId']}/heartbeat", token
                )
                return [balance, claimed, rest_claim.status_code, heartbeat.status_code]

            async def set_status(status: str) -> None:
                before = (await cache_stats(api))["invalidations"]
                await db.execute(
                    "UPDATE experts SET status = $2 WHERE id = $1", uuid.UUID(expert["id"]), status
                )

                async def dropped() -> bool:
                    stats = await cache_stats(api)
                    return stats["invalidations"] > before and stats["entries"] == 1

                await eventually(dropped, 1.0 + MARGIN, f"the {status} expert's entry dropped")

            await set_status("disabled")
            for _ in range(2):  # the first answer reads the row again, the second is cached
                cached = await answers(api)
                assert cached == await answers(plain)
            balance, claimed, rest_status, heartbeat_status = cached
            assert balance["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
            assert claimed["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
            assert rest_status == 401 and heartbeat_status == 401
            assert (await cache_stats(api))["entries"] == 1  # refusals are never cached

            await set_status("active")
            cached = await answers(api)
            assert cached == await answers(plain)
            assert cached[1]["data"]["claimNextTask"]["assignmentId"] == claim["assignmentId"]
    finally:
        uncached.stop()


# --- 4. listener outage and reconnect ---------------------------------------------------------


async def test_listener_outage_bypasses_and_reconnect_clears(
    api: Api, db: asyncpg.Connection, pg_admin_dsn: str
) -> None:
    revoked = await api.create_expert(["grading"], "revoked")
    kept = await api.create_expert(["grading"], "kept")
    for _ in range(3):
        assert await accepted(api, revoked["token"])
        assert await accepted(api, kept["token"])
    stats = await cache_stats(api)
    assert stats["trusted"] and stats["entries"] == 2 and stats["reconnects"] == 0

    dbname = await db.fetchval("SELECT current_database()")
    # Keep the listener from coming back (superusers too) until the checks below are done;
    # the server's pool keeps the connections it already has. (Postgres refuses this from a
    # connection to the database itself.)
    admin = await asyncpg.connect(pg_admin_dsn)
    await admin.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS false')
    try:
        killed = await db.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = $1 AND datname = current_database()",
            LISTENER_APPLICATION_NAME,
        )
        assert killed == 1

        async def down() -> bool:
            stats = await cache_stats(api)
            return stats["listener"] == "down" and not stats["trusted"]

        await eventually(down, 10, "the listener is seen down")
        # Nobody LISTENs now: this revocation's NOTIFY is lost for good.
        await db.execute(
            "UPDATE credentials SET revoked_at = now() WHERE expert_id = $1",
            uuid.UUID(revoked["id"]),
        )
        # While down, every request reads the database: the revocation counts at once, and
        # valid tokens still work.
        before = (await cache_stats(api))["bypasses"]
        assert not await accepted(api, revoked["token"])
        assert await accepted(api, kept["token"])
        assert (await cache_stats(api))["bypasses"] == before + 2
    finally:
        await admin.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
        await admin.close()

    async def back() -> bool:
        stats = await cache_stats(api)
        return stats["listener"] == "ok" and stats["reconnects"] == 1 and stats["trusted"]

    await eventually(back, 30, "the listener reconnects and the cache is trusted again")
    stats = await cache_stats(api)
    assert stats["entries"] == 0 and stats["resyncs"] == 2  # at start, and after the reconnect
    # The entry cached before the outage is gone, so the missed revocation holds ...
    assert not await accepted(api, revoked["token"])
    # ... and the cache serves again.
    assert await accepted(api, kept["token"])
    before = (await cache_stats(api))["hits"]
    assert await accepted(api, kept["token"])
    assert (await cache_stats(api))["hits"] == before + 1


# --- the cache's rules, one by one -------------------------------------------------------------


class FakeListener:
    def __init__(self) -> None:
        self.listener_generation = 0
        self.listener_live = True


def expert_viewer() -> Viewer:
    return Viewer("expert", expert_id=uuid.uuid4())


def loader(viewer: Viewer | None, calls: list[int]) -> Callable[[], Awaitable[Viewer | None]]:
    async def load() -> Viewer | None:
        calls.append(1)
        return viewer

    return load


async def test_untrusted_until_attached_and_after_a_reconnect_until_resync() -> None:
    cache = CredentialCache()
    viewer, calls = expert_viewer(), []
    load = loader(viewer, calls)
    await cache.lookup(b"k", load)
    await cache.lookup(b"k", load)
    assert len(calls) == 2 and cache.bypasses == 2  # not attached: not trusted

    listener = FakeListener()
    cache.attach(listener)
    await cache.lookup(b"k", load)
    assert await cache.lookup(b"k", load) == viewer
    assert len(calls) == 3 and cache.hits == 1

    listener.listener_live = False  # down: bypass, and keep nothing
    await cache.lookup(b"j", load)
    listener.listener_live = True
    listener.listener_generation = 1  # reconnected, RESYNC not yet handled: still bypass
    await cache.lookup(b"k", load)
    assert len(calls) == 5 and cache.bypasses == 4
    cache.resync()
    assert cache.stats()["entries"] == 0
    await cache.lookup(b"k", load)
    await cache.lookup(b"k", load)
    assert len(calls) == 6


async def test_a_lookup_racing_an_invalidation_is_not_stored() -> None:
    cache = CredentialCache()
    cache.attach(FakeListener())
    viewer = expert_viewer()
    calls: list[int] = []

    async def load() -> Viewer | None:
        calls.append(1)
        # the row was read, then its revocation was announced before the lookup finished
        cache.invalidate(b"k".hex().ljust(64, "0"))
        return viewer

    assert await cache.lookup(b"k", load) == viewer
    assert cache.stats()["entries"] == 0


async def test_invalidations_max_age_and_size_bound() -> None:
    now = [0.0]
    cache = CredentialCache(max_entries=3, max_age=60, clock=lambda: now[0])
    cache.attach(FakeListener())
    viewers = {bytes([i]) * 32: expert_viewer() for i in range(4)}
    calls: list[int] = []
    for key, viewer in viewers.items():
        await cache.lookup(key, loader(viewer, calls))
    keys = list(viewers)
    assert cache.stats()["entries"] == 3  # LRU: the first went
    cache.invalidate(keys[1].hex())  # one token
    assert cache.stats()["entries"] == 2
    cache.invalidate(str(viewers[keys[2]].expert_id))  # one expert's tokens
    assert cache.stats()["entries"] == 1
    await cache.lookup(keys[3], loader(viewers[keys[3]], calls))
    assert len(calls) == 4  # still cached
    now[0] = 60.0  # too old: read again
    await cache.lookup(keys[3], loader(viewers[keys[3]], calls))
    assert len(calls) == 5
    cache.invalidate("not a payload we know")  # anything unreadable drops everything
    assert cache.stats()["entries"] == 0
    # misses are never cached
    for _ in range(2):
        assert await cache.lookup(b"x", loader(None, calls)) is None
    assert len(calls) == 7 and cache.stats()["entries"] == 0
