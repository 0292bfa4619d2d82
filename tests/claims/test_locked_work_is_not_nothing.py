"""Work locked for a moment by another transaction is not "nothing for you". A claim skips
locked rows; a submit's completion probe share-locks one open slot of its project until it
commits, so near a project's end a claim could find nothing while a slot was left. The claim
then says `busy`, and the service asks again for about 0.8 s before answering null / 204."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest

from taskroute.db.queries import Q
from taskroute.resolvers import claims

from ..helpers import ADMIN_TOKEN, Api, InProcessServer, wait_for


async def _one_task(api: Api) -> tuple[dict[str, Any], dict[str, Any]]:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], [{"skill": "grading", "payload": "last one"}])
    return customer, expert


@asynccontextmanager
async def _open_task_share_locked(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """The project's one open task share-locked, as a submit's completion probe holds it,
    until the block ends (or the yielded connection commits)."""
    conn = await asyncpg.connect(database_url)
    try:
        async with conn.transaction():
            locked = await conn.fetchval("SELECT id FROM tasks WHERE status = 'open' FOR SHARE")
            assert locked is not None
            yield conn
    finally:
        await conn.close()


async def _retried(api: Api) -> float:
    r = await api.http.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    found = re.findall(r"^taskroute_claims_retried_total (\S+)$", r.text, re.M)
    return float(found[0]) if found else 0.0


async def test_the_claim_says_busy_not_none_while_the_work_is_locked(
    server: InProcessServer, database_url: str
) -> None:
    async with Api(server.url) as api:
        _, expert = await _one_task(api)
    conn = await asyncpg.connect(database_url)
    try:
        async with _open_task_share_locked(database_url):
            busy = await conn.fetchrow(Q["claim_call"], expert["id"], None, None, 0.99)
        claimed = await conn.fetchrow(Q["claim_call"], expert["id"], None, None, 0.99)
    finally:
        await conn.close()
    assert busy["outcome"] == "busy" and busy["assignment_id"] is None, dict(busy)
    assert claimed["outcome"] == "claimed", dict(claimed)


async def test_a_claim_waits_out_a_moments_lock_and_gets_the_task(
    server: InProcessServer, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pauses of a second (the server runs in this process): the lock is let go after the
    # first retry is seen, however slow the machine, and well before the retries run out.
    monkeypatch.setattr(claims, "BUSY_PAUSES", (1.0,) * 30)
    async with Api(server.url) as api:
        _, expert = await _one_task(api)
        before = await _retried(api)
        async with _open_task_share_locked(database_url):
            claim = asyncio.create_task(api.claim(expert["token"]))
            await wait_for(lambda: _retried_past(api, before), "the claim asked again")
        got = await asyncio.wait_for(claim, 60)
        assert got is not None and got["task"]["payload"] == "last one", got


async def _retried_past(api: Api, before: float) -> bool:
    return await _retried(api) > before


async def test_a_lock_that_outlasts_the_retries_is_nothing_for_now(
    server: InProcessServer, database_url: str
) -> None:
    async with Api(server.url) as api:
        _, expert = await _one_task(api)
        async with _open_task_share_locked(database_url):
            r = await api.rest("POST", "/v1/tasks/next", expert["token"])
        assert r.status_code == 204 and "Retry-After" in r.headers, r.text
        # the lock gone, the task is there
        assert await api.claim(expert["token"]) is not None
