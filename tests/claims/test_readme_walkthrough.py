"""The walk-through from the README, through GraphQL."""

from __future__ import annotations

import asyncpg

from ..helpers import Api, tasks_of


async def test_claim_heartbeat_submit(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    created = await api.create_project(customer["token"], tasks_of("grading", 3), payCents=25)
    assert created["accepted"] is False
    project_id = created["project"]["id"]

    claim = await api.claim(expert["token"])
    assert claim is not None
    assert claim["task"]["payload"]["text"].startswith("item ")
    lease = await api.heartbeat(expert["token"], claim["assignmentId"])
    assert lease["leaseUntil"] >= claim["leaseUntil"]
    receipt = await api.submit(expert["token"], claim["assignmentId"], {"grade": 4})
    assert receipt["payCents"] == 25

    progress = await api.progress(customer["token"], project_id)
    assert progress == {"total": 3, "open": 2, "claimed": 0, "done": 1, "failed": 0}
    assert await db.fetchval("SELECT count(*) FROM payouts") == 1


async def test_a_payloads_numbers_reach_the_expert_exactly(api: Api) -> None:
    """Integers beyond 64 bits stay integers and floats stay floats on their way through
    Postgres (whose JSON the pool reads with orjson where that is exact) to the claim."""
    payload = {
        "big": 2**70,
        "negative": -(2**64) - 1,
        "nested": [{"f": 0.1, "n": 2**65}, [2.5, 7]],
        "plain": [1, 2, 3],
    }
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], [{"skill": "grading", "payload": payload}])
    claim = await api.claim(expert["token"])
    assert claim is not None
    got = claim["task"]["payload"]
    assert got == payload
    assert isinstance(got["big"], int) and isinstance(got["nested"][0]["n"], int)
    assert isinstance(got["nested"][0]["f"], float)
