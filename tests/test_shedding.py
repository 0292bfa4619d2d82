"""Past capacity (issue 19): claims are refused at once, work in progress is served first.

Two claims of one expert whose row we lock from outside hold both pooled connections (as in
test_pool.py). Behind them one claim waits (the claim line holds one), so the next claim is
refused at once: 503 / UNAVAILABLE with Retry-After, although the pool timeout is a minute.
A submit and a heartbeat queued after the waiting claim still get the freed connections first,
and nothing is lost: every admitted request completes, the refused ones changed nothing.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest_asyncio

from taskroute.admission import RETRY_AFTER_MAX, Admission

from .helpers import ADMIN_TOKEN, CLAIM, Api, InProcessServer, settings_for, tasks_of


@pytest_asyncio.fixture
async def tight_api(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    settings = settings_for(
        database_url, tmp_path, pool_min=2, pool_max=2,
        pool_timeout=60.0,  # nobody times out here: a refusal can only be the admission's
        admission_queue=10, admission_claim_queue=1, sweep_interval=60.0,
        routing_interval=60.0, forecast_interval=60.0,
    )  # fmt: skip
    srv = InProcessServer(settings)
    await srv.start()
    async with Api(srv.url) as api:
        yield api
    await srv.stop()


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

    locker = await asyncpg.connect(database_url)
    tx = locker.transaction()
    await tx.start()
    await locker.execute("SELECT 1 FROM experts WHERE id = $1 FOR UPDATE", blocked["id"])
    try:
        holders = [asyncio.create_task(api.claim(blocked["token"])) for _ in range(2)]
        deadline = time.monotonic() + 20
        while (
            await db.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database()"
            )
            < 2
        ):
            assert time.monotonic() < deadline, "the two claims never blocked"
            await asyncio.sleep(0.02)

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
    finally:
        await tx.rollback()
        await locker.close()
    # The waiting claim got its slot only after the rollback freed the holders.
    waited_at_least = time.monotonic() - queued_by

    claims = await asyncio.wait_for(asyncio.gather(*holders), 30)
    receipt, lease, got = await asyncio.wait_for(asyncio.gather(submit, beat, waiting_claim), 30)
    assert claims[0] is not None and claims[0] == claims[1]
    assert got is not None and receipt["assignmentId"] == held["assignmentId"]
    assert lease["assignmentId"] == leased["assignmentId"]

    # The two freed connections went to the submit and the heartbeat; the claim that had been
    # waiting longer ran only after one of them finished.
    times = await db.fetchrow(
        "SELECT (SELECT submitted_at FROM assignments WHERE id = $1) AS submitted,"
        " (SELECT lease_until FROM assignments WHERE id = $2) AS beaten,"
        " (SELECT claimed_at FROM assignments WHERE id = $3) AS waited_claimed,"
        " (SELECT lease_until FROM assignments WHERE id = $3) AS waited_lease",
        held["assignmentId"], leased["assignmentId"], got["assignmentId"],
    )  # fmt: skip
    assert times["submitted"] < times["waited_claimed"]
    assert times["beaten"] <= times["waited_lease"]

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
