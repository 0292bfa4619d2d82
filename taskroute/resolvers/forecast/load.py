"""Forecasts as the API and the jobs ask for them: the counts and experts loaded with SQL, each
skill's ETA assembled from capacity and tail, and a project's the latest of its skills.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import asyncpg

from taskroute.config import Settings
from taskroute.db.queries import Q
from taskroute.resolvers.forecast.capacity import (
    Capacity,
    Group,
    Sharing,
    _allocate,
    _capacity,
    _left,
    _part,
    _present,
)
from taskroute.resolvers.forecast.pace import (
    SINGLE_CV,
    Kept,
    PaceBook,
    _kept,
    _pace,
    _split,
    micros,
)
from taskroute.resolvers.forecast.tail import _dry_end, _ends, _held_end

# Fewer samples than this behind a pace and the forecast is not evidence enough to alert.
MIN_SAMPLES = 3
# z of a two-sided 90% band, and the widest relative spread shown.
Z90 = 1.645
MAX_SPREAD = 0.9


@dataclass(frozen=True)
class SkillForecast:
    skill: str
    total: int
    done: int
    open: int
    in_flight: int
    remaining: int
    active_experts: int
    expert_equiv: float
    pace_per_expert: float  # tasks per hour of one working expert (throughput / equivalents)
    throughput: float  # tasks per hour for this project and skill
    eta: datetime | None
    eta_early: datetime | None
    eta_late: datetime | None
    on_track: bool
    extra_experts: int | None
    samples: int = 0  # submissions the pace was measured from
    reason: str | None = None  # why the ETA is unknown or late; None when on track


@dataclass(frozen=True)
class Forecast:
    project_id: UUID
    deadline: datetime | None
    evaluated_at: datetime
    remaining: int
    throughput: float
    eta: datetime | None
    eta_early: datetime | None
    eta_late: datetime | None
    on_track: bool
    by_skill: list[SkillForecast]

    @property
    def reasons(self) -> list[str]:
        return [s.reason for s in self.by_skill if s.reason]

    @property
    def evidence(self) -> bool:
        """Every skill with work left has a measured pace, or certainly cannot progress."""
        return all(
            s.samples >= MIN_SAMPLES or s.active_experts == 0
            for s in self.by_skill
            if s.remaining > 0
        )

    def signature(self) -> tuple[Any, ...]:
        """What a subscriber cares about; ETAs to the minute so the clock alone is no change."""

        def minute(t: datetime | None) -> str | None:
            return t.strftime("%Y-%m-%dT%H:%M") if t else None

        return (
            self.remaining,
            self.on_track,
            round(self.throughput, 3),
            minute(self.eta),
            tuple(
                (s.skill, s.remaining, s.in_flight, s.extra_experts, s.reason)
                for s in self.by_skill
            ),
        )


def _on_track(remaining: int, eta: datetime | None, deadline: datetime | None) -> bool:
    if remaining == 0 or deadline is None:
        return True
    return eta is not None and eta <= deadline


def clear_caches() -> None:
    """Forget everything looked up by value: paces, tails, kept cycles (benches time a forecast
    without them)."""
    _pace.cache_clear()
    _ends.cache_clear()
    _dry_end.cache_clear()
    _kept.cache_clear()
    _split.cache_clear()


def _skill(
    row: Mapping[str, Any],
    now: datetime,
    capacity: Capacity,
    active: int,
    book: PaceBook,
    held: Sequence[tuple[float, float, float]] = (),
) -> SkillForecast:
    """`held`: once every task is claimed, the tasks in progress as (their holder's mean
    cycle, cv, age) (`_held_end`); empty when that is not known."""
    deadline: datetime | None = row["deadline"]
    remaining: int = row["remaining"]
    skill: str = row["skill"]
    # an in-flight slot is half done on average
    left = row["open"] + 0.5 * row["in_flight"]
    throughput, var = capacity.throughput, capacity.var
    weighted_cv, equiv = capacity.weighted_cv, capacity.equiv

    def at(rate: float) -> datetime | None:
        if remaining == 0:
            return now
        if rate <= 0:
            return None
        # at another rate every cycle is scaled by throughput / rate, and so is the end
        if row["open"] == 0:  # every task claimed: the last of those in progress
            end = _held_end(held) if held else _dry_end(capacity.paces, row["in_flight"])
            return now + timedelta(seconds=end * throughput / rate)
        return now + timedelta(seconds=left / rate + capacity.tail * throughput / rate)

    spread = MAX_SPREAD
    if throughput > 0:
        cv = weighted_cv / throughput
        luck = cv * cv / max(left, 1.0)
        spread = min(MAX_SPREAD, Z90 * math.sqrt(var / throughput**2 + luck))
    eta = at(throughput)
    extra: int | None = None
    typical = book.prior(skill)
    if deadline is not None:
        seconds_left = (deadline - now).total_seconds()
        if remaining == 0:
            extra = 0
        elif seconds_left > 0 and typical is not None:
            needed = left / seconds_left  # tasks per second
            # a tiny epsilon so float noise never turns an exact fit into one more expert
            extra = max(0, math.ceil((needed - throughput) * typical - 1e-9))
    on_track = _on_track(remaining, eta, deadline)
    reason: str | None = None
    if remaining > 0 and active == 0:
        reason = f"no present expert holds `{skill}`"
        if extra:
            reason += f"; {extra} more experts needed"
    elif remaining > 0 and throughput <= 0:
        reason = f"no pace measured yet for `{skill}`"
    elif not on_track and deadline is not None:
        if deadline <= now:
            reason = f"`{skill}` is past the deadline with {remaining} tasks left"
        elif extra:
            reason = f"{extra} more experts needed for `{skill}`"
    return SkillForecast(
        skill=skill,
        total=row["total"],
        done=row["done"],
        open=row["open"],
        in_flight=row["in_flight"],
        remaining=remaining,
        active_experts=active,
        expert_equiv=equiv,
        pace_per_expert=throughput * 3600 / equiv if equiv > 0 else 0.0,
        throughput=throughput * 3600,
        eta=eta,
        eta_early=at(throughput * (1 + spread)),
        eta_late=at(throughput * (1 - spread)),
        on_track=on_track,
        extra_experts=extra,
        samples=book.samples.get(skill, 0),
        reason=reason,
    )


def _latest(values: list[datetime | None]) -> datetime | None:
    if any(v is None for v in values):
        return None
    return max((v for v in values if v is not None), default=None)


def _combine(
    project_id: UUID, deadline: datetime | None, now: datetime, skills: list[SkillForecast]
) -> Forecast:
    remaining = sum(s.remaining for s in skills)
    busy = [s for s in skills if s.remaining > 0]
    eta = _latest([s.eta for s in busy]) if busy else now
    return Forecast(
        project_id=project_id,
        deadline=deadline,
        evaluated_at=now,
        remaining=remaining,
        throughput=sum(s.throughput for s in skills),
        eta=eta,
        eta_early=_latest([s.eta_early for s in busy]) if busy else now,
        eta_late=_latest([s.eta_late for s in busy]) if busy else now,
        on_track=_on_track(remaining, eta, deadline),
        by_skill=skills,
    )


async def forecasts(
    conn: asyncpg.Connection,
    settings: Settings,
    project_id: UUID | None,
    clock: datetime | None = None,
) -> list[Forecast]:
    """Forecast one project (any status), or every active project with a deadline.

    `clock` (default: the database's now()) lets a simulator ask on simulated time."""
    rows = await conn.fetch(Q["forecast_counts"], project_id, clock)
    if not rows:
        return []
    return await _assemble(conn, settings, rows, clock, project_id is not None)


async def quote_forecast(
    conn: asyncpg.Connection,
    settings: Settings,
    deadline: datetime | None,
    slots: dict[tuple[str, float], int],
) -> Forecast:
    """The forecast of a project not created yet: `slots` open task slots per (skill,
    min_quality), next to today's present experts and every active project's work left, as
    if the project had been created now. Reads only."""
    now: datetime = await conn.fetchval(Q["db_now"])
    project_id = uuid4()  # stands for the project; no row has it
    rows = [
        {"project_id": project_id, "skill": skill, "min_quality": q, "deadline": deadline,
         "open": n, "in_flight": 0, "done": 0, "total": n, "remaining": n, "evaluated_at": now}
        for (skill, q), n in sorted(slots.items()) if n > 0
    ]  # fmt: skip
    found = await _assemble(conn, settings, rows, now, True) if rows else []
    return found[0] if found else _combine(project_id, deadline, now, [])


async def _assemble(
    conn: asyncpg.Connection,
    settings: Settings,
    rows: Sequence[Mapping[str, Any]],
    clock: datetime | None,
    one_project: bool,
) -> list[Forecast]:
    skills = sorted({r["skill"] for r in rows})
    window = settings.forecast_window
    # the idle cap is the presence window (the longest gap between tasks that is working)
    cap_us, window_us = micros(settings.forecast_presence), micros(window)
    experts = await conn.fetch(
        Q["forecast_experts"],
        settings.forecast_presence,
        clock,
        skills if one_project else None,
    )
    now: datetime = rows[0]["evaluated_at"]
    wanted = set(skills)
    kept = {e["expert_id"]: Kept.of(e, cap_us, window_us) for e in experts}
    cycles = {e: k.by_skill(wanted) for e, k in kept.items()}
    measured = [(e, k, c) for e, by in cycles.items() for k, c in by.items()]
    unmeasured = [k for k in skills if not any(k in by for by in cycles.values())]
    if unmeasured:
        # Nobody present has worked in these skills yet: their measured pace (a prior, and
        # how many experts a deadline needs) comes from whoever worked in them lately.
        rows_h = await conn.fetch(Q["forecast_skill_history"], unmeasured, window, clock)
        for h in rows_h:
            by = Kept.of(h, cap_us, window_us).by_skill(set(unmeasured))
            measured += [(h["expert_id"], k, c) for k, c in by.items()]
    book = PaceBook(measured)
    present = _present(experts, kept, now)
    # Every active project's work left in these skills (with or without a deadline), and the
    # rows asked about (a project completed while at risk is not active but is asked about).
    lefts: dict[Group, dict[UUID, float]] = defaultdict(dict)
    for d in await conn.fetch(Q["forecast_demand"], skills):
        lefts[(d["skill"], d["min_quality"])][d["project_id"]] = _left(d["open"], d["in_flight"])
    for r in rows:
        lefts[(r["skill"], r["min_quality"])][r["project_id"]] = _left(r["open"], r["in_flight"])
    shares = _allocate(present, lefts, book)
    groups = {g: _capacity(shares[g], g[0], book) for g in lefts}
    sharing = {g: Sharing(by) for g, by in lefts.items()}
    dry = [(r["project_id"], r["skill"]) for r in rows if r["open"] == 0 and r["in_flight"]]
    held = await _holders(conn, dry, clock, book) if dry else {}
    grouped: dict[UUID, list[SkillForecast]] = defaultdict(list)
    deadlines: dict[UUID, datetime | None] = {}
    active: dict[Group, int] = {}
    for r in rows:
        key = (r["skill"], r["min_quality"])
        group = groups[key]
        cap = _part(group, sharing[key], r["project_id"])
        if key not in active:  # present and qualified, whatever share of them it gets
            active[key] = sum(1 for p in present if p.quality.get(key[0], -1.0) >= key[1])
        mine = held.get((r["project_id"], r["skill"]), ())
        grouped[r["project_id"]].append(_skill(r, now, cap, active[key], book, mine))
        deadlines[r["project_id"]] = r["deadline"]
    return [_combine(pid, deadlines[pid], now, fs) for pid, fs in grouped.items()]


async def _holders(
    conn: asyncpg.Connection,
    pairs: list[tuple[UUID, str]],
    clock: datetime | None,
    book: PaceBook,
) -> dict[tuple[UUID, str], list[tuple[float, float, float]]]:
    """Per (project, skill) with every task claimed, its tasks in progress as (the holder's
    mean cycle, cv, age). A task whose lease ran out is the claim's to retake: a fresh cycle
    at the skill's typical pace from now. A pair with a holder of no known pace is left out
    (the forecast then takes each task as anyone's: `_dry_end`)."""
    rows = await conn.fetch(
        Q["forecast_in_flight"], [p for p, _ in pairs], [k for _, k in pairs], clock
    )
    found: dict[tuple[UUID, str], list[tuple[float, float, float]]] = defaultdict(list)
    unknown: set[tuple[UUID, str]] = set()
    for r in rows:
        key, skill = (r["project_id"], r["skill"]), r["skill"]
        if r["live"]:
            pace = book.expert(r["expert_id"], skill)
            if pace is not None:
                found[key].append((pace[0], pace[1], r["age"]))
                continue
        elif (prior := book.prior(skill)) is not None:
            found[key].append((prior, book.typical_cv.get(skill, SINGLE_CV), 0.0))
            continue
        unknown.add(key)
    return {k: v for k, v in found.items() if k not in unknown}


async def project_forecast(
    conn: asyncpg.Connection, settings: Settings, project: asyncpg.Record
) -> Forecast:
    found = await forecasts(conn, settings, project["id"])
    if found:
        return found[0]
    # A project without tasks has nothing left to do.
    now = await conn.fetchval(Q["db_now"])
    return _combine(project["id"], project["deadline"], now, [])
