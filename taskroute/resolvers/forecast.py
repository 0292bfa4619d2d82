"""Deadline forecasts: remaining work against observed, fairly shared throughput.

The numbers come from one SQL query (`forecast_skills`); this module turns them into ETAs.
Per (project, skill):
- remaining = open slots (open items x answers still needed) + in-flight (claimed) slots;
- pace = submissions of the skill in the window / distinct experts who made them / window hours
  (tasks per hour of one working expert);
- expert_equiv = sum over present qualified experts of 1 / (number of (project, skill) pairs
  with work left that the expert qualifies for): an expert shared by two projects counts half
  for each;
- throughput = expert_equiv x pace; eta = now + remaining / throughput (None when throughput is
  zero and work remains);
- range: the pace is a count over the window, so its relative uncertainty is ~1/sqrt(n); the
  early/late ETAs use throughput x (1 +/- min(0.5, 1/sqrt(n)));
- extra_experts: dedicated experts at the observed pace to add so the ETA meets the deadline
  (None when there is no deadline, it has passed, or no pace has been observed yet).
The project's forecast is the latest of its skills (skills progress in parallel).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.config import Settings
from taskroute.db.queries import Q

MAX_SPREAD = 0.5


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
    pace_per_expert: float  # tasks per hour of one working expert
    throughput: float  # tasks per hour for this project and skill
    eta: datetime | None
    eta_early: datetime | None
    eta_late: datetime | None
    on_track: bool
    extra_experts: int | None


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

    def signature(self) -> tuple[Any, ...]:
        """What a subscriber cares about; ETAs to the minute so the clock alone is no change."""

        def minute(t: datetime | None) -> str | None:
            return t.strftime("%Y-%m-%dT%H:%M") if t else None

        return (
            self.remaining,
            self.on_track,
            round(self.throughput, 3),
            minute(self.eta),
            tuple((s.skill, s.remaining, s.in_flight, s.extra_experts) for s in self.by_skill),
        )


def _on_track(remaining: int, eta: datetime | None, deadline: datetime | None) -> bool:
    if remaining == 0 or deadline is None:
        return True
    return eta is not None and eta <= deadline


def _skill(row: asyncpg.Record, window_hours: float) -> SkillForecast:
    now: datetime = row["evaluated_at"]
    deadline: datetime | None = row["deadline"]
    remaining: int = row["remaining"]
    n: int = row["window_submissions"]
    pace = n / row["window_experts"] / window_hours if row["window_experts"] else 0.0
    equiv: float = row["expert_equiv"]
    throughput = equiv * pace

    def at(rate: float) -> datetime | None:
        if remaining == 0:
            return now
        if rate <= 0:
            return None
        return now + timedelta(hours=remaining / rate)

    spread = min(MAX_SPREAD, 1 / math.sqrt(n)) if n else MAX_SPREAD
    eta = at(throughput)
    extra: int | None = None
    if deadline is not None:
        hours_left = (deadline - now).total_seconds() / 3600
        if remaining == 0:
            extra = 0
        elif hours_left > 0 and pace > 0:
            needed_equiv = remaining / hours_left / pace
            # a tiny epsilon so float noise never turns an exact fit into one more expert
            extra = max(0, math.ceil(needed_equiv - equiv - 1e-9))
    return SkillForecast(
        skill=row["skill"],
        total=row["total"],
        done=row["done"],
        open=row["open"],
        in_flight=row["in_flight"],
        remaining=remaining,
        active_experts=row["active_experts"],
        expert_equiv=equiv,
        pace_per_expert=pace,
        throughput=throughput,
        eta=eta,
        eta_early=at(throughput * (1 + spread)),
        eta_late=at(throughput * (1 - spread)),
        on_track=_on_track(remaining, eta, deadline),
        extra_experts=extra,
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
    conn: asyncpg.Connection, settings: Settings, project_id: UUID | None
) -> list[Forecast]:
    """Forecast one project (any status), or every active project with a deadline."""
    rows = await conn.fetch(
        Q["forecast_skills"], project_id, settings.forecast_window, settings.forecast_presence
    )
    hours = settings.forecast_window / 3600
    grouped: dict[UUID, list[asyncpg.Record]] = defaultdict(list)
    for r in rows:
        grouped[r["project_id"]].append(r)
    return [
        _combine(pid, rs[0]["deadline"], rs[0]["evaluated_at"], [_skill(r, hours) for r in rs])
        for pid, rs in grouped.items()
    ]


async def project_forecast(
    conn: asyncpg.Connection, settings: Settings, project: asyncpg.Record
) -> Forecast:
    found = await forecasts(conn, settings, project["id"])
    if found:
        return found[0]
    # A project without tasks has nothing left to do.
    now = await conn.fetchval(Q["db_now"])
    return _combine(project["id"], project["deadline"], now, [])
