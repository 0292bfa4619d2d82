"""Presence from the heartbeat: experts who closed their tabs, each still holding a task, stop
counting as working two heartbeat intervals after their last heartbeat (an interval is a third
of the project's heartbeat timeout: 300 s by default, so 200 s), in the forecast and in the
routing job's scarcity, while their leases still run and before the sweeper's timeout ends the
claims.
"""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from taskroute.db.pool import Database
from taskroute.resolvers.jobs.routing import RoutingPolicy, routing_once

from ..clock import DbClock
from ..forecast_helpers import add_history, db_now, forecast, history_project, seen
from ..helpers import ADMIN_TOKEN, Api, tasks_of, wait_for


async def _scarcity(api: Api) -> dict[str, int]:
    data = await api.gql("{ skillScarcity { skill activeExperts } }", token=ADMIN_TOKEN)
    return {r["skill"]: r["activeExperts"] for r in data["skillScarcity"]}


async def test_silent_holders_are_not_working_though_their_leases_live(
    api: Api, db: asyncpg.Connection, clock: DbClock, jobs_db: Database
) -> None:
    customer = (await api.create_customer())["token"]
    hist = await history_project(api, customer, "grading", 18)
    experts = []
    for name in ("ada", "bob", "cy"):
        e = await api.create_expert(["grading"], name=name)
        await add_history(db, hist, e["id"], "grading", [5, 15, 25, 35, 45, 55])
        await seen(db, e["id"], 1)
        experts.append(e)
    now = await db_now(db)
    pid = (
        await api.create_project(
            customer, tasks_of("grading", 6), deadline=(now + timedelta(hours=3)).isoformat()
        )
    )["project"]["id"]
    held = [await api.claim(e["token"]) for e in experts]
    for e, c in zip(experts, held, strict=True):
        assert c is not None
        await api.heartbeat(e["token"], c["assignmentId"])

    f = await forecast(api, customer, pid)
    assert f["onTrack"] and f["bySkill"][0]["activeExperts"] == 3, f

    # Within two intervals (200 s) of their last heartbeat they still work.
    await clock.advance(150)
    f = await forecast(api, customer, pid)
    assert f["onTrack"] and f["bySkill"][0]["activeExperts"] == 3, f

    # Past two intervals, before the heartbeat timeout (300 s): nobody present holds the skill
    # and the project is at risk ...
    await clock.advance(60)
    f = await forecast(api, customer, pid)
    (s,) = f["bySkill"]
    assert s["activeExperts"] == 0 and s["inFlight"] == 3, f
    assert not f["onTrack"] and f["eta"] is None, f
    assert "no present expert holds `grading`" in s["reason"], f
    # ... while every lease is held: the sweeper's timeout has not passed.
    assert await db.fetchval(
        "SELECT count(*) FROM assignments WHERE id = ANY($1::uuid[]) AND status = 'active'"
        " AND lease_until > taskroute_now()",
        [c["assignmentId"] for c in held],
    ) == 3  # fmt: skip

    # The routing job counts nobody active in the skill either (scarcity reads presence).
    async def routed() -> bool:
        return (await routing_once(jobs_db, RoutingPolicy())).ran

    await wait_for(routed, "a routing pass")
    assert (await _scarcity(api)).get("grading") == 0

    # A heartbeat brings its expert back.
    await api.heartbeat(experts[2]["token"], held[2]["assignmentId"])
    f = await forecast(api, customer, pid)
    assert f["bySkill"][0]["activeExperts"] == 1, f
