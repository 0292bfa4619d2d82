"""Routing (issue 6): scarcity, fairness, deadline bumps, scope, capabilities, retries, presence.

Everything goes through the public API of a real server on a real database; invariants are
then checked in the database. The routing job runs in the server on a short interval, except
in the fairness tests, which run its passes themselves on the database clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from taskroute.db.pool import Database, create_pool
from taskroute.resolvers.jobs.routing import RoutingPolicy, routing_once

from ..clock import DbClock
from ..helpers import (
    ADMIN_TOKEN,
    CLAIM,
    Api,
    GraphQLError,
    InProcessServer,
    serving,
    settings_for,
    tasks_of,
    wait_for,
)

PROJECT = (
    "query($p: ID!) { project(id: $p) { priority priorityClass"
    " progress { total open claimed done failed }"
    " routing { deadlineBumped events { kind remaining deadline forecastFinish } } } }"
)


@contextlib.asynccontextmanager
async def routing_server(database_url: str, tmp_path: Path, shares: str) -> AsyncIterator[Api]:
    """A server whose routing job runs every 0.2 s with a 3 s fairness window."""
    settings = settings_for(
        database_url,
        tmp_path,
        routing_interval=0.2,
        routing_fair_window=3.0,
        routing_forecast_window=1.0,
        routing_class_shares=shares,
    )
    async with serving(settings) as client:
        yield client


@pytest_asyncio.fixture
async def routed(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    async with routing_server(database_url, tmp_path, "high=0.5,normal=0.25,low=0.1") as api:
        yield api


@pytest_asyncio.fixture
async def deadlines_only(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    """No fairness shares: only deadline bumps move priorities (nothing else races them)."""
    async with routing_server(database_url, tmp_path, "high=0,normal=0,low=0") as api:
        yield api


async def claim(api: Api, token: str, skills: list[str] | None = None, project: str | None = None):
    data = await api.gql(CLAIM, {"s": skills, "p": project}, token)
    return data["claimNextTask"]


async def project_state(api: Api, token: str, project_id: str) -> dict[str, Any]:
    return (await api.gql(PROJECT, {"p": project_id}, token))["project"]


async def scarcity(api: Api) -> dict[str, dict[str, Any]]:
    data = await api.gql("{ skillScarcity { skill activeExperts openBacklog } }", token=ADMIN_TOKEN)
    return {r["skill"]: r for r in data["skillScarcity"]}


# --- skill scarcity -----------------------------------------------------------------------


async def test_rare_skill_goes_to_its_only_expert_ahead_of_common_backlog(
    routed: Api, db: asyncpg.Connection
) -> None:
    api = routed
    customer = await api.create_customer()
    rare_expert = await api.create_expert(["common", "rare"], name="polyglot")
    others = [await api.create_expert(["common"], name=f"c{i}") for i in range(4)]
    # Priority alone would pick the common work: it is HIGH, the rare task LOW.
    common = await api.create_project(
        customer["token"], tasks_of("common", 20), priorityClass="HIGH", name="common"
    )
    rare = await api.create_project(
        customer["token"], tasks_of("rare", 1), priorityClass="LOW", name="rare"
    )

    async def measured() -> bool:
        s = await scarcity(api)
        return (
            s.get("rare", {}).get("openBacklog") == 1
            and s.get("common", {}).get("openBacklog") == 20
        )

    await wait_for(measured, "the routing job to measure scarcity")
    s = await scarcity(api)
    assert s["rare"]["activeExperts"] == 1 and s["common"]["activeExperts"] == 5

    got = await claim(api, rare_expert["token"])
    assert got["task"]["skill"] == "rare"
    assert got["task"]["projectId"] == rare["project"]["id"]
    # Experts who cannot help with the rare skill get the common backlog.
    other = await claim(api, others[0]["token"])
    assert other["task"]["projectId"] == common["project"]["id"]
    # Naming skills keeps plain priority order among them.
    await api.submit(rare_expert["token"], got["assignmentId"], {"ok": 1})
    named = await claim(api, rare_expert["token"], skills=["common"])
    assert named["task"]["skill"] == "common"
    claimed = await db.fetch(
        "SELECT t.skill, a.expert_id::text AS expert FROM assignments a"
        " JOIN tasks t ON t.id = a.task_id ORDER BY a.claimed_at"
    )
    assert [(r["skill"], r["expert"]) for r in claimed] == [
        ("rare", rare_expert["id"]),
        ("common", others[0]["id"]),
        ("common", rare_expert["id"]),
    ]


# --- fairness -------------------------------------------------------------------------------


# The fairness tests drive the routing job themselves, on the database clock: one pass, then a
# phase of claims made one after another, then the clock moves a phase on. A pass's window
# (2.5 phases) holds exactly the two phases before it whatever the machine's speed (real time
# only adds the phases' own seconds, far less than half a phase), so every run makes the same
# claims in the same windows.
FAIR_PHASE = 600.0
FAIR_WINDOW = 2.5 * FAIR_PHASE


def fairness_world(
    database_url: str, tmp_path: Path, shares: str
) -> contextlib.AbstractAsyncContextManager[tuple[Api, Database, RoutingPolicy]]:
    return jobless_world(
        database_url, tmp_path, routing_fair_window=FAIR_WINDOW, routing_class_shares=shares
    )


@contextlib.asynccontextmanager
async def jobless_world(
    database_url: str, tmp_path: Path, **overrides: Any
) -> AsyncIterator[tuple[Api, Database, RoutingPolicy]]:
    """A server whose own routing job runs only at its start (the test runs the passes), and
    the job's database and policy for the test's passes."""
    settings = settings_for(database_url, tmp_path, routing_interval=3600.0, **overrides)
    srv = InProcessServer(settings)
    await srv.start()
    pool = await create_pool(database_url, 1, 2)
    try:
        async with Api(srv.url) as client:
            yield client, Database(pool, 10.0), RoutingPolicy.from_settings(settings)
    finally:
        await pool.close()
        await srv.stop()


async def _claims_per_phase(
    world: tuple[Api, Database, RoutingPolicy],
    clock: DbClock,
    tokens: list[str],
    phases: int,
    per_phase: int,
    project_id: str,
) -> list[int]:
    """Per phase: one routing pass, then `per_phase` claims (each submitted before the next,
    experts in turn), then the clock moves `FAIR_PHASE` on. Returns how many of each phase's
    claims went to `project_id`."""
    api, jobs, policy = world

    async def routing_pass() -> bool:
        # False only while the server's start-up pass holds the job's lock: wait for it.
        return (await routing_once(jobs, policy)).ran

    counts = []
    for _ in range(phases):
        await wait_for(routing_pass, "a routing pass")
        mine = 0
        for i in range(per_phase):
            token = tokens[i % len(tokens)]
            got = await claim(api, token)
            assert got is not None, "the backlog must outlast the run (saturation)"
            mine += got["task"]["projectId"] == project_id
            await api.submit(token, got["assignmentId"], {"ok": True})
        counts.append(mine)
        await clock.advance(FAIR_PHASE)
    return counts


async def _flood(
    database_url: str, tmp_path: Path, clock: DbClock, shares: str, phases: int = 8
) -> list[int]:
    """A HIGH project flooding one skill, a LOW one beside it (both without a deadline),
    three experts and the class shares `shares`: the LOW project's claims in each of
    `phases` phases of 20 claims."""
    async with fairness_world(database_url, tmp_path, shares) as world:
        api = world[0]
        customer = await api.create_customer()
        experts = [await api.create_expert(["label"], name=f"e{i}") for i in range(3)]
        await api.create_project(
            customer["token"], tasks_of("label", 400), priorityClass="HIGH", name="flood"
        )
        low = await api.create_project(
            customer["token"], tasks_of("label", 100), priorityClass="LOW", name="low"
        )
        tokens = [e["token"] for e in experts]
        return await _claims_per_phase(world, clock, tokens, phases, 20, low["project"]["id"])


@pytest.mark.slow
async def test_low_priority_project_keeps_a_share_under_high_priority_flood(
    database_url: str, tmp_path: Path, clock: DbClock, db: asyncpg.Connection
) -> None:
    low = await _flood(database_url, tmp_path, clock, "high=0.5,normal=0.25,low=0.1")
    # The low class's share of every window a pass saw (two phases), from the first pass that
    # saw claims on; priority alone would give it none.
    windows = [(low[i] + low[i + 1]) / 40 for i in range(len(low) - 1)]
    assert min(windows) >= 0.05, f"low claims per phase {low}"
    # ... while the high-priority project still gets most of the claims.
    assert sum(low) / (len(low) * 20) <= 0.3, f"low claims per phase {low}"
    # Both still have backlog: this was saturation, not the high project running dry.
    left = await db.fetch(
        "SELECT project_id, count(*) FROM tasks WHERE status = 'open' GROUP BY project_id"
    )
    assert len(left) == 2


@pytest.mark.slow
async def test_without_a_low_share_the_low_project_starves(
    database_url: str, tmp_path: Path, clock: DbClock
) -> None:
    """The share test above can fail: the same run with the low class's share at 0 gives
    it nothing."""
    low = await _flood(database_url, tmp_path, clock, "high=0.5,normal=0.25,low=0")
    assert low == [0] * 8


# --- deadline bump --------------------------------------------------------------------------


async def test_deadline_at_risk_bumps_the_project_and_unbumps_when_done(
    deadlines_only: Api, db: asyncpg.Connection
) -> None:
    api = deadlines_only
    customer = await api.create_customer()
    expert = await api.create_expert(["ocr"])
    # Higher priority, no deadline.
    steady = await api.create_project(customer["token"], tasks_of("ocr", 5), priority=50)
    # Lower priority, due soon, nothing done: its forecast misses the deadline.
    due = (datetime.now(UTC) + timedelta(seconds=30)).isoformat()
    urgent = await api.create_project(
        customer["token"], tasks_of("ocr", 2), priority=0, deadline=due, name="urgent"
    )
    urgent_id = urgent["project"]["id"]

    async def bumped() -> bool:
        return (await project_state(api, customer["token"], urgent_id))["routing"]["deadlineBumped"]

    await wait_for(bumped, "the deadline bump")
    state = await project_state(api, customer["token"], urgent_id)
    assert [e["kind"] for e in state["routing"]["events"]] == ["bump"]
    assert state["routing"]["events"][0]["forecastFinish"] is None  # no progress at all
    # The bump lifts it above the priority-50 project: its two tasks come first. Two experts
    # claim before anyone submits: one submit already makes the forecast meet the deadline,
    # and the job may then unbump it (as it should) before a later claim.
    helper = await api.create_expert(["ocr"], name="helper")
    claims = [await claim(api, e["token"]) for e in (expert, helper)]
    assert [c["task"]["projectId"] for c in claims] == [urgent_id, urgent_id]
    for e, got in zip((expert, helper), claims, strict=True):
        await api.submit(e["token"], got["assignmentId"], {"ok": 1})

    async def unbumped() -> bool:
        return not await bumped()

    await wait_for(unbumped, "the unbump once the work is done")
    state = await project_state(api, customer["token"], urgent_id)
    assert [e["kind"] for e in state["routing"]["events"]] == ["bump", "unbump"]
    got = await claim(api, expert["token"])
    assert got["task"]["projectId"] == steady["project"]["id"]
    rows = await db.fetch(
        "SELECT kind FROM project_priority_events WHERE project_id = $1::text::uuid ORDER BY seq",
        urgent_id,
    )
    assert [r["kind"] for r in rows] == ["bump", "unbump"]


# --- scope and capabilities -----------------------------------------------------------------


async def test_claim_scoped_to_a_project(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["tag"])
    first = await api.create_project(customer["token"], tasks_of("tag", 3), priority=500)
    second = await api.create_project(customer["token"], tasks_of("tag", 1), priority=-500)
    second_id = second["project"]["id"]
    got = await claim(api, expert["token"], project=second_id)
    assert got["task"]["projectId"] == second_id
    await api.submit(expert["token"], got["assignmentId"], {"ok": 1})
    # Nothing left there: nothing, even though the other project has work.
    assert await claim(api, expert["token"], project=second_id) is None
    # REST takes the same scope.
    r = await api.rest(
        "POST", "/v1/tasks/next", expert["token"], json={"project_id": first["project"]["id"]}
    )
    assert r.status_code == 200 and r.json()["task"]["project_id"] == first["project"]["id"]
    with pytest.raises(GraphQLError) as err:
        await claim(api, expert["token"], project="00000000-0000-0000-0000-000000000000")
    assert err.value.code == "NOT_FOUND"
    r = await api.rest("POST", "/v1/tasks/next", expert["token"], json={"project_id": 7})
    assert r.status_code == 422 and r.json()["error"]["code"] == "BAD_INPUT"
    assert await db.fetchval("SELECT count(*) FROM assignments") == 2


async def test_tasks_requiring_capabilities_go_only_to_experts_carrying_them(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    plain = await api.create_expert(["med"], name="plain")
    data = await api.gql(
        "mutation($s: [SkillInput!]!, $c: [String!]) {"
        ' createExpert(name: "doc", skills: $s, capabilities: $c) { id token } }',
        {"s": [{"skill": "med"}], "c": ["hipaa", "fluent-de"]},
        ADMIN_TOKEN,
    )
    doctor = data["createExpert"]
    tasks = [
        {"skill": "med", "payload": {"n": 1}, "requiredCapabilities": ["hipaa", "fluent-de"]},
        {"skill": "med", "payload": {"n": 2}, "requiredCapabilities": ["hipaa"]},
    ]
    created = await api.create_project(customer["token"], tasks)
    assert await claim(api, plain["token"]) is None
    got = await claim(api, doctor["token"])
    assert got is not None
    caps = await db.fetchval(
        "SELECT required_caps FROM tasks WHERE id = $1::text::uuid", got["task"]["id"]
    )
    assert set(caps) <= {"hipaa", "fluent-de"} and caps
    progress = await api.progress(customer["token"], created["project"]["id"])
    assert progress["claimed"] == 1 and progress["open"] == 1

    with pytest.raises(GraphQLError) as err:
        await api.create_project(
            customer["token"],
            [{"skill": "med", "payload": {}, "requiredCapabilities": ["a,b"]}],
            name="bad",
        )
    assert err.value.code == "BAD_INPUT"
    assert await db.fetchval("SELECT count(*) FROM projects WHERE name = 'bad'") == 0


async def test_priority_class_is_a_named_level_of_priority(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    high = await api.create_project(customer["token"], tasks_of("x", 1), priorityClass="HIGH")
    state = await project_state(api, customer["token"], high["project"]["id"])
    assert (state["priority"], state["priorityClass"]) == (100, "HIGH")
    mid = await api.create_project(customer["token"], tasks_of("x", 1), priority=40)
    state = await project_state(api, customer["token"], mid["project"]["id"])
    assert state["priorityClass"] == "NORMAL"
    both = await api.create_project(
        customer["token"], tasks_of("x", 1), priority=-300, priorityClass="LOW"
    )
    state = await project_state(api, customer["token"], both["project"]["id"])
    assert (state["priority"], state["priorityClass"]) == (-300, "LOW")
    with pytest.raises(GraphQLError) as err:
        await api.create_project(
            customer["token"], tasks_of("x", 1), priority=5, priorityClass="HIGH", name="bad"
        )
    assert err.value.code == "BAD_INPUT"
    r = await api.rest(
        "POST",
        "/v1/projects",
        customer["token"],
        json={"name": "bad", "priority_class": "urgent", "tasks": tasks_of("x", 1)},
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "BAD_INPUT"
    assert await db.fetchval("SELECT count(*) FROM projects WHERE name = 'bad'") == 0
    # eff_priority orders HIGH (100) work ahead of priority-40 work.
    effs = await db.fetch("SELECT eff_priority FROM tasks ORDER BY eff_priority DESC")
    assert [r["eff_priority"] for r in effs] == [1_000_000, 400_000, -3_000_000]


# --- retries and presence -------------------------------------------------------------------


async def test_retries_stop_at_three_and_the_project_continues(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["flaky"])
    created = await api.create_project(
        customer["token"], tasks_of("flaky", 2), leaseSeconds=60, name="retry"
    )
    project_id = created["project"]["id"]
    first = await claim(api, expert["token"])
    doomed = first["task"]["id"]
    leases = [first]
    # Abandon each lease: the task is retried until its 3 retries are used up.
    while True:
        await clock.advance(61)
        got = await claim(api, expert["token"])
        if got["task"]["id"] != doomed:
            break
        leases.append(got)
    assert len(leases) == 4  # the first attempt plus 3 retries
    progress = await api.progress(customer["token"], project_id)
    assert progress == {"total": 2, "open": 0, "claimed": 1, "done": 0, "failed": 1}
    # The project continues: the other task is done normally.
    await api.submit(expert["token"], got["assignmentId"], {"ok": 1})
    progress = await api.progress(customer["token"], project_id)
    assert progress == {"total": 2, "open": 0, "claimed": 0, "done": 1, "failed": 1}
    row = await db.fetchrow(
        "SELECT status, attempts, assignment_id FROM tasks WHERE id = $1::text::uuid", doomed
    )
    assert (row["status"], row["attempts"], row["assignment_id"]) == ("failed", 4, None)
    statuses = await db.fetch(
        "SELECT status FROM assignments WHERE task_id = $1::text::uuid", doomed
    )
    assert [r["status"] for r in statuses] == ["expired"] * 4
    assert await db.fetchval("SELECT count(*) FROM payouts") == 1


async def test_presence_from_claims_and_heartbeats_and_absent_experts_lose_leases(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["p"])
    await api.create_project(customer["token"], tasks_of("p", 1), leaseSeconds=60)

    async def last_seen() -> str | None:
        data = await api.gql(
            "query($i: ID!) { expertPresence(id: $i) { lastSeenAt } }",
            {"i": expert["id"]},
            ADMIN_TOKEN,
        )
        return data["expertPresence"]["lastSeenAt"]

    assert await last_seen() is None
    got = await claim(api, expert["token"])
    seen_at_claim = await last_seen()
    assert seen_at_claim is not None
    await api.heartbeat(expert["token"], got["assignmentId"])
    assert await last_seen() > seen_at_claim
    # The expert vanishes (no claims, no heartbeats) for longer than the 60 s lease, while
    # the lease itself is still live: the sweeper takes the task back.
    # (the claim itself counts as presence too, so it is moved back with the last heartbeat)
    await db.execute(
        "UPDATE experts SET last_seen_at = now() - interval '2 minutes' WHERE id = $1::text::uuid",
        expert["id"],
    )
    await db.execute("UPDATE assignments SET claimed_at = now() - interval '2 minutes'")

    async def reopened() -> bool:
        return await db.fetchval("SELECT status FROM tasks") == "open"

    await wait_for(reopened, "the sweeper to release the absent expert's lease")
    row = await db.fetchrow("SELECT status, lease_until < now() AS ended FROM assignments")
    assert (row["status"], row["ended"]) == ("expired", True)
    assert await db.fetchval("SELECT attempts FROM tasks") == 1
