"""Fairness inside a class: two NORMAL projects (priorities 10 and 0) in one saturated skill.

The integer priority alone is a strict order inside a class: the priority-10 flood would take
every claim for as long as it lasts. The routing job lifts the priority-0 project's next tasks
to the top of the class whenever it got less than its least share of the class's claims over
the fairness window (TASKROUTE_ROUTING_PROJECT_SHARE split among the class's projects there).

The test drives the routing job and the database clock itself (as the class-share tests in
test_scarcity_shares_scope_and_presence.py): one pass, a phase of claims made one after
another (each submitted before the next), then the clock moves a phase on; the window (2.5
phases) holds exactly the two phases before a pass.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg

from taskroute.db.pool import Database, create_pool
from taskroute.resolvers.jobs.routing import RoutingPolicy, routing_once

from ..clock import DbClock
from ..helpers import CLAIM, Api, InProcessServer, settings_for, tasks_of, wait_for

PHASE = 600.0
WINDOW = 2.5 * PHASE
PER_PHASE = 20
PHASES = 8


@contextlib.asynccontextmanager
async def jobless_world(
    database_url: str, tmp_path: Path, project_share: float
) -> AsyncIterator[tuple[Api, Database, RoutingPolicy]]:
    """A server whose own routing job runs only at its start; the test runs the passes."""
    settings = settings_for(
        database_url, tmp_path, routing_interval=3600.0, routing_fair_window=WINDOW,
        routing_project_share=project_share,
    )  # fmt: skip
    srv = InProcessServer(settings)
    await srv.start()
    pool = await create_pool(database_url, 1, 2)
    try:
        async with Api(srv.url) as client:
            yield client, Database(pool, 10.0), RoutingPolicy.from_settings(settings)
    finally:
        await pool.close()
        await srv.stop()


async def _flood(database_url: str, tmp_path: Path, clock: DbClock, share: float) -> list[int]:
    """The priority-0 project's claims in each phase of PER_PHASE claims."""
    async with jobless_world(database_url, tmp_path, share) as (api, jobs, policy):
        customer = await api.create_customer()
        experts = [await api.create_expert(["label"], name=f"e{i}") for i in range(3)]
        await api.create_project(customer["token"], tasks_of("label", 400), priority=10, name="p10")
        low = await api.create_project(
            customer["token"], tasks_of("label", 100), priority=0, name="p0"
        )
        low_id = low["project"]["id"]

        async def routing_pass() -> bool:
            # False only while the server's start-up pass holds the job's lock.
            return (await routing_once(jobs, policy)).ran

        counts = []
        for _ in range(PHASES):
            await wait_for(routing_pass, "a routing pass")
            mine = 0
            for i in range(PER_PHASE):
                token = experts[i % len(experts)]["token"]
                got = (await api.gql(CLAIM, {"s": None, "p": None}, token))["claimNextTask"]
                assert got is not None, "the backlog must outlast the run (saturation)"
                mine += got["task"]["projectId"] == low_id
                await api.submit(token, got["assignmentId"], {"ok": True})
            counts.append(mine)
            await clock.advance(PHASE)
        return counts


async def test_a_lower_priority_project_of_the_same_class_gets_its_least_share(
    database_url: str, tmp_path: Path, clock: DbClock, db: asyncpg.Connection
) -> None:
    low = await _flood(database_url, tmp_path, clock, 0.2)
    # The bound: the first pass that sees a window of claims (the second: the first saw none)
    # lifts the project, so its first claims come in the second phase.
    assert low[0] == 0 and low[1] > 0, f"priority-0 claims per phase {low}"
    # The share: every pass from the second on owes it ceil(0.2 / 2 x (claims in the window
    # + 1)) = ceil(0.1 x 41) = 5 claims over the window's two phases and its own.
    for i in range(2, PHASES):
        assert sum(low[i - 2 : i + 1]) >= math.ceil(0.1 * (2 * PER_PHASE + 1)), low
    # Priority still orders the class: the priority-10 project gets most of the claims.
    assert sum(low) / (PHASES * PER_PHASE) <= 0.3, f"priority-0 claims per phase {low}"
    # Both still have backlog: this was saturation, not the flood running dry.
    left = await db.fetch(
        "SELECT project_id, count(*) FROM tasks WHERE status = 'open' GROUP BY project_id"
    )
    assert len(left) == 2


async def test_without_a_project_share_priority_is_a_strict_order_inside_a_class(
    database_url: str, tmp_path: Path, clock: DbClock
) -> None:
    """The test above can fail: the same run without the share gives the project nothing."""
    assert await _flood(database_url, tmp_path, clock, 0.0) == [0] * PHASES
