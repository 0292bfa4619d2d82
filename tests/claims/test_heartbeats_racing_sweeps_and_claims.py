"""Heartbeats racing the sweeper and rival claims, many at once (issues 17 and 19).

A heartbeat extends the lease on the assignment row alone while the task row's lease, a lower
bound, is far enough away (test_heartbeat_lease_bound.py); the sweeper and the claim's takeover
read the task row's bound first and must recheck the assignment's lease on the locked rows. Here
every expert heartbeats at the moment the task rows' bounds have passed but their leases have
not, while sweeps and rivals' claims run at the same time: nobody loses a claim. Then, past the
leases, the same crowd again: every heartbeat is a conflict, each task goes to exactly one
rival, and each is paid once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from taskroute.db.pool import Database
from taskroute.resolvers.jobs.sweeper import sweep_once

from ..clock import DbClock
from ..helpers import Api, GraphQLError, tasks_of, wait_for

LEASE = 100
EXPERTS = 24


async def _beat(api: Api, token: str, assignment_id: str) -> str:
    try:
        await api.heartbeat(token, assignment_id)
    except GraphQLError as exc:
        return exc.code
    return "extended"


async def _sweeps(db: Database, n: int) -> int:
    """`n` sweeps at once (the advisory lock lets one run at a time; the others skip)."""
    return sum(await asyncio.gather(*(sweep_once(db) for _ in range(n))))


async def _active_per_task(db: asyncpg.Connection) -> dict[str, int]:
    rows = await db.fetch(
        "SELECT task_id::text, count(*) AS n FROM assignments WHERE status = 'active'"
        " GROUP BY task_id"
    )
    return {r["task_id"]: r["n"] for r in rows}


async def test_heartbeats_race_sweeps_and_rival_claims_without_losing_or_doubling_a_claim(
    api: Api, db: asyncpg.Connection, clock: DbClock, jobs_db: Database
) -> None:
    customer = await api.create_customer()
    holders = [await api.create_expert(["grading"], f"holder{i}") for i in range(EXPERTS)]
    rivals = [await api.create_expert(["grading"], f"rival{i}") for i in range(EXPERTS)]
    await api.create_project(customer["token"], tasks_of("grading", EXPERTS), leaseSeconds=LEASE)
    claims: list[dict[str, Any]] = []
    for h in holders:
        claim = await api.claim(h["token"])
        assert claim is not None
        claims.append(claim)
    assert len({c["task"]["id"] for c in claims}) == EXPERTS

    # 10 s in, a heartbeat moves the assignment alone: the task rows keep the claim's end.
    await clock.advance(10)
    beats = await asyncio.gather(
        *(_beat(api, h["token"], c["assignmentId"]) for h, c in zip(holders, claims, strict=True))
    )
    assert beats == ["extended"] * EXPERTS
    assert await db.fetchval(
        "SELECT count(*) FROM assignments a JOIN tasks t ON t.id = a.task_id"
        " WHERE a.status = 'active' AND a.lease_until > t.lease_until"
    ) == EXPERTS  # fmt: skip

    # Past every task row's bound, inside every lease: heartbeats, sweeps and rivals at once.
    await clock.advance(LEASE - 6)
    beats_and_more = await asyncio.gather(
        *(_beat(api, h["token"], c["assignmentId"]) for h, c in zip(holders, claims, strict=True)),
        *(api.claim(r["token"]) for r in rivals),
        _sweeps(jobs_db, 6),
    )
    beats, taken, swept = (
        beats_and_more[:EXPERTS],
        beats_and_more[EXPERTS : 2 * EXPERTS],
        beats_and_more[-1],
    )
    assert beats == ["extended"] * EXPERTS
    assert taken == [None] * EXPERTS  # nothing was free to take
    assert swept == 0
    held = await db.fetch(
        "SELECT a.id::text AS id FROM assignments a WHERE a.status = 'active' ORDER BY 1"
    )
    assert [r["id"] for r in held] == sorted(c["assignmentId"] for c in claims)

    # Past every lease: the holders' heartbeats are conflicts; each task goes to one rival.
    await clock.advance(LEASE + 1)
    outcome = await asyncio.gather(
        *(_beat(api, h["token"], c["assignmentId"]) for h, c in zip(holders, claims, strict=True)),
        *(api.claim(r["token"]) for r in rivals),
        _sweeps(jobs_db, 6),
    )
    beats, taken = outcome[:EXPERTS], list(outcome[EXPERTS : 2 * EXPERTS])
    assert set(beats) == {"LEASE_EXPIRED"}, beats
    # A claim skips rows others hold locked (a sweep holds every expired row it releases
    # until it commits, then announces them), so in the crowd a rival may find nothing;
    # asked again, it finds a task, and no task is held twice meanwhile.
    assert set((await _active_per_task(db)).values()) <= {1}
    for i, rival in enumerate(rivals):
        if taken[i] is None:
            taken[i] = await wait_for(
                lambda r=rival: api.claim(r["token"]), "a rival to find an expired task"
            )
    got = [t for t in taken if t is not None]
    assert len(got) == EXPERTS
    assert sorted(t["task"]["id"] for t in got) == sorted(c["task"]["id"] for c in claims)
    assert set((await _active_per_task(db)).values()) == {1}
    for rival, t in zip(rivals, taken, strict=True):
        assert t is not None
        await api.submit(rival["token"], t["assignmentId"], {"label": 1})
    # Late submits by the holders are refused and pay nothing.
    for h, c in zip(holders, claims, strict=True):
        try:
            await api.submit(h["token"], c["assignmentId"], {"label": 0})
        except GraphQLError as exc:
            assert exc.code == "LEASE_EXPIRED"
        else:
            raise AssertionError("a submit after the lease ended was accepted")
    assert await db.fetchval("SELECT count(*) FROM payouts") == EXPERTS
    assert await db.fetchval(
        "SELECT count(*) FROM (SELECT task_id FROM assignments WHERE status = 'submitted'"
        " GROUP BY task_id HAVING count(*) > 1) d"
    ) == 0  # fmt: skip
    assert await db.fetchval(
        "SELECT count(*) FROM assignments WHERE status = 'expired'"
    ) == EXPERTS  # fmt: skip
