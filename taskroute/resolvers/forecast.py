"""Deadline forecasts: remaining work against the pace measured from the work itself.

The facts come from two SQL queries (`forecast_skills`, `forecast_cycles`); this module turns
them into ETAs. Per (project, skill):
- remaining = open slots + in-flight (claimed) slots; the ETA counts an in-flight slot as half
  done (on average it is);
- cycle of one submission = the seconds it cost its expert (from their previous submission when
  they went straight on, else from the claim: breaks are not pace); see `forecast_cycles`;
- an expert's pace in a skill = 1 / their recency-weighted mean cycle (weights halve every
  HALF_LIFE submissions, so a change of pace shows within a few tasks), shrunk towards the
  skill's typical cycle by PRIOR_WEIGHT pseudo-submissions; a present expert with no history
  in the skill gets the skill's typical cycle (median over its experts), and a skill with no
  history the median over the other skills (the prior for new experts and new skills);
- throughput = sum over present qualified experts of share x pace, where an expert shared by
  n (project, skill) demands gives each 1/n of their time;
- eta = now + remaining / throughput (None when work remains and nobody present holds the
  skill, or nothing at all was measured yet: `reason` says which);
- range: the relative spread of the ETA combines the uncertainty of the measured mean (the
  cycles' coefficient of variation / sqrt(samples)) and the luck of the remaining tasks
  (cv / sqrt(remaining)); early/late are the 90% band, throughput x (1 +/- 1.645 x spread);
- extra_experts: experts at the skill's typical pace to add so the ETA meets the deadline.
The project's forecast is the latest of its skills (skills progress in parallel).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.config import Settings
from taskroute.db.queries import Q

# Submissions after which a sample's weight has halved: recent work counts more.
HALF_LIFE = 3.0
# Pseudo-submissions of the skill's typical cycle mixed into every expert's own estimate.
PRIOR_WEIGHT = 1.0
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


@dataclass(frozen=True)
class Pace:
    """Recency-weighted cycle statistics of one expert in one skill."""

    mean: float  # seconds per task
    cv: float  # coefficient of variation of the cycles
    weight: float  # effective number of samples
    n: int


def _pace(cycles: list[float]) -> Pace:
    """`cycles` newest first."""
    ws = [0.5 ** (i / HALF_LIFE) for i in range(len(cycles))]
    total = sum(ws)
    mean = sum(w * c for w, c in zip(ws, cycles, strict=True)) / total
    var = sum(w * (c - mean) ** 2 for w, c in zip(ws, cycles, strict=True)) / total
    # Kish's effective sample size of the weights
    n_eff = total * total / sum(w * w for w in ws)
    cv = math.sqrt(var) / mean if len(cycles) > 1 else 0.5
    return Pace(mean=mean, cv=cv, weight=n_eff, n=len(cycles))


class PaceBook:
    """Every measured pace of the skills asked about, and the priors for the unmeasured."""

    def __init__(self, rows: list[asyncpg.Record]) -> None:
        cycles: dict[tuple[UUID, str], list[float]] = defaultdict(list)
        for r in rows:  # newest first per (expert, skill)
            cycles[(r["expert_id"], r["skill"])].append(r["cycle"])
        self.own = {k: _pace(v) for k, v in cycles.items()}
        per_skill: dict[str, list[Pace]] = defaultdict(list)
        for (_, skill), p in self.own.items():
            per_skill[skill].append(p)
        self.typical = {k: statistics.median(p.mean for p in v) for k, v in per_skill.items()}
        self.typical_cv = {k: statistics.median(p.cv for p in v) for k, v in per_skill.items()}
        self.samples = {k: sum(p.n for p in v) for k, v in per_skill.items()}
        self.fallback = statistics.median(self.typical.values()) if self.typical else None

    def prior(self, skill: str) -> float | None:
        return self.typical.get(skill, self.fallback)

    def expert(self, expert: UUID, skill: str) -> tuple[float, float, float] | None:
        """(seconds per task, cv, effective samples) for one expert, or None if unknown."""
        prior = self.prior(skill)
        own = self.own.get((expert, skill))
        if own is None:
            if prior is None:
                return None
            return prior, self.typical_cv.get(skill, 0.5), PRIOR_WEIGHT
        if prior is None:
            return own.mean, own.cv, own.weight
        mean = (own.weight * own.mean + PRIOR_WEIGHT * prior) / (own.weight + PRIOR_WEIGHT)
        return mean, own.cv, own.weight + PRIOR_WEIGHT


def _on_track(remaining: int, eta: datetime | None, deadline: datetime | None) -> bool:
    if remaining == 0 or deadline is None:
        return True
    return eta is not None and eta <= deadline


def _skill(row: asyncpg.Record, book: PaceBook) -> SkillForecast:
    now: datetime = row["evaluated_at"]
    deadline: datetime | None = row["deadline"]
    remaining: int = row["remaining"]
    skill: str = row["skill"]
    # an in-flight slot is half done on average
    left = row["open"] + 0.5 * row["in_flight"]
    throughput = 0.0  # tasks per second
    var = 0.0  # variance of the throughput estimate
    weighted_cv = 0.0
    for expert, share in zip(row["experts"], row["shares"], strict=True):
        pace = book.expert(expert, skill)
        if pace is None:
            continue
        mean, cv, weight = pace
        rate = share / mean
        throughput += rate
        var += (rate * cv) ** 2 / weight
        weighted_cv += rate * cv
    equiv: float = row["expert_equiv"]

    def at(rate: float) -> datetime | None:
        if remaining == 0:
            return now
        if rate <= 0:
            return None
        return now + timedelta(seconds=left / rate)

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
    if remaining > 0 and row["active_experts"] == 0:
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
        active_experts=row["active_experts"],
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
    rows = await conn.fetch(
        Q["forecast_skills"],
        project_id,
        settings.forecast_presence,
        clock,
    )
    if not rows:
        return []
    skills = sorted({r["skill"] for r in rows})
    cycles = await conn.fetch(
        Q["forecast_cycles"],
        skills,
        settings.forecast_window,
        settings.forecast_presence,
        rows[0]["evaluated_at"],
    )
    book = PaceBook(cycles)
    grouped: dict[UUID, list[asyncpg.Record]] = defaultdict(list)
    for r in rows:
        grouped[r["project_id"]].append(r)
    return [
        _combine(pid, rs[0]["deadline"], rs[0]["evaluated_at"], [_skill(r, book) for r in rs])
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
