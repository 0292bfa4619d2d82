"""Past capacity (issue 19): claims are refused at once, work in progress is served first.

Two claims of one expert whose row we lock from outside hold both pooled connections (as in
test_pool_exhaustion.py). Behind them one claim waits (the claim line holds one), so the next
claim is refused at once: 503 / UNAVAILABLE with Retry-After, although the pool timeout is a
minute. A submit and a heartbeat queued after the waiting claim still get the freed connections
first, and nothing is lost: every admitted request completes, the refused ones changed nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest_asyncio

from taskroute.db.admission import RETRY_AFTER_MAX, Admission, Priority

from ..helpers import (
    ADMIN_TOKEN,
    CLAIM,
    Api,
    connections_held,
    serving,
    settings_for,
    tasks_of,
)


@contextlib.asynccontextmanager
async def two_slot_server(
    database_url: str, tmp_path: Path, **overrides: Any
) -> AsyncIterator[Api]:
    """A server with two pooled connections whose only refusals can be the admission's (a
    minute's pool timeout) and whose jobs stay out of the way."""
    settings = settings_for(
        database_url, tmp_path, pool_min=2, pool_max=2, pool_timeout=60.0,
        admission_queue=10, sweep_interval=60.0, routing_interval=60.0,
        forecast_interval=60.0, **overrides,
    )  # fmt: skip
    async with serving(settings) as api:
        yield api


@pytest_asyncio.fixture
async def tight_api(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    # the line's length alone (the budget: tests below)
    async with two_slot_server(
        database_url, tmp_path, admission_claim_queue=1, admission_claim_wait=math.inf
    ) as api:
        yield api


async def _waiting(api: Api) -> dict[str, float]:
    r = await api.http.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200, r.text
    found = re.findall(r'^taskroute_admission_waiting\{priority="(\w+)"\} (\S+)$', r.text, re.M)
    return {k: float(v) for k, v in found}


async def _waits(api: Api, priority: str) -> dict[float, float]:
    """taskroute_admission_wait_seconds{priority}: cumulative count per bucket bound."""
    r = await api.http.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    pattern = (
        r'^taskroute_admission_wait_seconds_bucket\{le="([^"]+)",priority="'
        + priority
        + r'"\} (\S+)$'
    )
    return {float(le): float(n) for le, n in re.findall(pattern, r.text, re.M)}


async def _expired(api: Api) -> float:
    """taskroute_admission_claims_expired_total: claims refused when their budget ran out."""
    r = await api.http.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    found = re.findall(r"^taskroute_admission_claims_expired_total (\S+)$", r.text, re.M)
    return float(found[0]) if found else 0.0


async def _until(api: Api, what: str, **expected: float) -> None:
    deadline = time.monotonic() + 20
    while True:
        waiting = await _waiting(api)
        if all(waiting.get(k) == v for k, v in expected.items()):
            return
        assert time.monotonic() < deadline, f"{what}: {waiting}"
        await asyncio.sleep(0.02)


async def test_claims_shed_at_once_while_work_in_progress_is_served_first(
    tight_api: Api, database_url: str, db: asyncpg.Connection
) -> None:
    api = tight_api
    customer = await api.create_customer()
    blocked = await api.create_expert(["s"], name="blocked")
    submitter = await api.create_expert(["s"], name="submitter")
    beater = await api.create_expert(["s"], name="beater")
    waiter = await api.create_expert(["s"], name="waiter")
    refused = await api.create_expert(["s"], name="refused")
    await api.create_project(customer["token"], tasks_of("s", 10))
    held = await api.claim(submitter["token"])
    leased = await api.claim(beater["token"])
    assert held is not None and leased is not None
    # Authenticated once, so their credentials are cached: refusals below come from the
    # admission gate in front of the pool, not from a credential look-up.
    assert (await api.rest("GET", "/v1/realtime/status", waiter["token"])).status_code < 500
    assert (await api.rest("GET", "/v1/realtime/status", refused["token"])).status_code < 500
    await _waiting(api)  # the scrape's own database gauges are fresh before the pool fills
    claim_waits_before = await _waits(api, "claim")

    # Both pooled connections end up waiting on the expert row we hold.
    async with connections_held(api, database_url, blocked) as holders:
        # One claim waits (the claim line holds one) ...
        waiting_claim = asyncio.create_task(api.claim(waiter["token"]))
        await _until(api, "the claim never queued", claim=1)
        queued_by = time.monotonic()

        # ... so the next claim is refused at once, over GraphQL and REST alike.
        auth = {"Authorization": f"Bearer {refused['token']}"}
        r = await api.http.post("/graphql", json={"query": CLAIM}, headers=auth)
        body = r.json()
        assert body["data"] == {"claimNextTask": None}
        wait = int(r.headers["retry-after"])  # grows with the overload (test below)
        assert 1 <= wait <= RETRY_AFTER_MAX
        assert body["errors"][0]["extensions"] == {
            "code": "UNAVAILABLE", "reason": "overloaded", "retryAfter": wait
        }  # fmt: skip
        r = await api.rest("POST", "/v1/tasks/next", refused["token"])
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "UNAVAILABLE"
        assert r.json()["error"]["details"] == {"reason": "overloaded"}
        assert 1 <= int(r.headers["retry-after"]) <= RETRY_AFTER_MAX

        # Work in progress still queues, behind the waiting claim in time but not in rank.
        submit = asyncio.create_task(
            api.submit(submitter["token"], held["assignmentId"], {"label": "x"})
        )
        beat = asyncio.create_task(api.heartbeat(beater["token"], leased["assignmentId"]))
        await _until(api, "the submit and heartbeat never queued", claim=1, protect=2)
        assert not waiting_claim.done() and not submit.done() and not beat.done()
    # The waiting claim got its slot only after the rollback freed the holders.
    waited_at_least = time.monotonic() - queued_by

    claims = await asyncio.wait_for(asyncio.gather(*holders), 30)
    receipt, lease, got = await asyncio.wait_for(asyncio.gather(submit, beat, waiting_claim), 30)
    assert claims[0] is not None and claims[0] == claims[1]
    assert got is not None and receipt["assignmentId"] == held["assignmentId"]
    assert lease["assignmentId"] == leased["assignmentId"]

    # The two freed connections went to the submit and the heartbeat; the claim that had been
    # waiting longer ran only after one of them finished. Which one is a race (once the first
    # finishes, the claim may start before the other's transaction does), so: one of them
    # ran before the claim (the heartbeat's time is its lease's start, same lease length).
    times = await db.fetchrow(
        "SELECT (SELECT submitted_at FROM assignments WHERE id = $1) AS submitted,"
        " (SELECT lease_until FROM assignments WHERE id = $2) AS beaten,"
        " (SELECT claimed_at FROM assignments WHERE id = $3) AS waited_claimed,"
        " (SELECT lease_until FROM assignments WHERE id = $3) AS waited_lease",
        held["assignmentId"], leased["assignmentId"], got["assignmentId"],
    )  # fmt: skip
    assert (
        times["submitted"] < times["waited_claimed"] or times["beaten"] <= times["waited_lease"]
    ), times

    # /metrics saw that wait: among this test's claims, one waited longer than the largest
    # bucket bound below `waited_at_least` (every other claim here found a free slot).
    after = await _waits(api, "claim")
    new = {le: after[le] - claim_waits_before.get(le, 0.0) for le in after}
    below = max([le for le in new if le <= waited_at_least], default=None)
    slower = new[float("inf")] - (new[below] if below is not None else 0.0)
    assert slower >= 1, (waited_at_least, new)

    # Nothing lost, nothing doubled: the refused expert holds nothing and can claim now.
    assert await db.fetchval(
        "SELECT count(*) FROM assignments a JOIN experts e ON e.id = a.expert_id"
        " WHERE e.name = 'refused'"
    ) == 0  # fmt: skip
    assert await db.fetchval("SELECT count(*) FROM payouts") == 1
    assert await api.claim(refused["token"]) is not None
    assert await _waiting(api) == {"protect": 0, "job": 0, "default": 0, "claim": 0}


def test_retry_after_grows_with_the_overload_and_is_jittered() -> None:
    """A fixed second sent every refused client back at once (4,000 experts: a storm of
    refusals); the wait is demand over capacity, +-50%, so retries spread out."""
    gate = Admission(slots=2, max_waiting=10, max_claims_waiting=1)
    start = 1000.0
    for i in range(600):  # 100 admitted a second for 6 s: under capacity, nothing refused
        gate.admitted.add(start + i / 100)
    calm = start + 6
    assert {gate.retry_after(calm) for _ in range(200)} == {1}
    for i in range(600):  # then 900 refused a second besides them: ten times the capacity
        now = calm + i / 100
        gate.admitted.add(now)
        for _ in range(9):
            gate.refused.add(now)
    waits = [gate.retry_after(calm + 6) for _ in range(400)]
    assert min(waits) >= 4 and max(waits) <= 15  # about 10 s, jittered by half
    assert len(set(waits)) >= 5  # not in step
    for _ in range(60_000):  # far past capacity: capped
        gate.refused.add(calm + 6)
    assert max(gate.retry_after(calm + 6) for _ in range(100)) == RETRY_AFTER_MAX


@pytest_asyncio.fixture
async def budget_api(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    async with two_slot_server(
        database_url, tmp_path, admission_claim_queue=10, admission_claim_wait=0.3
    ) as api:
        yield api


async def test_a_claim_not_served_within_its_budget_is_refused_and_work_in_progress_waits(
    budget_api: Api, database_url: str, db: asyncpg.Connection
) -> None:
    """Past capacity a claim admitted into a long line was served seconds later (4,000
    experts: 1.4 s median): it is refused when its wait budget runs out instead, while a
    heartbeat behind the same held connections waits for as long as the pool allows."""
    api = budget_api
    customer = await api.create_customer()
    blocked = await api.create_expert(["s"], name="blocked")
    beater = await api.create_expert(["s"], name="beater")
    waiter = await api.create_expert(["s"], name="waiter")
    await api.create_project(customer["token"], tasks_of("s", 10))
    leased = await api.claim(beater["token"])
    assert leased is not None
    assert (await api.rest("GET", "/v1/realtime/status", waiter["token"])).status_code < 500

    # Both pooled connections end up waiting on the expert row we hold.
    async with connections_held(api, database_url, blocked) as holders:
        expired_before = await _expired(api)
        beat = asyncio.create_task(api.heartbeat(beater["token"], leased["assignmentId"]))
        await _until(api, "the heartbeat never queued", protect=1)
        asked = time.monotonic()
        auth = {"Authorization": f"Bearer {waiter['token']}"}
        r = await api.http.post("/graphql", json={"query": CLAIM}, headers=auth)
        waited = time.monotonic() - asked
        body = r.json()
        assert body["data"] == {"claimNextTask": None}
        wait = int(r.headers["retry-after"])
        assert body["errors"][0]["extensions"] == {
            "code": "UNAVAILABLE", "reason": "overloaded", "retryAfter": wait
        }  # fmt: skip
        assert waited >= 0.3  # it did wait its budget: the line was short, not full
        asked = time.monotonic()
        r = await api.rest("POST", "/v1/tasks/next", waiter["token"])
        assert r.status_code == 503, r.text
        assert r.json()["error"]["details"] == {"reason": "overloaded"}
        assert time.monotonic() - asked >= 0.3
        # Both were refused when their budget ran out, not at the door (the line was short).
        assert await _expired(api) == expired_before + 2
        # The heartbeat is still waiting: work in progress has no budget but the pool's.
        assert not beat.done()
        waiting = await _waiting(api)
        assert waiting["protect"] == 1 and waiting["claim"] == 0, waiting
    lease = await asyncio.wait_for(beat, 30)
    assert lease["assignmentId"] == leased["assignmentId"]
    claims = await asyncio.wait_for(asyncio.gather(*holders), 30)
    assert claims[0] is not None and claims[0] == claims[1]
    # The refused claims changed nothing; the expert claims once there is room.
    assert await db.fetchval(
        "SELECT count(*) FROM assignments a JOIN experts e ON e.id = a.expert_id"
        " WHERE e.name = 'waiter'"
    ) == 0  # fmt: skip
    assert await api.claim(waiter["token"]) is not None


def test_a_refused_claim_waits_by_the_claims_own_overload() -> None:
    """Claims are a third of the requests; heartbeats and submits are let in, not refused. By
    the overall ratio a refused claimer came back about twice as often as claims got in."""
    clock = [1000.0]
    gate = Admission(
        slots=2, max_waiting=10, max_claims_waiting=1, claim_wait=0.25, clock=lambda: clock[0]
    )
    for i in range(600):  # 6 s: 100 claims and 200 heartbeats/submits let in a second ...
        now = clock[0] + i / 100
        gate.claims_admitted.add(now)
        for _ in range(3):
            gate.admitted.add(now)
        for _ in range(9):  # ... and 900 claims refused a second
            gate.claims_refused.add(now)
            gate.refused.add(now)
    clock[0] += 6
    claims = [gate.retry_after(clock[0], Priority.CLAIM) for _ in range(400)]
    overall = [gate.retry_after(clock[0]) for _ in range(400)]
    assert min(claims) >= 4 and max(claims) <= 15  # (100 + 900) / 100: about 10 s, +-50%
    assert min(overall) >= 1 and max(overall) <= 6  # (300 + 900) / 300: about 4 s


async def test_claims_are_refused_at_the_door_beyond_what_drains_within_the_budget() -> None:
    """Once the claim line has not been empty for a whole budget (saturated), its length
    follows the rate claims get in: at that rate the claims already waiting take the budget to
    drain, so one more is refused before it waits at all. A burst is not saturation."""
    clock = [1000.0]
    # A budget of 30 s so that no real timer fires while the test runs; its clock is ours.
    gate = Admission(
        slots=2, max_waiting=1000, max_claims_waiting=1000, claim_wait=30.0,
        clock=lambda: clock[0],
    )  # fmt: skip
    await gate.acquire(Priority.PROTECT, 1)
    await gate.acquire(Priority.PROTECT, 1)  # both slots held: claims must wait

    # A burst: the line has held claims for less than a budget, so only its length bounds it.
    waiting: list[asyncio.Task[None]] = []
    while not gate.would_refuse(Priority.CLAIM) and len(waiting) < 100:
        waiting.append(asyncio.create_task(gate.acquire(Priority.CLAIM, 60)))
        await asyncio.sleep(0)
    assert len(waiting) == 100

    async def one_second_one_claim_served() -> None:
        clock[0] += 1.0
        gate.release()  # the slot goes to the first waiting claim, which now holds it
        await asyncio.sleep(0)

    for _ in range(29):
        await one_second_one_claim_served()
    assert not gate.would_refuse(Priority.CLAIM)  # 71 ahead, but not yet a whole budget
    await one_second_one_claim_served()
    # Saturated: about 1.2 claims get in a second (the decaying count's estimate just after
    # one), so 30 s drain ~35 of the 70 ahead: one more is refused at the door.
    assert 30 < gate._claims_within_budget() < 40
    assert gate.would_refuse(Priority.CLAIM)
    assert not gate.would_refuse(Priority.PROTECT)  # work in progress still queues
    refusal = gate.refusal(Priority.CLAIM)
    assert refusal is not None and refusal.priority is Priority.CLAIM
    # As the line drains to what gets in within the budget, claims join it again.
    while gate.would_refuse(Priority.CLAIM):
        await one_second_one_claim_served()
    ahead = len([t for t in waiting if not t.done()])
    assert 30 < ahead < 40 and ahead < gate._claims_within_budget() <= ahead + 1
    # Emptied, the line is not saturated any more: the next burst is taken whole again.
    while gate.waiting:
        await one_second_one_claim_served()
    assert gate._claims_within_budget() == math.inf
    await asyncio.gather(*waiting)
