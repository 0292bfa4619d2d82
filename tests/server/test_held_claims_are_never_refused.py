"""Past capacity claims are refused, but never the claim of an expert who already holds one: a
repeated claim (a double click, a refreshed page) gets the held assignment back, over GraphQL
and REST, whether the gate would refuse it at the door (the claim line is full) or its wait
budget runs out. The answer needs one probe of the expert's live assignment, on a connection
apart from the pool whose every connection is busy (here: held by the test). When the database
does not answer that probe in time either (here: the experts table is locked), the claim this
process handed out within the last few seconds is the answer, unless the expert has submitted
it since; with that memory off (TASKROUTE_HELD_CLAIM_MEMO_SECONDS=0) the claim is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from ..helpers import CLAIM, Api, connections_held, tasks_of
from .test_claim_shedding import _until, _waiting, two_slot_server


async def _gql_claim(api: Api, token: str) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {token}"}
    r = await api.http.post("/graphql", json={"query": CLAIM}, headers=auth)
    body: dict[str, Any] = r.json()
    return body


async def _rest_claim(api: Api, token: str) -> tuple[int, dict[str, Any]]:
    r = await api.rest("POST", "/v1/tasks/next", token)
    return r.status_code, r.json()


async def _held_claims_come_back(
    api: Api, database_url: str, db: asyncpg.Connection, door: bool
) -> None:
    customer = await api.create_customer()
    blocked = await api.create_expert(["s"], name="blocked")
    holder = await api.create_expert(["s"], name="holder")
    waiter = await api.create_expert(["s"], name="waiter")
    refused = await api.create_expert(["s"], name="refused")
    await api.create_project(customer["token"], tasks_of("s", 10))
    held = await api.claim(holder["token"])
    assert held is not None
    for e in (waiter, refused):  # credentials cached: refusals below are the gate's
        assert (await api.rest("GET", "/v1/realtime/status", e["token"])).status_code < 500

    async with connections_held(api, database_url, blocked) as holders:
        if door:
            # The claim line (one) is full: another expert's claim is refused at the door.
            waiting = asyncio.create_task(api.claim(waiter["token"]))
            await _until(api, "the claim never queued", claim=1)
            body = await _gql_claim(api, refused["token"])
            assert body["errors"][0]["extensions"]["reason"] == "overloaded", body
        # The holder asks again (twice over GraphQL, once over REST) while claims are refused:
        # answered with the held claim though every pooled connection is still held.
        gql_1, gql_2, (status, rest) = await asyncio.wait_for(
            asyncio.gather(
                _gql_claim(api, holder["token"]),
                _gql_claim(api, holder["token"]),
                _rest_claim(api, holder["token"]),
            ),
            30,
        )
        assert not any(h.done() for h in holders)
    for body in (gql_1, gql_2):
        assert "errors" not in body, body
        assert body["data"]["claimNextTask"]["assignmentId"] == held["assignmentId"]
    assert status == 200 and rest["assignment_id"] == held["assignmentId"], rest
    await asyncio.wait_for(asyncio.gather(*holders), 30)
    if door:
        await asyncio.wait_for(waiting, 30)
    # One live claim for the holder, the one it had.
    assert await db.fetchval(
        "SELECT count(*) FROM assignments a JOIN experts e ON e.id = a.expert_id"
        " WHERE e.name = 'holder'"
    ) == 1  # fmt: skip


async def test_a_held_claim_comes_back_when_the_door_refuses_claims(
    database_url: str, tmp_path: Any, db: asyncpg.Connection
) -> None:
    async with two_slot_server(
        database_url, tmp_path, admission_claim_queue=1, admission_claim_wait=math.inf
    ) as api:
        await _held_claims_come_back(api, database_url, db, door=True)


async def test_a_held_claim_comes_back_when_its_wait_budget_runs_out(
    database_url: str, tmp_path: Any, db: asyncpg.Connection
) -> None:
    async with two_slot_server(
        database_url, tmp_path, admission_claim_queue=10, admission_claim_wait=0.3
    ) as api:
        await _held_claims_come_back(api, database_url, db, door=False)


@contextlib.asynccontextmanager
async def _database_silent(api: Api, database_url: str, door: bool = False) -> AsyncIterator[None]:
    """Claims are refused (at the door when `door`: the claim line of one is full; else when
    their wait budget runs out) and the database answers no probe until the block ends."""
    blocked = await api.create_expert(["s"])
    waiter = await api.create_expert(["s"])
    assert (await api.rest("GET", "/v1/realtime/status", waiter["token"])).status_code < 500
    await _waiting(api)  # the scrape's own database gauges are fresh before the block
    async with connections_held(api, database_url, blocked, probes_too=True) as holders:
        if door:
            waiting = asyncio.create_task(api.claim(waiter["token"]))
            await _until(api, "the claim never queued", claim=1)
        yield
    await asyncio.wait_for(asyncio.gather(*holders), 30)
    if door:
        await asyncio.wait_for(waiting, 30)


def _refused(body: dict[str, Any]) -> None:
    assert body["data"]["claimNextTask"] is None, body
    extensions = body["errors"][0]["extensions"]
    assert (extensions["code"], extensions["reason"]) == ("UNAVAILABLE", "overloaded"), body


async def _remembered_claim_comes_back(api: Api, database_url: str, door: bool) -> None:
    customer = await api.create_customer()
    holder = await api.create_expert(["s"])
    await api.create_project(customer["token"], tasks_of("s", 10))
    held = await api.claim(holder["token"])
    assert held is not None
    async with _database_silent(api, database_url, door):
        gql_1, gql_2, (status, rest) = await asyncio.wait_for(
            asyncio.gather(
                _gql_claim(api, holder["token"]),
                _gql_claim(api, holder["token"]),
                _rest_claim(api, holder["token"]),
            ),
            15,
        )
    for body in (gql_1, gql_2):
        assert "errors" not in body, body
        assert body["data"]["claimNextTask"]["assignmentId"] == held["assignmentId"]
    assert status == 200 and rest["assignment_id"] == held["assignmentId"], rest


async def test_a_remembered_claim_comes_back_when_the_door_refuses_and_the_probe_is_unanswered(
    database_url: str, tmp_path: Any
) -> None:
    async with two_slot_server(
        database_url, tmp_path, admission_claim_queue=1, admission_claim_wait=math.inf
    ) as api:
        await _remembered_claim_comes_back(api, database_url, door=True)


async def test_a_remembered_claim_comes_back_when_its_budget_runs_out_and_the_probe_is_unanswered(
    database_url: str, tmp_path: Any
) -> None:
    async with two_slot_server(
        database_url, tmp_path, admission_claim_queue=10, admission_claim_wait=0.3
    ) as api:
        await _remembered_claim_comes_back(api, database_url, door=False)


async def test_a_submitted_claim_is_not_remembered(database_url: str, tmp_path: Any) -> None:
    # a window far longer than the test: only the submit can have ended the memory
    async with two_slot_server(
        database_url,
        tmp_path,
        admission_claim_queue=10,
        admission_claim_wait=0.3,
        held_claim_memo_seconds=600.0,
    ) as api:
        customer = await api.create_customer()
        holder = await api.create_expert(["s"])
        await api.create_project(customer["token"], tasks_of("s", 10))
        held = await api.claim(holder["token"])
        assert held is not None
        await api.submit(holder["token"], held["assignmentId"], {"label": "x"})
        async with _database_silent(api, database_url):
            body = await asyncio.wait_for(_gql_claim(api, holder["token"]), 15)
        _refused(body)


async def test_without_the_memory_an_unanswered_probe_leaves_the_refusal(
    database_url: str, tmp_path: Any
) -> None:
    async with two_slot_server(
        database_url,
        tmp_path,
        admission_claim_queue=10,
        admission_claim_wait=0.3,
        held_claim_memo_seconds=0.0,
    ) as api:
        customer = await api.create_customer()
        holder = await api.create_expert(["s"])
        await api.create_project(customer["token"], tasks_of("s", 10))
        assert await api.claim(holder["token"]) is not None
        async with _database_silent(api, database_url):
            body = await asyncio.wait_for(_gql_claim(api, holder["token"]), 15)
        _refused(body)
