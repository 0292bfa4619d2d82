"""The connection pool exhausted: requests wait up to TASKROUTE_POOL_TIMEOUT, then fail cleanly.

Two claims of one expert whose row we lock from outside hold both pooled connections (they wait
on the lock inside their transactions); every other request then finds the pool empty.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest_asyncio

from ..helpers import Api, connections_held, serving, settings_for, tasks_of

POOL_TIMEOUT = 0.5


@pytest_asyncio.fixture
async def small_pool_api(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    settings = settings_for(
        database_url, tmp_path, pool_min=1, pool_max=2, pool_timeout=POOL_TIMEOUT,
        sweep_interval=60.0,
        admission_claim_wait=math.inf,  # the pool's timeout, not the claims' budget
    )  # fmt: skip
    async with serving(settings) as api:
        yield api


async def test_pool_exhausted_requests_fail_cleanly_then_recover(
    small_pool_api: Api, database_url: str, db: asyncpg.Connection
) -> None:
    api = small_pool_api
    customer = await api.create_customer()
    blocked = await api.create_expert(["s"], name="blocked")
    other = await api.create_expert(["s"], name="other")
    cold = await api.create_expert(["s"], name="cold")
    await api.create_project(customer["token"], tasks_of("s", 5))
    # `other` has authenticated before (its credential is cached); `cold` has not.
    r = await api.rest("POST", f"/v1/assignments/{uuid.uuid4()}/heartbeat", other["token"])
    assert r.status_code == 404

    # Both pooled connections end up waiting on the expert row we hold.
    async with connections_held(api, database_url, blocked) as holders:
        # GraphQL: a field error with code UNAVAILABLE (not masked), after about the timeout.
        t0 = time.monotonic()
        r = await api.http.post(
            "/graphql",
            json={"query": "mutation { claimNextTask { assignmentId } }"},
            headers={
                "Authorization": f"Bearer {other['token']}",
                "Accept": "application/graphql-response+json",
            },
        )
        waited = time.monotonic() - t0
        body = r.json()
        assert r.status_code == 200, r.text  # data is present ({"claimNextTask": null})
        assert body["data"] == {"claimNextTask": None}
        assert [e["extensions"]["code"] for e in body["errors"]] == ["UNAVAILABLE"]
        assert "busy" in body["errors"][0]["message"]
        assert r.headers["retry-after"] == "1"
        assert waited >= POOL_TIMEOUT * 0.9

        # A credential not cached yet needs the database to authenticate: the whole request
        # is refused up front, 503 UNAVAILABLE with Retry-After (nothing was parsed or run).
        r = await api.http.post(
            "/graphql",
            json={"query": "mutation { claimNextTask { assignmentId } }"},
            headers={
                "Authorization": f"Bearer {cold['token']}",
                "Accept": "application/graphql-response+json",
            },
        )
        assert r.status_code == 503, r.text
        assert r.json()["errors"][0]["extensions"]["code"] == "UNAVAILABLE"
        assert r.headers["retry-after"] == "1"

        # REST: 503 with the JSON error body.
        r = await api.rest("POST", "/v1/tasks/next", other["token"])
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "UNAVAILABLE"

        # Readiness reflects it too.
        assert (await api.http.get("/readyz")).status_code == 503
        # Nothing was claimed by the refused requests.
        assert await db.fetchval("SELECT count(*) FROM assignments") == 0

    # The blocked claims complete once the lock goes; the pool serves everyone again.
    claims = await asyncio.wait_for(asyncio.gather(*holders), 10)
    assert claims[0] is not None and claims[0] == claims[1]  # the same held claim, twice
    assert await api.claim(other["token"]) is not None
    assert (await api.http.get("/readyz")).status_code == 200
    assert await db.fetchval("SELECT count(*) FROM assignments") == 2
