"""An expert's pace in a skill: their cycles since their last change of pace, shrunk towards
the skill's typical cycle (the package's docstring has the whole model).
"""

from __future__ import annotations

import bisect
import functools
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

import asyncpg

# A pooled t statistic (log cycles, newest vs older) beyond this is a change of pace. High
# enough that the best of ~40 splits of a steady expert rarely passes it; a doubling of the
# cycle passes it after about four tasks.
CHANGE_T = 4.0


# Fewest cycles on either side of a change of pace.
MIN_SEGMENT = 3


# The coefficient of variation assumed for a pace measured from one cycle.
SINGLE_CV = 0.5
# Pseudo-submissions of the skill's typical cycle mixed into every expert's own estimate.
PRIOR_WEIGHT = 1.0


@dataclass(frozen=True)
class Pace:
    """Cycle statistics of one expert in one skill since their last change of pace."""

    mean: float  # seconds per task
    cv: float  # coefficient of variation of the cycles used
    weight: float  # cycles used
    n: int  # cycles measured


def _since_change(cycles: Sequence[float]) -> int:
    """How many of the newest cycles (newest first) follow the latest change of pace."""
    n = len(cycles)
    if n < 2 * MIN_SEGMENT:
        return n
    logs = [math.log(c) for c in cycles]
    sums = [0.0]
    squares = [0.0]
    for y in logs:
        sums.append(sums[-1] + y)
        squares.append(squares[-1] + y * y)
    best_t, best_k = 0.0, n
    for k in range(MIN_SEGMENT, n - MIN_SEGMENT + 1):
        m1 = sums[k] / k
        m2 = (sums[n] - sums[k]) / (n - k)
        within = (squares[k] - k * m1 * m1) + (squares[n] - squares[k] - (n - k) * m2 * m2)
        var = within / (n - 2)
        if var <= 1e-12:
            continue  # identical cycles on both sides: nothing to test
        t = abs(m1 - m2) / math.sqrt(var * (1 / k + 1 / (n - k)))
        if t > best_t:
            best_t, best_k = t, k
    return best_k if best_t > CHANGE_T else n


# A pace is a pure function of its cycles, and most experts' kept cycles are the same from one
# forecast to the next (only those who submitted since, or whose oldest cycle left the history
# window, have new ones): PaceBook looks them up by value instead of measuring every pace of
# every expert again (a fifth of a one-project forecast's Python at 100k tasks, py-spy). Keyed
# by the cycles themselves, never stale. Sized for a few thousand experts x their skills (an
# entry of 40 cycles is ~1.6 kB; an expert's kept cycles are 40 over all their skills).
PACE_CACHE = 8192


@functools.lru_cache(maxsize=PACE_CACHE)
def _pace(cycles: tuple[float, ...]) -> Pace:
    """`cycles` newest first."""
    used = cycles[: _since_change(cycles)]
    k = len(used)
    mean = sum(used) / k
    # plain float arithmetic: statistics.pstdev is exact (fractions) and 50x slower
    cv = math.sqrt(sum((c - mean) ** 2 for c in used) / k) / mean if k > 1 else SINGLE_CV
    return Pace(mean=mean, cv=cv, weight=float(k), n=len(cycles))


MICROSECOND = timedelta(microseconds=1)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(seconds: float) -> int:
    """`seconds` as Postgres' make_interval(secs => seconds) holds it: whole microseconds,
    rounded half to even (rint)."""
    return round(seconds * 1_000_000.0)


# An expert's kept submissions change only when they submit: their cycles are looked up by
# value, as paces are, and so is the split per skill of the part in the window. Keyed by the
# arrays themselves, never stale.
@functools.lru_cache(maxsize=PACE_CACHE)
def _kept(
    claim: tuple[int, ...], submitted: tuple[int, ...], cap_us: int
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Each kept submission's cycle (newest first), and its time negated (ascending, for
    bisect). A cycle is the time from the expert's previous submission when they claimed
    within the idle cap (`cap_us`) of it (the time between tasks is part of working), else
    from the claim (they were away: a break is not pace), at least a millisecond. Integers of
    microseconds, so the comparisons are the intervals' and each cycle is the double
    extract(epoch)::float8 gave (both correctly rounded)."""
    cycles = []
    last = len(submitted) - 1
    for i, c in enumerate(claim):
        took = c
        if i < last:  # the oldest kept one has no previous submission kept
            p = submitted[i] - submitted[i + 1]
            if c <= p <= c + cap_us:
                took = p
        cycles.append(max(took / 1_000_000, 0.001))
    return tuple(cycles), tuple(-s for s in submitted)


@functools.lru_cache(maxsize=PACE_CACHE)
def _split(skills: tuple[str, ...], cycles: tuple[float, ...]) -> dict[str, tuple[float, ...]]:
    """Cycles per skill (newest first). Cached: callers must not change the dict."""
    found: dict[str, list[float]] = defaultdict(list)
    for skill, cycle in zip(skills, cycles, strict=True):
        found[skill].append(cycle)
    return {k: tuple(v) for k, v in found.items()}


@dataclass(frozen=True)
class Kept:
    """One expert's kept submissions within the history window, newest first: their skills,
    the seconds each cost (`cycles`), and the newest one's time (None when none is in it)."""

    skills: tuple[str, ...]
    cycles: tuple[float, ...]
    newest: datetime | None

    @classmethod
    def of(cls, row: asyncpg.Record, cap_us: int, window_us: int) -> Kept:
        """From a row of forecast_experts (expert_pace's arrays and the
        statement's clock): the submissions at most `window_us` before the clock."""
        submitted = row["p_submitted_us"]
        if not submitted:
            return cls((), (), None)
        cycles, back = _kept(tuple(row["p_claim_us"]), tuple(submitted), cap_us)
        # in the window: clock - window < submitted <= clock (newest first, so a slice)
        clock = (row["clock"] - EPOCH) // MICROSECOND
        lo = bisect.bisect_left(back, -clock)
        hi = bisect.bisect_left(back, window_us - clock)
        if lo >= hi:
            return cls((), (), None)
        newest = EPOCH + timedelta(microseconds=submitted[lo])
        return cls(tuple(row["p_skills"][lo:hi]), cycles[lo:hi], newest)

    def by_skill(self, wanted: set[str]) -> dict[str, tuple[float, ...]]:
        """The cycles per skill among `wanted` (newest first)."""
        return {k: v for k, v in _split(self.skills, self.cycles).items() if k in wanted}


class PaceBook:
    """Every measured pace of the skills asked about, and the priors for the unmeasured."""

    def __init__(self, measured: Iterable[tuple[UUID, str, Sequence[float]]]) -> None:
        self.own = {(e, skill): _pace(tuple(cycles)) for e, skill, cycles in measured}
        per_skill: dict[str, list[Pace]] = defaultdict(list)
        for (_, skill), p in self.own.items():
            per_skill[skill].append(p)
        self.typical = {k: statistics.median(p.mean for p in v) for k, v in per_skill.items()}
        self.typical_cv = {k: statistics.median(p.cv for p in v) for k, v in per_skill.items()}
        self.samples = {k: sum(p.n for p in v) for k, v in per_skill.items()}
        self.fallback = statistics.median(self.typical.values()) if self.typical else None

    def prior(self, skill: str) -> float | None:
        return self.typical.get(skill, self.fallback)

    def expert(self, expert: UUID, skill: str) -> tuple[float, float, float, float] | None:
        """(seconds per task, cv, effective samples, noise) for one expert, or None if unknown.

        noise: the relative variance of the seconds per task from the sampling of the expert's
        own cycles (var / mean^2; none for the prior alone, which no cycle of theirs moved)."""
        prior = self.prior(skill)
        own = self.own.get((expert, skill))
        if own is None:
            if prior is None:
                return None
            return prior, self.typical_cv.get(skill, SINGLE_CV), PRIOR_WEIGHT, 0.0
        k = own.weight
        # the cycles' variance, unbiased (Pace.cv is over k, not k - 1)
        sd2 = (own.cv * own.mean) ** 2 * (k / (k - 1) if k > 1 else 1.0)
        if prior is None:
            return own.mean, own.cv, k, sd2 / k / own.mean**2
        mean = (k * own.mean + PRIOR_WEIGHT * prior) / (k + PRIOR_WEIGHT)
        # var of (k x own mean + w x prior) / (k + w) with the prior fixed: k sd^2 / (k + w)^2
        noise = k * sd2 / (k + PRIOR_WEIGHT) ** 2 / mean**2
        return mean, own.cv, k + PRIOR_WEIGHT, noise
