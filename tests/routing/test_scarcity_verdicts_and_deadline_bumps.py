"""The routing policy of issue 17: scarcity as a verdict, boosts only for a class short of a
saturated skill, deadline bumps from the forecast.

Through the public API of a real server whose routing job runs on a short interval; the
rows the job wrote are then checked in the database.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from taskroute.db.pool import Database
from taskroute.resolvers.jobs.routing import RoutingPolicy, routing_once

from ..clock import DbClock
from ..helpers import ADMIN_TOKEN, Api, serving, settings_for, tasks_of, wait_for
from .test_scarcity_shares_scope_and_presence import claim, jobless_world, project_state

FAIR_THRESHOLD = 50_000_000  # routing_fair_threshold(): boosted rows sit at or above it


@contextlib.asynccontextmanager
async def server(database_url: str, tmp_path: Path, **overrides: Any) -> AsyncIterator[Api]:
    settings = settings_for(database_url, tmp_path, routing_interval=0.2, **overrides)
    async with serving(settings) as client:
        yield client


def bump_server(database_url: str, tmp_path: Path) -> contextlib.AbstractAsyncContextManager[Api]:
    """Deadline bumps alone: no fairness shares, and a realised-rate window (an hour) longer
    than any test, so the forecast decides."""
    return server(
        database_url,
        tmp_path,
        routing_forecast_window=3600.0,
        routing_class_shares="high=0,normal=0,low=0",
    )


def clocked(
    database_url: str, tmp_path: Path
) -> contextlib.AbstractAsyncContextManager[tuple[Api, Database, RoutingPolicy]]:
    """Deadline bumps alone on the database clock (tests/clock.py): the server's own job runs
    only at its start and the test runs the passes, so paces, the skills' realised rates and
    the time left are what the test set, whatever the machine's speed."""
    return jobless_world(
        database_url,
        tmp_path,
        routing_forecast_window=3600.0,
        routing_class_shares="high=0,normal=0,low=0",
    )


async def routing_passes(jobs: Database, policy: RoutingPolicy, n: int = 2) -> None:
    """`n` passes of the job (the second lifts a bumped project in a skill the first measured
    scarce). A pass is skipped only while the server's start-up pass holds the lock."""
    for _ in range(n):

        async def ran() -> bool:
            return (await routing_once(jobs, policy)).ran

        await wait_for(ran, "a routing pass")


async def paced(
    api: Api, clock: DbClock, pairs: list[tuple[dict[str, Any], str]]
) -> list[dict[str, Any]]:
    """Each (expert, skill) does three tasks of 100 s on the database clock (the forecast's
    pace and evidence; the skill's realised rate: 3 per 300 s per expert), then holds one
    more claim (a live lease keeps them present to the forecast). Returns those claims."""
    for _ in range(3):
        got = [await claim(api, e["token"], skills=[skill]) for e, skill in pairs]
        await clock.advance(100.0)
        for (e, _), g in zip(pairs, got, strict=True):
            await api.submit(e["token"], g["assignmentId"], {"ok": 1})
    return [await claim(api, e["token"], skills=[skill]) for e, skill in pairs]


async def due_in(db: asyncpg.Connection, seconds: float) -> str:
    """A deadline `seconds` after the database clock's now."""
    now: datetime = await db.fetchval("SELECT taskroute_now()")
    return (now + timedelta(seconds=seconds)).isoformat()


async def late_low(
    api: Api, customer: dict[str, Any], db: asyncpg.Connection, tasks: list[Any], seconds: float
) -> str:
    """A LOW project named `late` of these tasks, due `seconds` from the database clock's now;
    returns its id."""
    made = await api.create_project(
        customer["token"],
        tasks,
        priorityClass="LOW",
        deadline=await due_in(db, seconds),
        name="late",
    )
    project_id: str = made["project"]["id"]
    return project_id


async def on_track(api: Api, token: str, project_id: str) -> bool | None:
    """The project's forecast `onTrack`, as the API gives it."""
    data = await api.gql(
        "query($p: ID!) { project(id: $p) { forecast { onTrack } } }", {"p": project_id}, token
    )
    found: bool | None = data["project"]["forecast"]["onTrack"]
    return found


async def specialist_world(
    api: Api, clock: DbClock, common_tasks: int
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], list[Any], list[Any]]:
    """`spec` holds `rare` (alone) and `common`, three others `common`; `spec` and two of
    them have done three paced tasks of a warm-up project and hold one more. Returns the
    customer, `spec`, the common experts, the (expert, skill) pairs and their held claims."""
    customer = await api.create_customer()
    spec = await api.create_expert(["rare", "common"], name="spec")
    common = [await api.create_expert(["common"], name=f"c{i}") for i in range(3)]
    await api.create_project(
        customer["token"], tasks_of("rare", 4) + tasks_of("common", common_tasks), name="warmup"
    )
    pairs = [(spec, "rare"), (common[0], "common"), (common[1], "common")]
    return customer, spec, common, pairs, await paced(api, clock, pairs)


async def scarcity(api: Api) -> dict[str, dict[str, Any]]:
    data = await api.gql(
        "{ skillScarcity { skill activeExperts openBacklog backlogSeconds scarce updatedAt } }",
        token=ADMIN_TOKEN,
    )
    return {r["skill"]: r for r in data["skillScarcity"]}


async def rare_order(api: Api, expert: dict[str, Any], n: int) -> list[str]:
    """The projects of the expert's next `n` `rare` tasks, each claimed and submitted."""
    order = []
    for _ in range(n):
        got = await claim(api, expert["token"], skills=["rare"])
        order.append(got["task"]["projectId"])
        await api.submit(expert["token"], got["assignmentId"], {"ok": 1})
    return order


async def bumped_late_in_rare(
    api: Api, jobs: Database, policy: RoutingPolicy, token: str, project_id: str
) -> None:
    """After the routing passes: `rare` is scarce, the project is forecast to miss (the
    premise) and bumped."""
    await routing_passes(jobs, policy)
    assert (await scarcity(api))["rare"]["scarce"]
    assert await on_track(api, token, project_id) is False
    state = await project_state(api, token, project_id)
    assert state["routing"]["deadlineBumped"]


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
    database_url: str, tmp_path: Path, db: asyncpg.Connection, clock: DbClock
) -> None:
    """No realised rate yet (the project is younger than the hour-long window): the bump
    comes from the forecast, which has measured the expert's pace on other work."""
    async with clocked(database_url, tmp_path) as (api, jobs, policy):
        customer = await api.create_customer()
        expert = await api.create_expert(["ocr"])
        await api.create_project(customer["token"], tasks_of("ocr", 4), name="warmup")
        await paced(api, clock, [(expert, "ocr")])
        await api.create_project(customer["token"], tasks_of("ocr", 20), name="other")
        # 3 tasks due in 400 s: sharing the expert's 100-s cycles with `other`, the forecast
        # misses; lifted ahead of `other` they fit (the skill did 3 tasks per 300 s).
        late = await api.create_project(
            customer["token"], tasks_of("ocr", 3), deadline=await due_in(db, 400), name="late"
        )
        late_id = late["project"]["id"]
        await routing_passes(jobs, policy, 1)
        state = await project_state(api, customer["token"], late_id)
    assert state["routing"]["deadlineBumped"]
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
    # lifted above the rest of its class (NORMAL, at 0), under HIGH's level (100)
    assert row["deadline_bumped"] and 0 < row["eff"] < 100 * 10000


async def test_a_bump_is_one_class_level_in_a_scarce_skill_too(
    database_url: str, tmp_path: Path, db: asyncpg.Connection, clock: DbClock
) -> None:
    """A bumped LOW project rises one class level in every skill: in a scarce skill too its
    tasks join NORMAL's queue in order of age, passing the LOW work and the newer NORMAL
    work, not the older NORMAL work and not HIGH's (lifting it to the top of NORMAL there cost
    the NORMAL class its p95 wait in bench/routing.py's worlds)."""
    async with clocked(database_url, tmp_path) as (api, jobs, policy):
        customer, spec, common, pairs, held = await specialist_world(api, clock, 8)
        high = await api.create_project(
            customer["token"],
            tasks_of("rare", 1) + tasks_of("common", 2),
            priorityClass="HIGH",
            name="high",
        )
        older = await api.create_project(customer["token"], tasks_of("rare", 1), name="older")
        low = await api.create_project(
            customer["token"], tasks_of("rare", 3), priorityClass="LOW", name="low"
        )
        # Due in 900 s, `rare` doing one task per 100 s: behind everything (1 + 1 + 3 + the
        # newer NORMAL project's 3, then its own 3) it misses; one level up it fits, even
        # with the newer NORMAL work counted ahead of it.
        late_id = await late_low(
            api, customer, db, tasks_of("rare", 3) + tasks_of("common", 2), 900
        )
        newer = await api.create_project(customer["token"], tasks_of("rare", 3), name="newer")
        await routing_passes(jobs, policy)
        s = await scarcity(api)
        assert s["rare"]["scarce"] and not s["common"]["scarce"]
        assert (await project_state(api, customer["token"], late_id))["routing"]["deadlineBumped"]
        for (expert, _), lease in zip(pairs, held, strict=True):
            await api.submit(expert["token"], lease["assignmentId"], {"ok": 1})
        # In `rare`: HIGH, the older NORMAL, the late LOW project, the newer NORMAL, the LOW.
        order = await rare_order(api, spec, 11)
        ids = [p["project"]["id"] for p in (high, older, newer, low)]
        assert order == ids[:2] + [late_id] * 3 + [ids[2]] * 3 + [ids[3]] * 3
        # In `common`, which three others hold, the same one class level (LOW -> NORMAL):
        # the HIGH project's tasks come first there too.
        for expert in common[1:]:
            got = await claim(api, expert["token"])
            assert got["task"]["projectId"] == high["project"]["id"]
        got = await claim(api, common[0]["token"])
        assert got["task"]["projectId"] == late_id


async def test_a_bumped_normal_project_passes_normal_work_and_no_high_work(
    database_url: str, tmp_path: Path, db: asyncpg.Connection, clock: DbClock
) -> None:
    """A late NORMAL project rises to the top of NORMAL and no further: ahead of an older
    NORMAL project's work, behind a HIGH project's, even one created after it (one class
    level up, it would join HIGH's queue by age and pass the newer HIGH work)."""
    async with clocked(database_url, tmp_path) as (api, jobs, policy):
        customer, spec, _, _, held = await specialist_world(api, clock, 8)
        older = await api.create_project(
            customer["token"], tasks_of("rare", 4) + tasks_of("common", 4), name="older"
        )
        # Due in 450 s at one `rare` task per 100 s: its 3 tasks fit behind the newer HIGH
        # task, not behind the older NORMAL project's 4.
        late = await api.create_project(
            customer["token"], tasks_of("rare", 3), deadline=await due_in(db, 450), name="late"
        )
        late_id = late["project"]["id"]
        high = await api.create_project(
            customer["token"], tasks_of("rare", 1), priorityClass="HIGH", name="high"
        )
        await bumped_late_in_rare(api, jobs, policy, customer["token"], late_id)
        await api.submit(spec["token"], held[0]["assignmentId"], {"ok": 1})
        ids = [p["project"]["id"] for p in (high, older)]
        assert await rare_order(api, spec, 8) == [ids[0]] + [late_id] * 3 + [ids[1]] * 4


@pytest.mark.parametrize("ahead", ["HIGH", "NORMAL"])
async def test_no_bump_where_only_passing_a_higher_class_would_save_the_deadline(
    database_url: str, tmp_path: Path, db: asyncpg.Connection, clock: DbClock, ahead: str
) -> None:
    """A late LOW project behind older HIGH or NORMAL work in a scarce skill is not bumped: a
    bump is one class level, and there it still misses."""
    async with clocked(database_url, tmp_path) as (api, jobs, policy):
        customer, spec, _, _, held = await specialist_world(api, clock, 8)
        first = await api.create_project(
            customer["token"],
            tasks_of("rare", 4) + tasks_of("common", 4),
            priorityClass=ahead,
            name="first",
        )
        # Due in 400 s at one `rare` task per 100 s: 3 tasks fit only ahead of the 4.
        late_id = await late_low(api, customer, db, tasks_of("rare", 3), 400)
        await routing_passes(jobs, policy)
        assert (await scarcity(api))["rare"]["scarce"]
        # Forecast to miss (the premise) ...
        assert await on_track(api, customer["token"], late_id) is False
        # ... and left where it is: the other class's work first.
        state = await project_state(api, customer["token"], late_id)
        assert not state["routing"]["deadlineBumped"]
        await api.submit(spec["token"], held[0]["assignmentId"], {"ok": 1})
        got = await claim(api, spec["token"], skills=["rare"])
        assert got["task"]["projectId"] == first["project"]["id"]


async def test_a_bump_counts_only_the_work_it_would_still_queue_behind(
    database_url: str, tmp_path: Path, db: asyncpg.Connection, clock: DbClock
) -> None:
    """One class level up, a late LOW project's tasks join NORMAL's queue in order of age:
    NORMAL work newer than its last task would queue behind it, so the bump's futility test
    does not count it. Here 3 tasks fit before the deadline only ahead of a newer NORMAL
    project's 4: the project is bumped and served first."""
    async with clocked(database_url, tmp_path) as (api, jobs, policy):
        customer, spec, _, _, held = await specialist_world(api, clock, 12)
        # Due in 400 s at one `rare` task per 100 s: 3 fit, 3 + 4 do not.
        late_id = await late_low(api, customer, db, tasks_of("rare", 3), 400)
        await api.create_project(customer["token"], tasks_of("rare", 4), name="newer")
        # Bumped: one level up it is older than everything queued there.
        await bumped_late_in_rare(api, jobs, policy, customer["token"], late_id)
        await api.submit(spec["token"], held[0]["assignmentId"], {"ok": 1})
        assert await rare_order(api, spec, 3) == [late_id] * 3


async def test_no_bump_when_nothing_is_left_to_lift(
    database_url: str, tmp_path: Path, db: asyncpg.Connection, clock: DbClock
) -> None:
    """A bump lifts a project's open tasks ahead of others'. A late project whose tasks are
    all claimed has none to lift: it is not bumped (such bumps and unbumps changed no claim,
    and flapped in bench/routing.py at one or two tasks left)."""
    async with clocked(database_url, tmp_path) as (api, jobs, policy):
        customer, spec, _, _, held = await specialist_world(api, clock, 12)
        await api.submit(spec["token"], held[0]["assignmentId"], {"ok": 1})
        late_id = await late_low(api, customer, db, tasks_of("rare", 1), 30)
        got = await claim(api, spec["token"], skills=["rare"])
        assert got["task"]["projectId"] == late_id
        await routing_passes(jobs, policy)
        # Forecast to miss (the premise: `spec` takes 100 s a task, due in 30 s) ...
        assert await on_track(api, customer["token"], late_id) is False
        # ... and not bumped: nothing of it waits in a queue.
        state = await project_state(api, customer["token"], late_id)
        assert not state["routing"]["deadlineBumped"]
        assert state["routing"]["events"] == []


async def test_no_bump_where_a_lift_cannot_save_the_deadline(
    database_url: str, tmp_path: Path, db: asyncpg.Connection, clock: DbClock
) -> None:
    """A bump lifts a project ahead of others' work; where even lifted it cannot finish in
    time (its own tasks, and the lifted ones ahead of them, at the skill's realised rate),
    the lift would only delay the others. Such a project is not bumped, and a bumped one is
    unbumped once its deadline has passed."""
    async with clocked(database_url, tmp_path) as (api, jobs, policy):
        customer, spec, _, _, held = await specialist_world(api, clock, 12)
        # `rare` did 3 tasks in 300 s: 50 tasks cannot be done in 600 s; 3 can, and the 2 of
        # the NORMAL project below (counted ahead of them at NORMAL's level, though newer).
        ids = {}
        for name, n, seconds in (("hopeless", 50, 600), ("savable", 3, 600)):
            made = await api.create_project(
                customer["token"],
                tasks_of("rare", n),
                priorityClass="LOW",
                deadline=await due_in(db, seconds),
                name=name,
            )
            ids[name] = made["project"]["id"]
        hopeless_id, savable_id = ids["hopeless"], ids["savable"]
        normal = await api.create_project(customer["token"], tasks_of("rare", 2), name="normal")
        await routing_passes(jobs, policy)
        s = await scarcity(api)
        assert s["rare"]["scarce"]
        # Both are forecast to miss (the premise) ...
        for pid in (hopeless_id, savable_id):
            assert await on_track(api, customer["token"], pid) is False
        # ... but only the one a lift can save is bumped.
        hopeless_state = await project_state(api, customer["token"], hopeless_id)
        assert not hopeless_state["routing"]["deadlineBumped"]
        assert hopeless_state["routing"]["events"] == []
        assert (await project_state(api, customer["token"], savable_id))["routing"][
            "deadlineBumped"
        ]
        await api.submit(spec["token"], held[0]["assignmentId"], {"ok": 1})
        # `spec` takes the lifted project's work first, one class level up and older than
        # the NORMAL project's (the hopeless one, bumped, would have come first: its rows are
        # older still) ...
        got = await claim(api, spec["token"])
        assert got["task"]["projectId"] == savable_id
        await api.submit(spec["token"], got["assignmentId"], {"ok": 1})
        # ... and once the deadline has passed, with work left, the lift is over: the NORMAL
        # project's work comes first again.
        await clock.advance(601.0)
        await routing_passes(jobs, policy, 1)
        state = await project_state(api, customer["token"], savable_id)
        assert not state["routing"]["deadlineBumped"]
        assert [e["kind"] for e in state["routing"]["events"]] == ["bump", "unbump"]
        got = await claim(api, spec["token"])
        assert got["task"]["projectId"] == normal["project"]["id"]
