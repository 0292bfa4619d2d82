"""A heartbeat extends the lease on the assignment row alone (issue 19: a HOT update, no new
task row version, no index entries, no task-count trigger) while the task row's lease, a lower
bound of the lease, is more than half a lease away; then it moves both. The lease is what the
heartbeat answered: between the task row's bound and the answered end the claim stays the
expert's (no takeover, no sweep; heartbeat and submit work), and after that end it
expires as before."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
import pytest

from taskroute.db.queries import Q

from ..clock import DbClock
from ..helpers import Api, GraphQLError, tasks_of, wait_for

LEASE = 100


async def bounds(db: asyncpg.Connection, assignment_id: str) -> tuple[datetime, datetime]:
    row = await db.fetchrow(
        "SELECT t.lease_until AS task, a.lease_until AS lease FROM assignments a"
        " JOIN tasks t ON t.id = a.task_id WHERE a.id = $1::uuid",
        assignment_id,
    )
    assert row is not None
    return row["task"], row["lease"]


async def claimed_and_beaten(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """slow claims the one task and heartbeats 10 s later; other would take it. The heartbeat
    moved the assignment alone: the task row keeps the claim's end, 10 s short of the lease."""
    customer = await api.create_customer()
    slow = await api.create_expert(["grading"], "slow")
    other = await api.create_expert(["grading"], "other")
    await api.create_project(customer["token"], tasks_of("grading", 1), leaseSeconds=LEASE)
    claim = await api.claim(slow["token"])
    assert claim is not None
    await clock.advance(10)
    beat = await api.heartbeat(slow["token"], claim["assignmentId"])
    task_bound, lease = await bounds(db, claim["assignmentId"])
    assert datetime.fromisoformat(beat["leaseUntil"]) == lease
    assert (lease - task_bound).total_seconds() == pytest.approx(10, abs=1)
    return slow, other, claim


async def test_the_lease_holds_past_the_task_rows_bound(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    slow, other, claim = await claimed_and_beaten(api, db, clock)
    aid = claim["assignmentId"]

    await clock.advance(LEASE - 5)  # past the task row's bound, 5 s before the lease ends
    assert await api.claim(other["token"]) is None  # not taken over
    assert await db.fetch(Q["leases_release_expired"], 100, None) == []  # not swept
    assert await db.fetchval("SELECT status FROM tasks") == "claimed"

    # Due now (the bound is past): this heartbeat moves both rows.
    beat = await api.heartbeat(slow["token"], aid)
    task_bound, lease = await bounds(db, aid)
    assert task_bound == lease == datetime.fromisoformat(beat["leaseUntil"])
    receipt = await api.submit(slow["token"], aid, {"done": 1})
    assert receipt["assignmentId"] == aid
    assert await db.fetchval("SELECT count(*) FROM payouts") == 1


async def test_a_lease_extended_on_the_assignment_alone_still_expires(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    slow, other, claim = await claimed_and_beaten(api, db, clock)
    aid = claim["assignmentId"]
    await clock.advance(LEASE + 1)  # past the lease the heartbeat gave
    with pytest.raises(GraphQLError) as err:
        await api.heartbeat(slow["token"], aid)
    assert err.value.code == "LEASE_EXPIRED"
    with pytest.raises(GraphQLError) as err:
        await api.submit(slow["token"], aid, {"late": True})
    assert err.value.code == "LEASE_EXPIRED"
    # taken over by a claim, or returned by the sweeper (every 0.2 s here) and claimed
    taken = await wait_for(lambda: api.claim(other["token"]), "the expired task to be claimable")
    assert taken["task"]["id"] == claim["task"]["id"]
    await api.submit(other["token"], taken["assignmentId"], {"on": "time"})
    assert await db.fetchval("SELECT count(*) FROM payouts") == 1
    status = "SELECT status FROM assignments WHERE id = $1::uuid"
    assert await db.fetchval(status, aid) == "expired"
