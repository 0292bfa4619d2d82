"""Forecast math on constructed histories: steady pace, nobody present, shared experts.

Defaults: a 1-hour throughput window and a 15-minute presence window. Deadlines are set
relative to the database clock, so ETAs are compared with a small tolerance for the seconds
the test itself takes (not a speed assertion).
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from datetime import datetime, timedelta
from statistics import NormalDist
from typing import Any

import asyncpg
import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskroute.config import Settings
from taskroute.resolvers.forecast import forecasts
from taskroute.resolvers.forecast.capacity import (
    ALLOCATE_ROUNDS,
    NEGLIGIBLE_SHARE,
    Group,
    Present,
    Sharing,
    _allocate,
)
from taskroute.resolvers.forecast.pace import PaceBook
from taskroute.resolvers.forecast.tail import _dry_end, _ends, _held_end

from ..clock import DbClock
from ..forecast_helpers import add_history, db_now, forecast, history_project, seen
from ..helpers import ADMIN_TOKEN, Api, GraphQLError, tasks_of

TOL_H = 0.02  # hours of slack for the test's own running time
# Two experts with 10-minute cycles and tasks still to claim: the first claim comes after the
# shorter of two residuals (1/3 of a cycle), the last claimer's fresh cycle (1) is the end,
# against the (1 + 2/2) x 5 minutes that remaining / rate counts: 1/3 x 10 minutes.
TAIL_2_H = (1 / 3 + 1 - 2 / 2) * 10 / 60
# The relative sampling variance of the mean cycle of `_spread_expert` (6 cycles of 15 and 5
# minutes: sample variance 6 x 25 / 5 = 30 min^2) shrunk with one pseudo-cycle of the skill's
# typical 10 minutes: var((6 m + 10) / 7) = 6 x 30 / 7^2, over the mean's 10^2.
SPREAD_NOISE = 6 * 30 / 7**2 / 10**2


async def _spread_expert(api: Api, db: asyncpg.Connection, customer: str, name: str) -> None:
    """An expert whose cycles alternate 15 and 5 minutes: mean 10 minutes, cv 0.5 (their
    history project is used up: no other work shares their time)."""
    hist = await history_project(api, customer, "grading", 7)
    e = await api.create_expert(["grading"], name=name)
    # each claimed a minute before its submit, so they went straight on: a cycle runs from
    # the previous submission (the one 70 minutes ago, outside the hour's window, only
    # starts the first)
    await add_history(db, hist, e["id"], "grading", [70, 55, 50, 35, 30, 15, 10], on_task=1)
    await seen(db, e["id"], 1)


def _brute_cdfs(r: float, c: float, cv: float) -> tuple[float, float]:
    """(P(fresh cycle <= r), P(residual <= r)) for cycles lognormal of mean c and cv; a task
    seen in progress is length-biased: P(residual <= r) = E[min(cycle, r)] / c."""
    if cv == 0:
        return float(r >= c), min(r, c) / c
    s = math.sqrt(math.log1p(cv * cv))
    z = (math.log(r / c) + s * s / 2) / s
    unit = NormalDist()
    return unit.cdf(z), unit.cdf(z - s) + r / c * (1 - unit.cdf(z))


def _brute_ends(paces: list[tuple[float, float]], step: float) -> tuple[float, float]:
    """`_ends` by brute force (midpoint sums of `step` s up to 20 cycles): E[longest residual],
    and E[shortest residual] + E[max(the claimer's fresh cycle, the others' residuals)], the
    claimer drawn by pace."""
    rates = [1 / c for c, _ in paces]
    longest = shortest = after = 0.0
    for i in range(int(20 * max(c for c, _ in paces) / step)):
        both = [_brute_cdfs((i + 0.5) * step, c, cv) for c, cv in paces]
        res = [q for _, q in both]
        longest += (1 - math.prod(res)) * step
        shortest += math.prod(1 - q for q in res) * step
        mix = sum(
            rate / sum(rates) * f * math.prod(q for j, q in enumerate(res) if j != k)
            for k, (rate, (f, _)) in enumerate(zip(rates, both, strict=True))
        )
        after += (1 - mix) * step
    return longest, shortest + after


async def _two_steady_experts(
    api: Api, db: asyncpg.Connection, customer: str
) -> list[dict[str, Any]]:
    """Two experts, each submitted 6 'grading' tasks in the last hour: 6 tasks/hour each."""
    hist = await history_project(api, customer, "grading", 12)
    experts = []
    for name in ("ada", "bob"):
        e = await api.create_expert(["grading"], name=name)
        await add_history(db, hist, e["id"], "grading", [5, 15, 25, 35, 45, 55])
        await seen(db, e["id"], 1)
        experts.append(e)
    return experts


async def test_steady_throughput(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    await _two_steady_experts(api, db, customer)
    now = await db_now(db)
    created = await api.create_project(
        customer,
        tasks_of("grading", 24),
        deadline=(now + timedelta(hours=3)).isoformat(),
    )
    pid = created["project"]["id"]

    f = await forecast(api, customer, pid)
    (s,) = f["bySkill"]
    assert s["remaining"] == 24 and f["remaining"] == 24
    assert s["activeExperts"] == 2
    assert s["expertEquivalents"] == pytest.approx(2.0)
    assert s["tasksPerExpertHour"] == pytest.approx(6.0)
    assert f["throughputPerHour"] == pytest.approx(12.0)
    # 24 tasks at 12/hour: two hours from the evaluation time, plus the tail: the last two
    # tasks end at the longer of two residual 10-minute cycles (2/3 of one), not the mean
    # (1/2): 100 seconds more.
    eta_h = (_t(f["eta"]) - _t(f["evaluatedAt"])).total_seconds() / 3600
    assert eta_h == pytest.approx(2.0 + TAIL_2_H, abs=1e-6)
    # Every cycle was exactly 10 minutes: no measured spread, so the range is the ETA itself.
    early_h = (_t(f["etaEarly"]) - _t(f["evaluatedAt"])).total_seconds() / 3600
    late_h = (_t(f["etaLate"]) - _t(f["evaluatedAt"])).total_seconds() / 3600
    assert early_h == pytest.approx(eta_h, abs=1e-6) and late_h == pytest.approx(eta_h, abs=1e-6)
    assert f["onTrack"] is True and s["onTrack"] is True
    assert s["extraExpertsNeeded"] == 0
    assert s["reason"] is None and f["reasons"] == []

    # A claim moves a slot to in-flight: still remaining work.
    expert = await api.create_expert(["grading"], name="carl")
    assert await api.claim(expert["token"]) is not None
    f = await forecast(api, customer, pid)
    assert f["bySkill"][0]["remaining"] == 24 and f["bySkill"][0]["inFlight"] == 1
    # carl is present now (he just claimed) at the skill's pace: three experts, 18/hour.
    assert f["throughputPerHour"] == pytest.approx(18.0)


async def test_the_tail_follows_the_measured_spread(api: Api, db: asyncpg.Connection) -> None:
    """The last tasks end with the longest residual of the tasks in progress, and a task in
    progress is length-biased: with spread cycles its residual averages c (1 + cv^2) / 2,
    more than half a cycle (taken as uniform over one cycle, ETAs came out ~1% early:
    bench/RESULTS.md, 2026-12-02)."""
    customer = (await api.create_customer())["token"]
    await _spread_expert(api, db, customer, "ada")
    now = await db_now(db)
    due = (now + timedelta(hours=5)).isoformat()
    pid = (await api.create_project(customer, tasks_of("grading", 12), deadline=due))["project"][
        "id"
    ]
    f = await forecast(api, customer, pid)
    assert f["throughputPerHour"] == pytest.approx(6.0)
    # one expert: 12 tasks at 6/hour, plus 600 s x 0.5^2 / 2 = 75 s (the uniform residual
    # added nothing for one expert)
    eta_s = (_t(f["eta"]) - _t(f["evaluatedAt"])).total_seconds()
    assert eta_s == pytest.approx(2 * 3600 + 75, abs=0.5)

    await _spread_expert(api, db, customer, "bob")
    f = await forecast(api, customer, pid)
    # two experts: 12/hour less the bias of a rate from six spread cycles (next test)
    slower = 1 + SPREAD_NOISE / 2
    assert f["throughputPerHour"] == pytest.approx(12.0 / slower)
    # tasks still to claim: the shorter of two length-biased residuals to the first claim, the
    # longer of the last claimer's fresh cycle and the other's residual at the end, against
    # the (1 + 2/2) claims' worth (300 s each) that remaining / rate counts
    _longest, first_and_last = _brute_ends([(600, 0.5), (600, 0.5)], step=0.5)
    tail = first_and_last - 600 * slower
    assert tail > 200
    eta_s = (_t(f["eta"]) - _t(f["evaluatedAt"])).total_seconds()
    assert eta_s == pytest.approx(3600 * slower + tail, abs=1.0)


async def test_a_rate_from_few_spread_cycles_is_not_taken_for_faster(
    api: Api, db: asyncpg.Connection
) -> None:
    """A mean of k cycles is an unbiased time per task, but 1 / it over-estimates the rate by
    about its relative sampling variance v (~cv^2 / k), and remaining / (sum of the experts'
    rates) is convex in the sum: to second order E[1 / R] = (1 / R)(1 - B / R + V / R^2), B =
    sum of rate x v, V = sum of rate^2 x v. Taken at face value, the ETAs of
    bench/forecast_bench.py's steady scenario came out early by about cv^2 / k (bench/RESULTS.md,
    2026-12-02). One expert's ETA stays remaining x their mean cycle (previous test: 6/hour);
    cycles without spread are no noise."""
    customer = (await api.create_customer())["token"]
    await _spread_expert(api, db, customer, "ada")
    await _spread_expert(api, db, customer, "bob")
    hist = await history_project(api, customer, "grading", 6)
    carl = await api.create_expert(["grading"], name="carl")
    await add_history(db, hist, carl["id"], "grading", [5, 15, 25, 35, 45, 55])  # 10 min each
    await seen(db, carl["id"], 1)
    now = await db_now(db)
    due = (now + timedelta(hours=5)).isoformat()
    pid = (await api.create_project(customer, tasks_of("grading", 36), deadline=due))["project"][
        "id"
    ]
    f = await forecast(api, customer, pid)
    # three experts of 10-minute cycles: 6/hour each, R = 18/hour; ada and bob's means each
    # carry SPREAD_NOISE, carl's none: B / R = 2 v / 3, V / R^2 = 2 v / 9
    slower = 1 + 2 * SPREAD_NOISE / 3 - 2 * SPREAD_NOISE / 9
    assert slower > 1.015
    assert f["throughputPerHour"] == pytest.approx(18.0 / slower)
    (s,) = f["bySkill"]
    assert s["tasksPerExpertHour"] == pytest.approx(6.0 / slower)


@pytest.mark.parametrize(
    ("waits", "end_s"),
    [
        # two tasks: ada claims, 3 minutes later bob; 2 minutes on, 5 and 8 minutes are left
        ([180, 120], 480),
        # one task, ada's, 4 minutes into her 10-minute cycle; bob is idle
        ([240], 360),
    ],
)
async def test_once_every_task_is_claimed_the_end_is_the_last_in_progress(
    api: Api, db: asyncpg.Connection, clock: DbClock, waits: list[float], end_s: float
) -> None:
    """Nothing left to claim: the ETA is the end of the longest task in progress, from who
    holds it and since when (the leases). With exact 10-minute cycles that is the latest
    claim + 10 minutes, whoever else is present. Taken as anyone's task seen at a random
    moment (what the forecast did before it read the leases), two tasks came out at 2/3 of
    a cycle whatever their ages, and one at 1/2."""
    customer = (await api.create_customer())["token"]
    experts = await _two_steady_experts(api, db, customer)
    pid = (await api.create_project(customer, tasks_of("grading", len(waits))))["project"]["id"]
    held = []
    for e, wait in zip(experts, waits, strict=False):
        claim = await api.claim(e["token"])
        assert claim is not None
        held.append((e, claim))
        # They are at work, as their heartbeats say (a silent holder is not: presence_overdue),
        # and say it before each move of the clock: 180 + 120 s of silence would reach the
        # heartbeat timeout (300 s), after which the server's routing job may cut the lease first.
        for holder, c in held:
            await api.heartbeat(holder["token"], c["assignmentId"])
        await clock.advance(wait)
    for e, claim in held:
        await api.heartbeat(e["token"], claim["assignmentId"])
    f = await forecast(api, customer, pid)
    (s,) = f["bySkill"]
    assert s["inFlight"] == len(waits) and s["remaining"] == len(waits)
    assert s["activeExperts"] == 2
    # The end is a time: the latest claim plus one 10-minute cycle. The database clock also
    # runs in real time, so the seconds this test takes between the claim and the forecast
    # shorten what is left from the evaluation, never that end.
    last_claim = await db.fetchval(
        "SELECT max(claimed_at) FROM assignments WHERE project_id = $1", uuid.UUID(pid)
    )
    eta = _t(f["eta"])
    assert (eta - last_claim).total_seconds() == pytest.approx(600, abs=0.5)
    left = (eta - _t(f["evaluatedAt"])).total_seconds()
    assert end_s - 60 < left <= end_s + 0.5


async def test_a_task_whose_lease_ran_out_is_a_fresh_cycle(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    """A task still counted in progress after its lease ran out (before the sweeper resets
    it) is the claim's to retake: its end is a whole typical cycle from now, not its former
    holder's residual (which the age says is over)."""
    customer = (await api.create_customer())["token"]
    experts = await _two_steady_experts(api, db, customer)
    pid = (await api.create_project(customer, tasks_of("grading", 1)))["project"]["id"]
    assert await api.claim(experts[0]["token"]) is not None
    await db.execute("UPDATE tasks SET lease_until = taskroute_now() - interval '1 second'")
    f = await forecast(api, customer, pid)
    (s,) = f["bySkill"]
    assert s["inFlight"] == 1
    eta_s = (_t(f["eta"]) - _t(f["evaluatedAt"])).total_seconds()
    assert eta_s == pytest.approx(600, abs=0.5)


async def test_tight_deadline_asks_for_more_experts(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    await _two_steady_experts(api, db, customer)
    now = await db_now(db)
    pid = (
        await api.create_project(
            customer, tasks_of("grading", 24), deadline=(now + timedelta(minutes=65)).isoformat()
        )
    )["project"]["id"]
    f = await forecast(api, customer, pid)
    assert f["onTrack"] is False
    # 24 tasks in 65 minutes at 6/hour/expert needs 3.7 -> 4 experts; 2 are there.
    assert f["bySkill"][0]["extraExpertsNeeded"] == 2


async def test_no_active_experts(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    experts = await _two_steady_experts(api, db, customer)
    for e in experts:  # worked earlier in the window, gone for 45 minutes
        await seen(db, e["id"], 45)
    now = await db_now(db)
    with_deadline = (
        await api.create_project(
            customer, tasks_of("grading", 24), deadline=(now + timedelta(hours=3)).isoformat()
        )
    )["project"]["id"]
    no_deadline = (await api.create_project(customer, tasks_of("grading", 5)))["project"]["id"]

    f = await forecast(api, customer, with_deadline)
    s = f["bySkill"][0]
    assert s["activeExperts"] == 0 and f["throughputPerHour"] == 0
    assert f["eta"] is None and f["etaEarly"] is None and f["etaLate"] is None
    assert f["onTrack"] is False
    # The pace is still known from the window: 24 tasks in ~3 hours at 6/hour -> 2 experts.
    assert s["extraExpertsNeeded"] == 2
    # Why: nobody present holds the skill, and how many experts it takes.
    assert s["paceSamples"] == 12
    assert s["reason"] == "no present expert holds `grading`; 2 more experts needed"
    assert f["reasons"] == [s["reason"]]

    g = await forecast(api, customer, no_deadline)
    assert g["eta"] is None and g["onTrack"] is True and g["remaining"] == 5
    assert g["bySkill"][0]["reason"] == "no present expert holds `grading`"
    assert g["bySkill"][0]["extraExpertsNeeded"] is None


async def test_shared_experts_across_two_projects(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    await _two_steady_experts(api, db, customer)
    # Present but not qualified for min_quality 0.8, and present with another skill only:
    # neither changes the grading forecast.
    weak = await api.create_expert([{"skill": "grading", "quality": 0.5}], name="weak")
    other = await api.create_expert(["ranking"], name="other")
    for e in (weak, other):
        await seen(db, e["id"], 1)
    now = await db_now(db)
    p1 = (
        await api.create_project(
            customer,
            tasks_of("grading", 24),
            deadline=(now + timedelta(hours=3)).isoformat(),
            minQuality=0.8,
        )
    )["project"]["id"]
    alone = await forecast(api, customer, p1)
    assert alone["throughputPerHour"] == pytest.approx(12.0)

    other_customer = (await api.create_customer("globex"))["token"]
    p2 = (
        await api.create_project(
            other_customer,
            tasks_of("grading", 24),
            deadline=(now + timedelta(minutes=65)).isoformat(),
            minQuality=0.8,
        )
    )["project"]["id"]

    f1 = await forecast(api, customer, p1)
    f2 = await forecast(api, other_customer, p2)
    for f in (f1, f2):
        s = f["bySkill"][0]
        assert s["activeExperts"] == 2
        assert s["expertEquivalents"] == pytest.approx(1.0)  # each expert: half per project
        assert f["throughputPerHour"] == pytest.approx(6.0)
        eta_h = (_t(f["eta"]) - _t(f["evaluatedAt"])).total_seconds() / 3600
        assert eta_h == pytest.approx(4.0 + TAIL_2_H, abs=1e-6)
    assert f1["onTrack"] is False and f2["onTrack"] is False
    # p1: 24 in 3h at 6/h needs 1.33 experts, has 1 -> 1 more; p2: 24 in 65 min needs
    # 3.7 -> 3 more.
    assert f1["bySkill"][0]["extraExpertsNeeded"] == 1
    assert f2["bySkill"][0]["extraExpertsNeeded"] == 3

    # The weak expert does count where the quality bar allows: a min_quality 0 project.
    p3 = (await api.create_project(customer, tasks_of("grading", 6)))["project"]["id"]
    f3 = await forecast(api, customer, p3)
    # ada and bob's time stays where the work would finish last (p1 and p2: 48 tasks at
    # 12/hour, 4 hours) rather than a third each on p3, which weak alone finishes in an hour
    # (split evenly three ways as before, they would give p3 1/3 + 1/3 and p1/p2 less).
    assert f3["bySkill"][0]["activeExperts"] == 3
    assert f3["bySkill"][0]["expertEquivalents"] == pytest.approx(1.0)
    eta_h = (_t(f3["eta"]) - _t(f3["evaluatedAt"])).total_seconds() / 3600
    assert eta_h == pytest.approx(1.0, abs=1e-6)  # 6 tasks at weak's 6/hour, one expert
    f1 = await forecast(api, customer, p1)
    assert f1["bySkill"][0]["expertEquivalents"] == pytest.approx(1.0)


async def test_a_larger_project_gets_the_time_a_smaller_one_frees(
    api: Api, db: asyncpg.Connection
) -> None:
    """Two projects share two experts (12 tasks/hour together): the small one finishes at
    half of it, and from then on the large one has both; the large one ends with the whole
    backlog (48 tasks: 4 hours), not at its half share for ever (40 tasks at 6/hour: 6.7)."""
    customer = (await api.create_customer())["token"]
    await _two_steady_experts(api, db, customer)
    now = await db_now(db)
    due = (now + timedelta(hours=5)).isoformat()
    small = await api.create_project(customer, tasks_of("grading", 8), deadline=due)
    big = await api.create_project(customer, tasks_of("grading", 40), deadline=due)
    fs = await forecast(api, customer, small["project"]["id"])
    fb = await forecast(api, customer, big["project"]["id"])
    small_h = (_t(fs["eta"]) - _t(fs["evaluatedAt"])).total_seconds() / 3600
    big_h = (_t(fb["eta"]) - _t(fb["evaluatedAt"])).total_seconds() / 3600
    assert small_h == pytest.approx(8 / 6 + TAIL_2_H, abs=1e-6)  # 8 tasks at half of 12/h
    assert big_h == pytest.approx(48 / 12 + TAIL_2_H, abs=1e-6)
    assert fs["throughputPerHour"] == pytest.approx(6.0)
    assert fb["throughputPerHour"] == pytest.approx(10.0)  # 40 tasks over those 4 hours
    assert fb["onTrack"] is True  # due in 5 hours: on track (the even split said 6.7 h)
    # The routing job's view (every project at once) says the same.
    settings = Settings(database_url="unused")
    by_id = {str(f.project_id): f for f in await forecasts(db, settings, None)}
    job = by_id[big["project"]["id"]]
    assert job.eta is not None
    assert (job.eta - job.evaluated_at).total_seconds() / 3600 == pytest.approx(
        48 / 12 + TAIL_2_H, abs=TOL_H
    )


async def test_forecast_is_private(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    stranger = (await api.create_customer("globex"))["token"]
    expert = await api.create_expert(["grading"])
    pid = (await api.create_project(customer, tasks_of("grading", 2)))["project"]["id"]
    for token in (stranger, expert["token"]):
        with pytest.raises(GraphQLError) as err:
            await forecast(api, token, pid)
        assert err.value.code == "NOT_FOUND"
    with pytest.raises(GraphQLError) as err:
        await forecast(api, customer, "not-a-uuid")
    assert err.value.code == "NOT_FOUND"
    # The admin sees every project.
    assert (await forecast(api, ADMIN_TOKEN, pid))["remaining"] == 2


def _t(ts: str) -> datetime:
    return datetime.fromisoformat(ts)


async def test_history_after_the_asked_clock_is_no_pace(api: Api, db: asyncpg.Connection) -> None:
    """A simulator asks on its own clock (resolvers/forecast.py `clock`): submissions later
    than that clock are not history yet, so the skill has no measured pace (no crash on the
    experts whose every kept submission is in that future)."""
    customer = (await api.create_customer())["token"]
    await _two_steady_experts(api, db, customer)
    now = await db_now(db)
    pid = (
        await api.create_project(
            customer, tasks_of("grading", 6), deadline=(now + timedelta(hours=3)).isoformat()
        )
    )["project"]["id"]
    settings = Settings(database_url="postgresql://unused")
    (f,) = await forecasts(db, settings, uuid.UUID(pid), now - timedelta(hours=2))
    (s,) = f.by_skill
    # seen later than that clock too, so present then, with no pace yet
    assert s.samples == 0 and f.eta is None and s.active_experts == 2
    assert s.reason == "no pace measured yet for `grading`"


@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), max_size=60))
def test_a_projects_part_of_its_groups_rate_is_the_processor_sharing_sum(work: list[float]) -> None:
    """Sharing's binary search gives what summing min(v, mine) over the group gives (the
    forecast of a list of 1,000 projects did that sum once per project)."""
    by_project = {uuid.uuid4(): w for w in work}
    sharing = Sharing(by_project)
    busy = max(1, sum(1 for w in work if w > 0))
    for project, mine in list(by_project.items()) + [(uuid.uuid4(), 0.0)]:
        ahead = sum(min(v, mine) for v in by_project.values())
        expected = mine / ahead if ahead > 0 else 1.0 / busy
        assert sharing.part(project) == pytest.approx(expected, rel=1e-9)


def _plain_allocate(
    present: list[Present], lefts: dict[Group, dict[uuid.UUID, float]], book: PaceBook
) -> dict[Group, list[tuple[uuid.UUID, float]]]:
    """`_allocate` as it was written with dicts (before the flat lists of issue 16)."""
    work = {g: sum(by.values()) for g, by in lefts.items()}
    projects = {g: sum(1 for v in by.values() if v > 0) for g, by in lefts.items()}
    shares: dict[Group, list[tuple[uuid.UUID, float]]] = {g: [] for g in lefts}
    plans = []
    for p in present:
        mine = [g for g in lefts if p.quality.get(g[0], -1.0) >= g[1]]
        if not mine:
            continue
        busy = [g for g in mine if work[g] > 0]
        asked = sum(projects[g] for g in busy)
        if not busy or asked == 0:
            for g in mine:
                shares[g].append((p.expert_id, 1.0 / p.demands))
            continue
        time = min(1.0, asked / p.demands)
        split = {g: time * projects[g] / asked for g in busy}
        rates = {}
        for g in busy:
            pace = book.expert(p.expert_id, g[0])
            rates[g] = 1.0 / pace[0] if pace else 0.0
        plans.append((p, mine, split, rates, time))
    for _ in range(ALLOCATE_ROUNDS if len(plans) > 0 else 0):
        rate: dict[Group, float] = defaultdict(float)
        for _p, _mine, split, rates, _t in plans:
            for g, x in split.items():
                rate[g] += x * rates[g]
        finish = {g: work[g] / rate[g] if rate[g] > 0 else math.inf for g in rate}
        for _p, _mine, split, _rates, time in plans:
            if len(split) < 2:
                continue
            longest = max(finish[g] for g in split)
            if longest == math.inf:
                continue
            scaled = {g: x * finish[g] / longest for g, x in split.items()}
            total = sum(scaled.values())
            for g in split:
                split[g] = time * scaled[g] / total
    for p, mine, split, _rates, time in plans:
        for g in mine:
            x = split.get(g, 0.0)
            if x >= NEGLIGIBLE_SHARE * time:
                shares[g].append((p.expert_id, x))
    return shares


_cycle = st.floats(min_value=1.0, max_value=600.0)


@hypothesis.settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from("abcd"), st.sampled_from([0.0, 0.5, 1.0])),
            st.integers(1, 12),
            st.dictionaries(st.sampled_from("abcd"), st.lists(_cycle, min_size=1, max_size=12)),
        ),
        max_size=12,
    ),
    st.dictionaries(
        st.tuples(st.sampled_from("abcd"), st.sampled_from([0.0, 0.5, 1.0])),
        st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0, 40.0, 977.5]), max_size=5),
        min_size=1,
    ),
)
def test_the_flat_allocation_is_the_plain_one_to_the_bit(
    experts: list[tuple[dict[str, float], int, dict[str, list[float]]]],
    work: dict[Group, list[float]],
) -> None:
    """Issue 16: `_allocate` on flat lists gives exactly (==) what the dict version did (the
    same products, summed in the same order)."""
    present = [Present(uuid.UUID(int=i), q, d) for i, (q, d, _) in enumerate(experts)]
    measured = [
        (uuid.UUID(int=i), skill, cycles)
        for i, (_, _, by) in enumerate(experts)
        for skill, cycles in by.items()
    ]
    book = PaceBook(measured)
    lefts = {g: {uuid.UUID(int=1000 + j): w for j, w in enumerate(ws)} for g, ws in work.items()}
    assert _allocate(present, lefts, book) == _plain_allocate(present, lefts, book)


@pytest.mark.parametrize(
    "paces",
    [
        [(60.0, 0.3)],
        [(600.0, 0.5), (600.0, 0.5)],
        [(45.0, 0.3), (80.0, 0.05), (60.0, 0.8)],
        [(600.0, 0.0), (900.0, 0.2)],
    ],
)
def test_the_ends_integrate_to_the_brute_force_sums(paces: list[tuple[float, float]]) -> None:
    """`_ends`'s Gauss-Legendre pieces against a brute-force integral of the same expectations
    (one expert, two alike, a mix of spreads, a cycle without spread), within 0.1%: the pieces
    stop 4 log-sd above the longest cycle's median (0.05% of a cv 0.8 expert's mean is past it)."""
    got = _ends(tuple(paces))
    want = _brute_ends(paces, step=min(c for c, _ in paces) / 400)
    assert got == pytest.approx(want, rel=1e-3)


# The cycles as Postgres once computed them (timestamp differences per kept
# submission): the oracle of `Kept`, which takes them from microseconds kept at submit.
OLD_CYCLES = """
SELECT coalesce(array_agg(k.skill ORDER BY k.i), '{}') AS p_skills,
       coalesce(array_agg(greatest(extract(epoch FROM k.submitted_at
                 - CASE WHEN k.prev IS NOT NULL AND k.prev <= k.claimed_at
                             AND k.claimed_at - k.prev <= make_interval(secs => $5)
                        THEN k.prev ELSE k.claimed_at END)::float8, 0.001) ORDER BY k.i), '{}')
           AS p_cycles,
       max(k.submitted_at) AS p_newest
FROM (SELECT i, ($1::text[])[i] AS skill, ($2::timestamptz[])[i] AS claimed_at,
             ($3::timestamptz[])[i] AS submitted_at, ($3::timestamptz[])[i + 1] AS prev
      FROM generate_series(1, cardinality($3::timestamptz[])) i) k
WHERE k.submitted_at <= $4 AND k.submitted_at > $4 - make_interval(secs => $6)
"""


async def test_kept_cycles_are_the_interval_arithmetic_to_the_bit(db: asyncpg.Connection) -> None:
    """Kept (resolvers/forecast.py) against the SQL it replaced, on kept rows with gaps at
    the idle cap and a microsecond either side, cycles over a day (where float seconds of an
    interval could round twice), ties, and clocks on the window's edges."""
    import random

    from taskroute.resolvers.forecast.pace import EPOCH, Kept, micros

    rng = random.Random(16)
    base = await db_now(db)
    us = timedelta(microseconds=1)
    for case in range(300):
        cap, window = rng.choice([(900.0, 3600.0), (60.0, 1800.0), (0.5, 90000.0)])
        cap_t = timedelta(microseconds=micros(cap))
        n = rng.randint(1, 40)
        submitted = [base]
        claimed = []
        for i in range(n):
            if i + 1 < n:
                gap = rng.choice([0, 1, 17, 50, 900, 4000, 100000, 200000]) * rng.random()
                submitted.append(submitted[-1] - timedelta(seconds=gap) - rng.randint(0, 9) * us)
            if i + 1 < n and rng.random() < 0.5:  # claimed at the cap of the previous, +-1 us
                edge = submitted[i + 1] + cap_t + rng.choice([-1, 0, 1]) * us
                claimed.append(min(edge, submitted[i]))
            else:
                took = rng.choice([0.0, 0.0004, 5.0, 80.0, 90000.0, 200000.0]) * rng.random()
                claimed.append(submitted[i] - timedelta(seconds=took) - rng.randint(0, 9) * us)
        submitted = submitted[:n]
        skills = [rng.choice(["a", "b", "c"]) for _ in range(n)]
        pick = rng.randrange(n)
        clock = rng.choice(
            [
                submitted[pick],  # on the window's newer edge
                submitted[pick] + timedelta(seconds=window),  # on its older edge
                submitted[pick] + timedelta(seconds=window) - us,
                base + timedelta(seconds=rng.uniform(-window, window)),
            ]
        )
        old = await db.fetchrow(OLD_CYCLES, skills, claimed, submitted, clock, cap, window)
        row = {
            "p_skills": skills,
            "p_claim_us": [(s - c) // us for s, c in zip(submitted, claimed, strict=True)],
            "p_submitted_us": [(s - EPOCH) // us for s in submitted],
            "clock": clock,
        }
        new = Kept.of(row, micros(cap), micros(window))  # type: ignore[arg-type]
        assert list(new.skills) == old["p_skills"], case
        assert list(new.cycles) == old["p_cycles"], case
        assert new.newest == old["p_newest"], case


@pytest.mark.parametrize(
    ("paces", "held"),
    [
        ([(600.0, 0.0), (600.0, 0.0), (600.0, 0.0)], 1),
        ([(45.0, 0.3), (80.0, 0.05), (60.0, 0.8)], 2),
        ([(600.0, 0.5), (300.0, 0.2)], 1),
        ([(45.0, 0.3), (80.0, 0.05)], 3),
    ],
)
def test_the_dry_end_integrates_to_the_brute_force_sum(
    paces: list[tuple[float, float]], held: int
) -> None:
    """`_dry_end`: fewer tasks in progress than experts, each held by expert i with odds
    pace_i / sum of paces, the end is E[the longest of them]; as many or more, the longest
    residual of every expert's task (`_ends`)."""
    if held >= len(paces):
        assert _dry_end(tuple(paces), held) == _ends(tuple(paces))[0]
        return
    step = min(c for c, _ in paces) / 400
    rates = [1 / c for c, _ in paces]
    want = 0.0
    for i in range(int(20 * max(c for c, _ in paces) / step)):
        r = (i + 0.5) * step
        mixed = sum(
            q / sum(rates) * _brute_cdfs(r, c, cv)[1]
            for q, (c, cv) in zip(rates, paces, strict=True)
        )
        want += (1 - mixed**held) * step
    assert _dry_end(tuple(paces), held) == pytest.approx(want, rel=1e-3)


def _brute_held(held: list[tuple[float, float, float]], step: float) -> float:
    """`_held_end` by brute force: midpoint sums of E[max] of residuals cycle - age given
    cycle > age (ages capped as `_held_end` caps them), up to 20 cycles past the ages."""
    unit = NormalDist()
    exact = [max(c - age, 0.0) for c, cv, age in held if cv == 0]
    spread = []  # (mu, s, age, P(cycle > age))
    for c, cv, age in held:
        if cv > 0:
            s = math.sqrt(math.log1p(cv * cv))
            mu = math.log(c) - s * s / 2
            a = min(age, math.exp(mu + 4 * s))
            spread.append((mu, s, a, 1 - unit.cdf((math.log(a) - mu) / s) if a > 0 else 1.0))
    total = 0.0
    for i in range(int(20 * max(c for c, _, _ in held) / step)):
        r = (i + 0.5) * step
        done = math.prod(float(r >= d) for d in exact) * math.prod(
            1 - (1 - unit.cdf((math.log(a + r) - mu) / s)) / alive for mu, s, a, alive in spread
        )
        total += (1 - done) * step
    return total


@pytest.mark.parametrize(
    "held",
    [
        [(600.0, 0.0, 120.0), (600.0, 0.0, 300.0), (600.0, 0.0, 700.0)],
        [(60.0, 0.3, 0.0)],
        [(60.0, 0.3, 45.0), (80.0, 0.05, 10.0), (45.0, 0.8, 200.0)],
        [(600.0, 0.5, 900.0), (300.0, 0.2, 100.0), (600.0, 0.0, 50.0)],
        # older than the holder's near-maximum (4 log-sd): taken at it
        [(60.0, 0.3, 10_000.0)],
        # more marks than HELD_MARKS: only the largest are kept
        [(40.0 + 3 * i, (0.05, 0.3, 0.8)[i % 3], 7.0 * i) for i in range(24)],
    ],
)
def test_the_held_end_integrates_to_the_brute_force_sum(
    held: list[tuple[float, float, float]],
) -> None:
    """`_held_end`: E[the longest of the residuals], each its holder's lognormal cycle less
    the task's age given that it is longer; exact cycles: c - age (none once past)."""
    step = 0.01 if len(held) < 10 else 0.05
    assert _held_end(held) == pytest.approx(_brute_held(held, step), rel=1e-3, abs=0.01)


def test_a_fresh_task_ends_in_one_cycle_and_an_older_one_sooner() -> None:
    """Age 0 is a whole fresh cycle (its mean); with spread an older task has less left but
    more than c - age (it has outlived the short cycles)."""
    assert _held_end([(60.0, 0.3, 0.0)]) == pytest.approx(60.0, rel=1e-3)
    older = _held_end([(60.0, 0.3, 30.0)])
    assert 30.0 < older < 60.0
