"""The routing policy of issue 17: scarcity as a verdict, boosts only for a class short of a
saturated skill, deadline bumps from the forecast.

Through the public API of a real server whose routing job runs on a short interval; the
rows the job wrote are then checked in the database.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from .helpers import ADMIN_TOKEN, Api, InProcessServer, settings_for, tasks_of, wait_for
from .test_routing import claim, project_state

FAIR_THRESHOLD = 50_000_000  # routing_fair_threshold(): boosted rows sit at or above it


@contextlib.asynccontextmanager
async def server(database_url: str, tmp_path: Path, **overrides: Any) -> AsyncIterator[Api]:
    settings = settings_for(database_url, tmp_path, routing_interval=0.2, **overrides)
    srv = InProcessServer(settings)
    await srv.start()
    try:
        async with Api(srv.url) as client:
            yield client
    finally:
        await srv.stop()


def bump_server(database_url: str, tmp_path: Path) -> contextlib.AbstractAsyncContextManager[Api]:
    """Deadline bumps alone: no fairness shares, and a realised-rate window (an hour) longer
    than any test, so the forecast decides."""
    return server(
        database_url,
        tmp_path,
        routing_forecast_window=3600.0,
        routing_class_shares="high=0,normal=0,low=0",
    )


async def scarcity(api: Api) -> dict[str, dict[str, Any]]:
    data = await api.gql(
        "{ skillScarcity { skill activeExperts openBacklog backlogSeconds scarce updatedAt } }",
        token=ADMIN_TOKEN,
    )
    return {r["skill"]: r for r in data["skillScarcity"]}


async def measured_after(api: Api, db: asyncpg.Connection, backlog: dict[str, int]) -> None:
    """Wait for a routing run that started after this call and saw these open backlogs."""
    since = (await db.fetchval("SELECT now()")).isoformat()

    async def seen() -> bool:
        s = await scarcity(api)
        return all(
            k in s and s[k]["openBacklog"] == n and s[k]["updatedAt"] > since
            for k, n in backlog.items()
        )

    await wait_for(seen, f"the routing job to measure {backlog}")


async def test_scarcity_is_a_verdict_priority_decides_between_well_staffed_skills(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    async with server(database_url, tmp_path, routing_class_shares="low=0") as api:
        customer = await api.create_customer()
        both = await api.create_expert(["a", "b", "rare"], name="both")
        for i in range(3):
            await api.create_expert(["a"], name=f"a{i}")
        for i in range(5):
            await api.create_expert(["b"], name=f"b{i}")
        # `a` has fewer other holders per open task (3/4) than `b` (5/4): the old exact
        # ranking sent `both` to the LOW work of `a`. Neither is scarce (the average is 8/8),
        # so the HIGH work comes first.
        await api.create_project(customer["token"], tasks_of("a", 4), priorityClass="LOW")
        high = await api.create_project(customer["token"], tasks_of("b", 4), priorityClass="HIGH")
        await measured_after(api, db, {"a": 4, "b": 4})
        s = await scarcity(api)
        assert (s["a"]["scarce"], s["b"]["scarce"]) == (False, False)
        got = await claim(api, both["token"])
        assert got["task"]["projectId"] == high["project"]["id"]
        await api.submit(both["token"], got["assignmentId"], {"ok": 1})

        # A skill only `both` holds gets backlog: scarce (no other holder), so its LOW task
        # comes before the HIGH work of `b` that five others can do.
        rare = await api.create_project(customer["token"], tasks_of("rare", 1), priorityClass="LOW")
        await measured_after(api, db, {"rare": 1, "b": 3})
        s = await scarcity(api)
        assert s["rare"]["scarce"] and not s["b"]["scarce"] and not s["a"]["scarce"]
        got = await claim(api, both["token"])
        assert got["task"]["projectId"] == rare["project"]["id"]
        # Naming skills keeps plain priority order among them.
        await api.submit(both["token"], got["assignmentId"], {"ok": 1})
        named = await claim(api, both["token"], skills=["a", "b"])
        assert named["task"]["projectId"] == high["project"]["id"]
    rows = await db.fetch(
        "SELECT t.skill FROM assignments a JOIN tasks t ON t.id = a.task_id"
        " WHERE a.expert_id = $1::text::uuid ORDER BY a.claimed_at",
        both["id"],
    )
    assert [r["skill"] for r in rows] == ["b", "rare", "b"]


async def test_between_scarce_skills_the_one_that_drains_last_comes_first(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    async with server(database_url, tmp_path, routing_class_shares="low=0") as api:
        customer = await api.create_customer()
        both = await api.create_expert(["x", "y"], name="both")
        await api.create_expert(["x"], name="x1")
        for i in range(8):
            await api.create_expert(["c"], name=f"c{i}")
        await api.create_project(customer["token"], tasks_of("c", 8), priorityClass="LOW")
        # `x`: 6 tasks for its 2 holders (3 each), `y`: 1 task for `both` alone. Both are
        # scarce (other holders per task 1/6 and 0, against 8/15 over all skills); priority
        # alone would send `both` to the HIGH task of `y`, and `x` would drain last.
        low = await api.create_project(customer["token"], tasks_of("x", 6), priorityClass="LOW")
        high = await api.create_project(customer["token"], tasks_of("y", 1), priorityClass="HIGH")
        await measured_after(api, db, {"x": 6, "y": 1, "c": 8})
        s = await scarcity(api)
        assert s["x"]["scarce"] and s["y"]["scarce"] and not s["c"]["scarce"]
        got = await claim(api, both["token"])
        assert got["task"]["projectId"] == low["project"]["id"]
        # Naming skills keeps plain priority order among them.
        await api.submit(both["token"], got["assignmentId"], {"ok": 1})
        named = await claim(api, both["token"], skills=["x", "y"])
        assert named["task"]["projectId"] == high["project"]["id"]


async def test_no_boost_unless_a_class_is_short_of_a_saturated_skill(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    shares = "high=0.5,normal=0.25,low=0.1"
    async with server(
        database_url, tmp_path, routing_fair_window=120.0, routing_class_shares=shares
    ) as api:
        customer = await api.create_customer()
        experts = [await api.create_expert(["tag"], name=f"e{i}") for i in range(3)]
        await api.create_project(customer["token"], tasks_of("tag", 6), priorityClass="HIGH")
        for i in range(6):  # six claims of the skill inside the window, all HIGH
            got = await claim(api, experts[i % 3]["token"])
            await api.submit(experts[i % 3]["token"], got["assignmentId"], {"ok": 1})
        # The LOW class now has open work and none of the skill's claims (0 < 10%), but the
        # skill keeps up: one open task against six claims in the window. Not starving.
        low = await api.create_project(customer["token"], tasks_of("tag", 1), priorityClass="LOW")
        await measured_after(api, db, {"tag": 1})
        await measured_after(api, db, {"tag": 1})  # and one more run, to be sure
        boosted = await db.fetchval(
            "SELECT count(*) FROM tasks WHERE eff_priority >= $1", FAIR_THRESHOLD
        )
        assert boosted == 0
        # Control: more HIGH work than the window's claims arrives, the skill is saturated,
        # and the LOW class, still short, gets its task boosted ahead of it.
        await api.create_project(customer["token"], tasks_of("tag", 20), priorityClass="HIGH")

        async def low_boosted() -> bool:
            return bool(
                await db.fetchval(
                    "SELECT eff_priority >= $2 FROM tasks WHERE project_id = $1::text::uuid",
                    low["project"]["id"],
                    FAIR_THRESHOLD,
                )
            )

        await wait_for(low_boosted, "the boost of the starving LOW class")
        got = await claim(api, experts[0]["token"])
        assert got["task"]["projectId"] == low["project"]["id"]
    # Only the LOW task was ever boosted.
    assert (
        await db.fetchval("SELECT count(*) FROM tasks WHERE eff_priority >= $1", FAIR_THRESHOLD)
        == 1
    )


async def test_forecast_bumps_a_young_project_that_will_miss_its_deadline(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    """No realised rate yet (the project is younger than the hour-long window): the bump
    comes from the forecast, which has measured the expert's pace on other work."""
    async with bump_server(database_url, tmp_path) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["ocr"])
        await api.create_project(customer["token"], tasks_of("ocr", 4), name="warmup")
        for _ in range(3):  # the forecast's pace: three measured cycles in `ocr`
            got = await claim(api, expert["token"])
            await api.submit(expert["token"], got["assignmentId"], {"ok": 1})
        # The expert keeps working (a live lease keeps them present to the forecast from
        # before the project exists, so no run of the job sees nobody at work).
        await claim(api, expert["token"])
        # 400 tasks for one expert due in 3 seconds: whatever their pace, it will miss.
        due = datetime.now(UTC) + timedelta(seconds=3)
        late = await api.create_project(
            customer["token"], tasks_of("ocr", 400), deadline=due.isoformat(), name="late"
        )
        late_id = late["project"]["id"]

        async def bumped() -> bool:
            state = await project_state(api, customer["token"], late_id)
            return state["routing"]["deadlineBumped"]

        await wait_for(bumped, "the forecast's bump")
        state = await project_state(api, customer["token"], late_id)
    events = state["routing"]["events"]
    assert [e["kind"] for e in events] == ["bump"]
    # The forecast's ETA is recorded, and it is past the deadline.
    finish = datetime.fromisoformat(events[0]["forecastFinish"])
    assert finish > datetime.fromisoformat(events[0]["deadline"])
    row = await db.fetchrow(
        "SELECT deadline_bumped, (SELECT min(eff_priority) FROM tasks t WHERE t.project_id = p.id)"
        " AS eff FROM projects p WHERE id = $1::text::uuid",
        late_id,
    )
    assert row["deadline_bumped"] and row["eff"] >= 100 * 10000  # lifted above its class


async def test_bump_lifts_a_late_project_ahead_in_its_scarce_skills_only(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    """A bumped LOW project rises one class level where work drains fast, but in a scarce
    skill (served strictly by priority, slowly) its tasks go ahead of every unbumped row:
    one level would leave them behind the HIGH backlog there until the deadline passed."""
    async with bump_server(database_url, tmp_path) as api:
        customer = await api.create_customer()
        spec = await api.create_expert(["rare", "common"], name="spec")
        common = [await api.create_expert(["common"], name=f"c{i}") for i in range(3)]
        await api.create_project(
            customer["token"], tasks_of("rare", 4) + tasks_of("common", 4), name="warmup"
        )
        held = []
        for expert, skill in ((spec, "rare"), (common[0], "common")):
            for _ in range(3):  # the forecast's pace in both skills (its evidence)
                got = await claim(api, expert["token"], skills=[skill])
                await api.submit(expert["token"], got["assignmentId"], {"ok": 1})
            # a live lease keeps the expert present to the forecast while it decides
            held.append(await claim(api, expert["token"], skills=[skill]))
        high = await api.create_project(
            customer["token"],
            tasks_of("rare", 2) + tasks_of("common", 2),
            priorityClass="HIGH",
            name="high",
        )
        # 300 tasks of a skill one expert holds, due in 3 seconds: it will miss.
        due = datetime.now(UTC) + timedelta(seconds=3)
        late = await api.create_project(
            customer["token"],
            tasks_of("rare", 300) + tasks_of("common", 2),
            priorityClass="LOW",
            deadline=due.isoformat(),
            name="late",
        )
        late_id = late["project"]["id"]

        async def lifted() -> bool:
            # bumped, and `rare` measured scarce with the late project's backlog in it
            s = await scarcity(api)
            state = await project_state(api, customer["token"], late_id)
            return bool(
                state["routing"]["deadlineBumped"]
                and s.get("rare", {}).get("scarce")
                and s["rare"]["openBacklog"] >= 300
                and not s.get("common", {}).get("scarce", True)
                and await db.fetchval(
                    "SELECT min(eff_priority) FROM tasks"
                    " WHERE project_id = $1::text::uuid AND skill = 'rare'",
                    late_id,
                )
                > 200 * 10000
            )

        await wait_for(lifted, "the bump and its lift in the scarce skill")
        for expert, lease in zip((spec, common[0]), held, strict=True):
            await api.submit(expert["token"], lease["assignmentId"], {"ok": 1})
        # In `rare` the late LOW project now comes before the HIGH project's tasks ...
        got = await claim(api, spec["token"])
        assert (got["task"]["skill"], got["task"]["projectId"]) == ("rare", late_id)
        # ... while in `common`, which three others hold, the bump is one class level
        # (LOW -> NORMAL): the HIGH project's tasks still come first.
        for expert in common[1:]:
            got = await claim(api, expert["token"])
            assert got["task"]["projectId"] == high["project"]["id"]
        got = await claim(api, common[0]["token"])
        assert got["task"]["projectId"] == late_id
