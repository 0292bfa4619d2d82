"""Liveness apart from the lease (issue 17): an expert silent past the project's heartbeat
timeout loses the claim while the lease still runs; one who heartbeats keeps it.

The clock is the test's: instead of waiting five minutes, the test moves the silent expert's
`last_seen_at` and `claimed_at` back in the database, then runs one sweep itself
(`sweep_once`). The server's own sweeper is set to a one-hour interval so it cannot race the
sweep the test triggers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from taskroute.db.pool import Database
from taskroute.resolvers.jobs.sweeper import sweep_once

from ..helpers import Api, GraphQLError, serving, settings_for, tasks_of


@pytest_asyncio.fixture
async def quiet_api(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    async with serving(settings_for(database_url, tmp_path, sweep_interval=3600)) as client:
        yield client


async def _silence(db: asyncpg.Connection, expert_id: str, seconds: float) -> None:
    """The expert was last heard from `seconds` ago, and claimed then too."""
    await db.execute(
        "UPDATE experts SET last_seen_at = now() - make_interval(secs => $2) WHERE id = $1",
        expert_id,
        seconds,
    )
    await db.execute(
        "UPDATE assignments SET claimed_at = now() - make_interval(secs => $2)"
        " WHERE expert_id = $1 AND status = 'active'",
        expert_id,
        seconds,
    )


async def _lease(db: asyncpg.Connection, assignment_id: str) -> tuple[str, datetime, datetime]:
    row = await db.fetchrow(
        "SELECT a.status, a.lease_until, now() AS now_ FROM assignments a WHERE a.id = $1",
        assignment_id,
    )
    assert row is not None
    return row["status"], row["lease_until"], row["now_"]


async def test_silent_expert_loses_claim_before_lease_ends(
    quiet_api: Api, db: asyncpg.Connection, jobs_db: Database
) -> None:
    api = quiet_api
    customer = (await api.create_customer())["token"]
    # A 30-minute lease, the default 5-minute heartbeat timeout.
    created = await api.create_project(customer, tasks_of("grading", 2), leaseSeconds=1800)
    pid = created["project"]["id"]
    project = await db.fetchrow("SELECT * FROM projects WHERE id = $1", pid)
    assert project["heartbeat_timeout_seconds"] == 300

    silent = await api.create_expert(["grading"], name="silent")
    steady = await api.create_expert(["grading"], name="steady")
    late = await api.create_expert(["grading"], name="late")
    c_silent = await api.claim(silent["token"])
    c_steady = await api.claim(steady["token"])
    assert c_silent is not None and c_steady is not None

    # Both went quiet six minutes ago; `steady` heartbeats now, `silent` does not.
    await _silence(db, silent["id"], 360)
    await _silence(db, steady["id"], 360)
    await api.heartbeat(steady["token"], c_steady["assignmentId"])

    status, lease_until, now = await _lease(db, c_silent["assignmentId"])
    assert status == "active" and lease_until - now > timedelta(minutes=20)

    assert await sweep_once(jobs_db) == 1

    # The silent expert's claim is back in the pool, counted as an attempt ...
    status, lease_until, now = await _lease(db, c_silent["assignmentId"])
    assert status == "expired" and lease_until < now
    task = await db.fetchrow(
        "SELECT status, attempts, assignment_id FROM tasks WHERE id = $1", c_silent["task"]["id"]
    )
    assert (task["status"], task["attempts"], task["assignment_id"]) == ("open", 1, None)
    with pytest.raises(GraphQLError) as err:
        await api.heartbeat(silent["token"], c_silent["assignmentId"])
    assert err.value.code == "LEASE_EXPIRED"
    # ... and another expert can take it.
    c_late = await api.claim(late["token"])
    assert c_late is not None and c_late["task"]["id"] == c_silent["task"]["id"]

    # The one who heartbeated keeps the claim, and can still submit it.
    status, _, _ = await _lease(db, c_steady["assignmentId"])
    assert status == "active"
    receipt = await api.submit(steady["token"], c_steady["assignmentId"], {"ok": True})
    assert receipt["assignmentId"] == c_steady["assignmentId"]


async def test_timeout_is_per_project_and_lease_stays_the_bound(
    quiet_api: Api, db: asyncpg.Connection, jobs_db: Database
) -> None:
    api = quiet_api
    customer = (await api.create_customer())["token"]
    patient = (
        await api.create_project(
            customer, tasks_of("essay", 1), name="patient", heartbeatTimeoutSeconds=1200
        )
    )["project"]["id"]
    short_lease = (
        await api.create_project(customer, tasks_of("chart", 1), name="short", leaseSeconds=120)
    )["project"]["id"]
    writer = await api.create_expert(["essay"], name="writer")
    drawer = await api.create_expert(["chart"], name="drawer")
    c_writer = await api.claim(writer["token"])
    c_drawer = await api.claim(drawer["token"])
    assert c_writer["task"]["projectId"] == patient
    assert c_drawer["task"]["projectId"] == short_lease

    # Ten silent minutes: within the essay project's 20-minute timeout. Three silent minutes
    # in the chart project: past its 2-minute lease, which caps the default 5-minute timeout.
    await _silence(db, writer["id"], 600)
    await _silence(db, drawer["id"], 180)
    assert await sweep_once(jobs_db) == 1
    assert (await _lease(db, c_writer["assignmentId"]))[0] == "active"
    assert (await _lease(db, c_drawer["assignmentId"]))[0] == "expired"

    # Past 20 minutes the essay claim goes too.
    await _silence(db, writer["id"], 1260)
    assert await sweep_once(jobs_db) == 1
    assert (await _lease(db, c_writer["assignmentId"]))[0] == "expired"


@pytest.mark.parametrize("bad", [0, -5, 7 * 86400 + 1])
async def test_heartbeat_timeout_bad_input(
    quiet_api: Api, db: asyncpg.Connection, bad: int
) -> None:
    customer = (await quiet_api.create_customer())["token"]
    with pytest.raises(GraphQLError) as err:
        await quiet_api.create_project(
            customer, tasks_of("grading", 1), heartbeatTimeoutSeconds=bad
        )
    assert err.value.code == "BAD_INPUT"
    assert "heartbeat_timeout_seconds" in err.value.errors[0]["message"]
    # REST refuses the same values with the same message.
    r = await quiet_api.rest(
        "POST",
        "/v1/projects",
        customer,
        json={"name": "x", "heartbeat_timeout_seconds": bad, "tasks": []},
    )
    assert r.status_code == 422, r.text
    assert "heartbeat_timeout_seconds" in r.json()["error"]["message"]
    assert await db.fetchval("SELECT count(*) FROM projects") == 0
