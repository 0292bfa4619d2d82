"""The claim loop through the public API, checked against the database."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from taskroute.db.queries import Q

from ..clock import DbClock
from ..helpers import Api, GraphQLError, InProcessServer, settings_for, tasks_of, wait_for


async def test_nothing_to_claim_is_null_and_204(api: Api) -> None:
    expert = await api.create_expert(["grading"])
    assert await api.claim(expert["token"]) is None
    r = await api.rest("POST", "/v1/tasks/next", expert["token"])
    assert r.status_code == 204
    assert r.headers["retry-after"] == "10"
    assert r.content == b""


async def test_claim_only_qualified_skill_and_quality(api: Api) -> None:
    customer = await api.create_customer()
    novice = await api.create_expert([{"skill": "grading", "quality": 0.5}])
    translator = await api.create_expert(["translation"])
    await api.create_project(customer["token"], tasks_of("grading", 2), minQuality=0.8)
    assert await api.claim(novice["token"]) is None
    assert await api.claim(translator["token"]) is None
    good = await api.create_expert([{"skill": "grading", "quality": 0.9}])
    assert (await api.claim(good["token"]))["task"]["skill"] == "grading"


async def test_priority_then_age(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    low = await api.create_project(customer["token"], tasks_of("grading", 1), priority=0)
    high = await api.create_project(
        customer["token"],
        [
            {"skill": "grading", "payload": {"n": "first"}},
            {"skill": "grading", "payload": {"n": "urgent"}, "priority": 5},
            {"skill": "grading", "payload": {"n": "second"}},
        ],
        priority=1,
    )
    order = []
    for _ in range(4):
        claim = await api.claim(expert["token"])
        assert claim is not None
        order.append((claim["task"]["projectId"], claim["task"]["payload"]))
        await api.submit(expert["token"], claim["assignmentId"], {"ok": True})
    hid, lid = high["project"]["id"], low["project"]["id"]
    assert order == [
        (hid, {"n": "urgent"}),
        (hid, {"n": "first"}),
        (hid, {"n": "second"}),
        (lid, {"text": "item 0"}),
    ]


async def test_asking_again_returns_the_held_claim(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("grading", 5))
    first = await api.claim(expert["token"])
    again = await api.claim(expert["token"])
    assert first is not None and again is not None
    assert again["assignmentId"] == first["assignmentId"]
    assert await db.fetchval("SELECT count(*) FROM assignments") == 1


async def test_same_expert_racing_claims_gets_one_assignment(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("grading", 20))
    claims = await asyncio.gather(*(api.claim(expert["token"]) for _ in range(12)))
    assert len({c["assignmentId"] for c in claims if c}) == 1
    assert all(c is not None for c in claims)
    assert await db.fetchval("SELECT count(*) FROM assignments") == 1
    assert await db.fetchval("SELECT count(*) FROM tasks WHERE status = 'claimed'") == 1


async def test_many_experts_claim_and_submit_each_task_exactly_once(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    skills = ["grading", "judging"]
    experts = [await api.create_expert([random.choice(skills)], f"e{i}") for i in range(50)]
    for skill in skills:
        await api.create_project(customer["token"], tasks_of(skill, 150), payCents=7)
    receipts: list[dict] = []

    async def work(token: str) -> None:
        while True:
            # 50 experts with no think time saturate the test server: a claim may be refused
            # as overloaded (changed nothing); api.claim asks again after its Retry-After.
            claim = await api.claim(token)
            if claim is None:
                return
            receipts.append(await api.submit(token, claim["assignmentId"], {"v": 1}))

    await asyncio.gather(*(work(e["token"]) for e in experts))

    served = {s for (s,) in await db.fetch("SELECT DISTINCT skill FROM expert_skills")}
    expected = 150 * len(served)
    assert len(receipts) == expected
    assert len({r["assignmentId"] for r in receipts}) == expected
    assert await db.fetchval("SELECT count(*) FROM tasks WHERE status = 'done'") == expected
    # every done task was answered by exactly one assignment, and paid exactly once
    assert (
        await db.fetchval(
            "SELECT count(*) FROM (SELECT task_id FROM assignments WHERE status = 'submitted'"
            " GROUP BY task_id HAVING count(*) <> 1) x"
        )
        == 0
    )
    assert await db.fetchval("SELECT count(*) FROM assignments") == expected
    assert await db.fetchval("SELECT count(*) FROM payouts") == expected
    assert await db.fetchval("SELECT sum(amount_cents) FROM payouts") == 7 * expected


async def test_lease_expiry_is_a_conflict_and_the_task_returns(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    customer = await api.create_customer()
    slow = await api.create_expert(["grading"], "slow")
    other = await api.create_expert(["grading"], "other")
    await api.create_project(customer["token"], tasks_of("grading", 1), leaseSeconds=60)
    claim = await api.claim(slow["token"])
    assert claim is not None
    assert await api.claim(other["token"]) is None  # held, not expired
    await clock.advance(61)

    r = await api.rest("POST", f"/v1/assignments/{claim['assignmentId']}/heartbeat", slow["token"])
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "LEASE_EXPIRED"
    with pytest.raises(GraphQLError) as err:
        await api.submit(slow["token"], claim["assignmentId"], {"late": True})
    assert err.value.code == "LEASE_EXPIRED"

    # The claim takes the expired lease over, or finds the task open again once the sweeper
    # (every 0.2 s here) has returned it; a claim that meets the sweep holding the row skips
    # it (SKIP LOCKED) and finds nothing that instant, so the expert asks again.
    taken = await wait_for(lambda: api.claim(other["token"]), "the expired task to be claimable")
    assert taken["task"]["id"] == claim["task"]["id"]
    await api.submit(other["token"], taken["assignmentId"], {"on": "time"})
    assert await db.fetchval("SELECT count(*) FROM payouts") == 1
    assert (
        await db.fetchval(
            "SELECT status FROM assignments WHERE id = $1::uuid", claim["assignmentId"]
        )
        == "expired"
    )


async def test_heartbeat_extends_the_lease(api: Api, clock: DbClock) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("grading", 1), leaseSeconds=60)
    claim = await api.claim(expert["token"])
    assert claim is not None
    for _ in range(3):  # 120 s in all: past the first lease, alive through heartbeats
        await clock.advance(40)
        await api.heartbeat(expert["token"], claim["assignmentId"])
    receipt = await api.submit(expert["token"], claim["assignmentId"], {"done": 1})
    assert receipt["assignmentId"] == claim["assignmentId"]


async def test_sweeper_returns_expired_tasks_and_counts_retries(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    customer = await api.create_customer()
    experts = [await api.create_expert(["grading"], f"e{i}") for i in range(3)]
    created = await api.create_project(
        customer["token"], tasks_of("grading", 1), leaseSeconds=60, maxRetries=1
    )
    for attempt, expert in enumerate(experts[:2], 1):
        assert await api.claim(expert["token"]) is not None
        await clock.advance(61)

        async def swept(attempt: int = attempt) -> bool:
            # The in-process sweeper (every 0.2 s) counts the attempt and leaves the task.
            row = await db.fetchrow("SELECT status, attempts FROM tasks")
            return row["attempts"] == attempt and row["status"] != "claimed"

        await wait_for(swept, f"the sweeper to take back lease {attempt}")
    # Two leases expired and max_retries=1: the task failed and is not offered again.
    assert await api.claim(experts[2]["token"]) is None
    progress = await api.progress(customer["token"], created["project"]["id"])
    assert progress["failed"] == 1 and progress["open"] == 0
    assert await db.fetchval("SELECT attempts FROM tasks") == 2


async def test_double_submit_returns_the_same_receipt(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("grading", 1), payCents=50)
    claim = await api.claim(expert["token"])
    assert claim is not None
    first = await api.submit(expert["token"], claim["assignmentId"], {"grade": 1})
    again = await api.submit(expert["token"], claim["assignmentId"], {"grade": 2})
    assert again == first
    r = await api.rest(
        "POST",
        f"/v1/assignments/{claim['assignmentId']}/submit",
        expert["token"],
        json={"answer": {"grade": 3}},
    )
    assert r.status_code == 200
    assert r.json()["id"] == first["id"]
    assert await db.fetchval("SELECT answer FROM assignments") == '{"grade": 1}'
    assert await db.fetchval("SELECT count(*) FROM payouts") == 1


async def test_racing_submits_store_one_answer(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("grading", 1), payCents=5)
    claim = await api.claim(expert["token"])
    assert claim is not None
    receipts = await asyncio.gather(
        *(api.submit(expert["token"], claim["assignmentId"], {"n": i}) for i in range(10))
    )
    assert len({r["id"] for r in receipts}) == 1
    assert await db.fetchval("SELECT count(*) FROM payouts") == 1
    assert await db.fetchval("SELECT count(*) FROM assignments WHERE answer IS NOT NULL") == 1


async def test_cancel_stops_claims_and_pays_submitted_work(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    a = await api.create_expert(["grading"], "a")
    b = await api.create_expert(["grading"], "b")
    c = await api.create_expert(["grading"], "c")
    created = await api.create_project(customer["token"], tasks_of("grading", 5), payCents=10)
    project_id = created["project"]["id"]
    done = await api.claim(a["token"])
    in_flight = await api.claim(b["token"])
    assert done is not None and in_flight is not None
    await api.submit(a["token"], done["assignmentId"], {"x": 1})

    data = await api.gql(
        "mutation($p: ID!) { cancelProject(id: $p) { status } }",
        {"p": project_id},
        customer["token"],
    )
    assert data["cancelProject"]["status"] == "canceled"
    assert await api.claim(c["token"]) is None
    with pytest.raises(GraphQLError) as err:
        await api.heartbeat(b["token"], in_flight["assignmentId"])
    assert err.value.code == "PROJECT_CANCELED"
    await api.submit(b["token"], in_flight["assignmentId"], {"x": 2})  # within its lease

    assert await db.fetchval("SELECT sum(amount_cents) FROM payouts") == 20
    progress = await api.progress(customer["token"], project_id)
    assert progress["done"] == 2 and progress["open"] == 0


async def test_rest_contract_round_trip(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    r = await api.rest(
        "POST",
        "/v1/projects",
        customer["token"],
        json={
            "name": "essays",
            "pay_cents": 3,
            "lease_seconds": 60,
            "tasks": [{"skill": "grading", "payload": {"t": 1}, "external_id": "a-1"}],
        },
    )
    assert r.status_code == 201, r.text
    project_id = r.json()["project_id"]
    r = await api.rest("POST", "/v1/tasks/next", expert["token"], json={"skills": ["grading"]})
    assert r.status_code == 200
    claim = r.json()
    assert claim["task"]["payload"] == {"t": 1}
    assert claim["task"]["project_id"] == project_id
    hb = await api.rest(
        "POST", f"/v1/assignments/{claim['assignment_id']}/heartbeat", expert["token"]
    )
    assert hb.status_code == 200 and hb.json()["assignment_id"] == claim["assignment_id"]
    sub = await api.rest(
        "POST",
        f"/v1/assignments/{claim['assignment_id']}/submit",
        expert["token"],
        json={"answer": "B"},
    )
    assert sub.status_code == 200 and sub.json()["pay_cents"] == 3
    again = await api.rest(
        "POST", f"/v1/assignments/{claim['assignment_id']}/heartbeat", expert["token"]
    )
    assert again.status_code == 409 and again.json()["error"]["code"] == "ALREADY_SUBMITTED"
    got = await api.rest("GET", f"/v1/projects/{project_id}", customer["token"])
    assert got.json()["progress"]["done"] == 1


async def test_payloads_of_every_json_type_round_trip(api: Api) -> None:
    """A payload (or gold answer) that is itself a JSON array used to be taken by the driver
    for another dimension of the insert's array parameter (INTERNAL); every JSON type is
    stored and delivered as sent."""
    customer = await api.create_customer()
    expert = await api.create_expert(["any"])
    payloads: list[object] = [["a", "b", 1], [[1, 2], [3]], "text", 7, 2.5, True, {"k": [1, [2]]}]
    await api.create_project(
        customer["token"],
        [{"skill": "any", "payload": p, "externalId": f"p{i}"} for i, p in enumerate(payloads)],
    )
    got = []
    for _ in payloads:
        claim = await api.claim(expert["token"])
        assert claim is not None
        got.append(claim["task"]["payload"])
        await api.submit(expert["token"], claim["assignmentId"], ["an", "array", "answer"])
    assert sorted(map(repr, got)) == sorted(map(repr, payloads))


@pytest_asyncio.fixture
async def unswept_api(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    """A server whose own sweeper passes once at start and not again during the test: the test
    plays the sweep itself. (The suite's servers sweep every 0.2 s: one pass between the
    test's clock.advance and its lock expired the lease first, and the claim took a task
    without waiting.)"""
    server = InProcessServer(settings_for(database_url, tmp_path, sweep_interval=3600.0))
    await server.start()
    try:
        async with Api(server.url) as api:
            yield api
    finally:
        await server.stop()


async def test_a_claim_waits_for_a_sweep_holding_its_expired_lease(
    unswept_api: Api, db: asyncpg.Connection, database_url: str, clock: DbClock
) -> None:
    """A sweep that has locked an expert's expired slot but not yet expired the assignment:
    the expert's next claim waits for it instead of skipping the row and then colliding with
    the still-active assignment (one live claim per expert), which answered INTERNAL."""
    api = unswept_api
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("grading", 2), leaseSeconds=60)
    first = await api.claim(expert["token"])
    assert first is not None
    await clock.advance(61)

    sweep = await asyncpg.connect(database_url)
    try:
        tx = sweep.transaction()
        await tx.start()
        # the sweeper's first step: its batch of expired slots, locked
        await sweep.execute(
            "SELECT 1 FROM tasks WHERE id = $1::text::uuid FOR UPDATE", first["task"]["id"]
        )
        claim = asyncio.create_task(api.claim(expert["token"]))
        waiting = (
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        await wait_for(
            lambda: claim.done() or db.fetchval(waiting), "the claim to wait for the sweep"
        )
        assert not claim.done(), claim.result()
        await sweep.fetch(Q["leases_release_expired"], 100, None)
        await tx.commit()
    finally:
        await sweep.close()
    second = await claim
    assert second is not None
    active = "SELECT count(*) FROM assignments WHERE expert_id = $1::uuid AND status = 'active'"
    assert await db.fetchval(active, expert["id"]) == 1
    status = "SELECT status FROM assignments WHERE id = $1::uuid"
    assert await db.fetchval(status, first["assignmentId"]) == "expired"


async def test_the_claim_takes_over_an_expired_lease_in_priority_order(
    unswept_api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    """With no sweep in between, the claim itself takes over another expert's expired lease
    when that task ranks first, though open work of the skill waits; and open work that ranks
    first still goes before an expired lease. (The claim asks first whether any lease in the
    expert's skills ran out, and plans the takeover only then.)"""
    api = unswept_api
    customer = await api.create_customer()
    await api.create_project(
        customer["token"], tasks_of("grading", 1), priorityClass="HIGH", leaseSeconds=60
    )
    holder = await api.create_expert(["grading"], "holder")
    held = await api.claim(holder["token"])
    assert held is not None
    await api.create_project(customer["token"], tasks_of("grading", 1), priorityClass="LOW")
    await clock.advance(61)
    taker = await api.claim((await api.create_expert(["grading"], "taker"))["token"])
    assert taker is not None and taker["task"]["id"] == held["task"]["id"]
    status = "SELECT status FROM assignments WHERE id = $1::uuid"
    assert await db.fetchval(status, held["assignmentId"]) == "expired"

    await api.create_project(
        customer["token"], tasks_of("triage", 1), priorityClass="LOW", leaseSeconds=60
    )
    low = await api.claim((await api.create_expert(["triage"], "low holder"))["token"])
    assert low is not None
    await clock.advance(61)
    high = await api.create_project(customer["token"], tasks_of("triage", 1), priorityClass="HIGH")
    first = await api.claim((await api.create_expert(["triage"], "first"))["token"])
    assert first is not None and first["task"]["projectId"] == high["project"]["id"]
    then = await api.claim((await api.create_expert(["triage"], "then"))["token"])
    assert then is not None and then["task"]["id"] == low["task"]["id"]
