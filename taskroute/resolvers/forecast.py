"""Deadline forecasts: remaining work against the pace measured from the work itself.

The facts are maintained as the work happens (triggers), so a forecast reads a few rows
whatever the history: `forecast_counts` (task counts per project and skill) and
`forecast_experts` (the present experts, their skills, and their newest submissions). Per
(project, skill):
- remaining = open slots + in-flight (claimed) slots; the ETA counts an in-flight slot as half
  done (on average it is);
- cycle of one submission = the seconds it cost its expert (from their previous submission when
  they went straight on, else from the claim: breaks are not pace);
- an expert's pace in a skill = 1 / their mean cycle since their last change of pace: the
  newest cycles are tested against the older ones (log scale, pooled t statistic, the best
  split); only a split beyond CHANGE_T restarts the measure, so a steady expert's pace uses
  all their history (as precise as it gets) and a changed one forgets the old pace within a
  few tasks. The mean is shrunk towards the skill's typical cycle (median over its experts)
  by PRIOR_WEIGHT pseudo-submissions; a present expert with no history in the skill gets the
  typical cycle, and a skill with no history the median over the other skills;
- a mean of k cycles is an unbiased time per task but 1 / it over-estimates the rate (Jensen,
  by about cv^2 / k), and the ETA of n experts is remaining / the sum of their rates: the
  throughput an ETA is computed at takes out that bias to second order from each mean's own
  sampling variance (`_capacity`; one expert's ETA stays remaining x their mean);
- present = active and seen within the presence window or holding a live lease, and not idle
  (no live lease, nothing done) for more than IDLE_CYCLES of their own cycles (and at least
  IDLE_MIN_SECONDS): someone who logged off stops counting within minutes, not at the end of
  the presence window;
- throughput = sum over present qualified experts of share x pace. An expert's time is split
  evenly over every (project, skill) with work left they qualify for, then the part on the
  skills asked about moves towards the work of theirs that would finish last (`_allocate`:
  work-conserving, as the claim's scarce-first order does); the projects of one skill share
  its rate, each finished project's part going to the others (`_part`), so the largest ends
  with the skill's whole backlog and a small one early;
- eta = now + remaining / throughput + the tail while tasks are open (the first claim after
  the shortest residual of the tasks in progress, then the last claimer's fresh cycle or the
  others' residuals, whichever is longer: `_tail`; a task in progress seen at a random
  moment is length-biased, and each expert has their own pace and spread); once all are
  claimed, now + the longest residual of the tasks in progress, each from its holder's pace
  and its age (the leases: `_held_end`; `_dry_end`, anyone's at a random moment, when a
  holder's pace is unknown)
  (None when work remains and nobody present holds the skill, or nothing at all was measured
  yet: `reason` says which);
- range: the relative spread of the ETA combines the uncertainty of the measured means (the
  cycles' coefficient of variation / sqrt(samples)) and the luck of the remaining tasks
  (cv / sqrt(remaining)); early/late are the 90% band, throughput x (1 +/- 1.645 x spread);
- extra_experts: experts at the skill's typical pace to add so the ETA meets the deadline.
The project's forecast is the latest of its skills (skills progress in parallel).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.config import Settings
from taskroute.db.queries import Q

# A pooled t statistic (log cycles, newest vs older) beyond this is a change of pace. High
# enough that the best of ~40 splits of a steady expert rarely passes it; a doubling of the
# cycle passes it after about four tasks.
CHANGE_T = 4.0
# Fewest cycles on either side of a change of pace.
MIN_SEGMENT = 3
# Pseudo-submissions of the skill's typical cycle mixed into every expert's own estimate.
PRIOR_WEIGHT = 1.0
# An expert without a live lease, idle for this many of their own cycles, has left ...
IDLE_CYCLES = 4.0
# ... but never sooner than this: an expert whose one cycle took milliseconds (a script, a
# test's expert, a click-through) counted as gone 0.1 s after their submit, before any
# dashboard could ask (tests/test_dashboard_browser.py failed on an idle machine and passed on
# a loaded one). Human cycles of a minute or more meet IDLE_CYCLES first, so this changes nothing
# for them.
IDLE_MIN_SECONDS = 60.0
# Rounds of `_allocate`: each moves an expert's time towards the work of theirs that would
# finish last; the split is settled to well under 1% by then (tests/test_forecast.py).
ALLOCATE_ROUNDS = 40
# A share of an expert's time below this fraction after the rounds is none.
NEGLIGIBLE_SHARE = 1e-3
# Fewer samples than this behind a pace and the forecast is not evidence enough to alert.
MIN_SAMPLES = 3
# The coefficient of variation assumed for a pace measured from one cycle.
SINGLE_CV = 0.5
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


@dataclass(frozen=True)
class Present:
    """A present expert: their skills (with quality) and how many demands share their time."""

    expert_id: UUID
    quality: dict[str, float]
    demands: int


@dataclass(frozen=True)
class Capacity:
    """Who works on one (skill, quality bar), and what they add up to (the same for every
    project with that skill and bar, so computed once per forecast, not once per project)."""

    experts: list[tuple[UUID, float]]  # (expert, share)
    throughput: float  # tasks per second
    var: float  # variance of the throughput estimate
    weighted_cv: float  # sum of rate x cv
    equiv: float  # sum of shares
    tail: float = 0.0  # seconds the end adds at `throughput` while tasks are open (`_tail`)
    paces: tuple[tuple[float, float], ...] = ()  # (mean cycle, cv) of those with a pace


def _present(rows: list[asyncpg.Record], kept: dict[UUID, Kept], now: datetime) -> list[Present]:
    """The experts still at work: a live lease, or idle for fewer than IDLE_CYCLES cycles."""
    found = []
    for r in rows:
        k = kept[r["expert_id"]]
        if not r["working"] and k.cycles:
            active = max(t for t in (r["last_seen_at"], k.newest) if t is not None)
            idle = (now - active).total_seconds()
            if idle > max(IDLE_MIN_SECONDS, IDLE_CYCLES * statistics.median(k.cycles)):
                continue
        quality = dict(zip(r["skills"], r["qualities"], strict=True))
        found.append(Present(r["expert_id"], quality, max(1, r["demands"])))
    return found


Group = tuple[str, float]  # (skill, min_quality): the work one set of experts may do


def _left(open_: int, in_flight: int) -> float:
    return open_ + 0.5 * in_flight  # an in-flight slot is half done on average


def _allocate(
    present: list[Present], lefts: dict[Group, dict[UUID, float]], book: PaceBook
) -> dict[Group, list[tuple[UUID, float]]]:
    """Each present expert's share of their time per group of work they qualify for.

    An expert's time is first split as the claim sees it: evenly over every (project, skill)
    with work left they qualify for (`demands`, all skills); the part that falls on the
    groups asked about (`lefts`) then moves, round by round, towards the groups of theirs
    that would finish last at the current split (multiplicative: share x time to finish).
    An expert's work-conserving day: time freed where the work is done goes to the work
    that is left, and an expert holding a scarce skill spends it there rather than on
    common work others do (the claim's scarce-first order). Split evenly, the experts of a
    scarce skill that also hold busy common skills gave it a sliver forever: the largest
    project's ETA came out 6x its finish in bench/routing.py's worlds (31,963 s forecast at
    600 s, finished at 5,487 s), so every project was bumped as soon as the pace was measured.
    """
    # Groups by index, and every expert's split laid out flat (group, share, rate), experts in
    # turn: the rounds are the forecast's hottest loop (a third of a one-project forecast's
    # Python at 100k tasks, py-spy). The arithmetic and its order are the dicts' they replace
    # (the same products, summed in the same order), so the figures are the same to the bit.
    keys = list(lefts)
    work = [sum(by.values()) for by in lefts.values()]
    projects = [sum(1 for v in by.values() if v > 0) for by in lefts.values()]
    shares: dict[Group, list[tuple[UUID, float]]] = {g: [] for g in keys}
    gs: list[int] = []  # group of each (expert, busy group)
    xs: list[float] = []  # the expert's share of their time there
    rs: list[float] = []  # their rate there (tasks per second of full time)
    # (expert, groups they qualify for, where their busy groups start in gs and end, time)
    plans: list[tuple[UUID, list[int], int, int, float]] = []
    for p in present:
        mine = [i for i, (skill, bar) in enumerate(keys) if p.quality.get(skill, -1.0) >= bar]
        if not mine:
            continue
        busy = [i for i in mine if work[i] > 0]
        asked = sum(projects[i] for i in busy)
        if not busy or asked == 0:
            for i in mine:  # nothing left where they qualify: shares of no consequence
                shares[keys[i]].append((p.expert_id, 1.0 / p.demands))
            continue
        time = min(1.0, asked / p.demands)
        lo = len(gs)
        for i in busy:
            pace = book.expert(p.expert_id, keys[i][0])
            gs.append(i)
            xs.append(time * projects[i] / asked)
            rs.append(1.0 / pace[0] if pace else 0.0)
        plans.append((p.expert_id, mine, lo, len(gs), time))
    # only an expert with two or more busy groups has time to move
    moving = [(lo, hi, time) for _e, _m, lo, hi, time in plans if hi - lo > 1]
    inf = math.inf
    for _ in range(ALLOCATE_ROUNDS if plans else 0):
        rate = [0.0] * len(keys)
        for i, x, r in zip(gs, xs, rs, strict=True):
            rate[i] += x * r
        finish = [w / r if r > 0 else inf for w, r in zip(work, rate, strict=True)]
        for lo, hi, time in moving:
            if hi - lo == 2:  # most of them: the general case below, unrolled
                fa, fb = finish[gs[lo]], finish[gs[lo + 1]]
                longest = fa if fa >= fb else fb
                if longest == inf:
                    continue
                sa, sb = xs[lo] * fa / longest, xs[lo + 1] * fb / longest
                total = sum((sa, sb))
                xs[lo], xs[lo + 1] = time * sa / total, time * sb / total
                continue
            longest = max([finish[gs[j]] for j in range(lo, hi)])
            if longest == inf:
                # work nobody measured: keep the even split (no evidence to move time on)
                continue
            scaled = [xs[j] * finish[gs[j]] / longest for j in range(lo, hi)]
            total = sum(scaled)
            xs[lo:hi] = [time * s / total for s in scaled]
    for expert, mine, lo, hi, time in plans:
        of = dict(zip(gs[lo:hi], xs[lo:hi], strict=True))
        for i in mine:
            # a share the rounds have all but emptied is none (it would count in the tail)
            x = of.get(i, 0.0)
            if x >= NEGLIGIBLE_SHARE * time:
                shares[keys[i]].append((expert, x))
    return shares


def _capacity(experts: list[tuple[UUID, float]], skill: str, book: PaceBook) -> Capacity:
    """The group's throughput, at which remaining / throughput is the expected time to do it.

    Each expert's mean cycle is an unbiased time per task, but share / mean over-estimates
    their rate: E[1 / m] = (1 / mu) (1 + v) to second order (v: the mean's relative sampling
    variance, cv^2 / k for k cycles). And remaining / (sum of rates) is convex in the sum,
    E[1 / R] = (1 / E[R]) (1 + Var R / E[R]^2). Together E[1 / R] = (1 / R) (1 - B / R +
    V / R^2) with B = sum of rate x v and V = sum of rate^2 x v, so the throughput is divided
    by (1 + B / R - V / R^2): none for one expert (remaining x their mean is unbiased), ~cv^2
    / k for many. Without it the ETAs come out early by about that much."""
    throughput = var = weighted_cv = bias = noise = 0.0
    paces = []
    for expert, share in experts:
        pace = book.expert(expert, skill)
        if pace is None:
            continue
        mean, cv, weight, v = pace
        rate = share / mean
        throughput += rate
        var += (rate * cv) ** 2 / weight
        weighted_cv += rate * cv
        bias += rate * v
        noise += rate * rate * v
        paces.append((mean, cv))
    if throughput > 0:
        unbias = 1 + bias / throughput - noise / throughput**2
        throughput /= unbias
        var /= unbias * unbias
        weighted_cv /= unbias
    equiv = sum(share for _, share in experts)
    # the tail is the group's: a project's part scales rate and shares alike (`_part`)
    tail = _tail(tuple(paces), throughput, equiv)
    return Capacity(experts, throughput, var, weighted_cv, equiv, tail, tuple(paces))


class Sharing:
    """How a group's projects share its rate (processor sharing, `_part`), prepared once per
    group: the projects' work sorted, with prefix sums, so each project's part is a binary
    search: summed afresh for each project, a list of projects would cost O(n^2)."""

    def __init__(self, by_project: dict[UUID, float]) -> None:
        self.work = by_project
        self._sorted = sorted(by_project.values())
        self._prefix = list(itertools.accumulate(self._sorted, initial=0.0))
        self._busy = max(1, sum(1 for v in self._sorted if v > 0))

    def ahead(self, mine: float) -> float:
        """Work the group does before a project with `mine` left is done: sum of min(v, mine)."""
        below = bisect.bisect_right(self._sorted, mine)
        return self._prefix[below] + mine * (len(self._sorted) - below)

    def part(self, project: UUID) -> float:
        mine = self.work.get(project, 0.0)
        ahead = self.ahead(mine)
        return mine / ahead if ahead > 0 else 1.0 / self._busy


def _part(group: Capacity, sharing: Sharing, project: UUID) -> Capacity:
    """One project's part of its group's capacity. The group's projects share it, and as
    each one finishes its part goes to the others (processor sharing): the project is done
    once the group has done sum over projects of min(theirs, its own) of work, so its part
    of the rate is its own work over that (the largest project ends with the group's whole
    backlog, a small one early)."""
    part = sharing.part(project)
    return Capacity(
        [(e, share * part) for e, share in group.experts],
        group.throughput * part,
        group.var * part * part,
        group.weighted_cv * part,
        group.equiv * part,
        group.tail,
        group.paces,
    )


def _on_track(remaining: int, eta: datetime | None, deadline: datetime | None) -> bool:
    if remaining == 0 or deadline is None:
        return True
    return eta is not None and eta <= deadline


# Gauss-Legendre nodes and weights on [0, 1] (4 points: exact for cubics), and the pieces of
# [0, the cycles' near-maximum] `_ends` integrates over (8, plus breakpoints): for cycles
# without spread the integrands are polynomials between breakpoints; for spread cycles they are
# smooth. Against brute-force sums on one-minute cycles (cv 0.05-0.8, 1-200 experts) within
# 0.06 s up to cv 0.3 and 1.1 s of 412 at cv 0.8 with 200 experts (the 4 log-sd cut-off).
_GL4 = tuple(
    (0.5 + 0.5 * x, 0.5 * w)
    for x, w in (
        (-0.8611363115940526, 0.3478548451374538),
        (-0.3399810435848563, 0.6521451548625461),
        (0.3399810435848563, 0.6521451548625461),
        (0.8611363115940526, 0.3478548451374538),
    )
)
TAIL_PIECES = 8
# A cycle's spread below this is none (the residual is uniform over the cycle).
EXACT_CV = 1e-6
# The residuals' near-maximum: this many log-sd above a lognormal cycle's median.
TAIL_SIGMAS = 4.0
SQRT2 = math.sqrt(2)


# The tail is a pure function of the (mean cycle, cv) of the experts with a share in the group,
# not of the shares: a claim or a new project leaves it as it was, and a submit changes it only
# for the groups of that skill. Looked up by value (never stale): a fifth of a one-project
# forecast's Python at 100k tasks (py-spy). Sized for the (skill, quality bar) groups of a busy
# deployment and their recent versions (an entry of 200 experts is ~21 kB).
TAIL_CACHE = 256


def _sds(paces: tuple[tuple[float, float], ...]) -> list[tuple[float, float]]:
    """(mean cycle, log-sd) per expert: the lognormal of mean c and that cv."""
    return [(c, math.sqrt(math.log1p(cv * cv)) if cv > EXACT_CV else 0.0) for c, cv in paces]


def _grid(sds: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (r, weight) nodes the ends are integrated over: Gauss nodes on pieces of [0, the
    residuals' near-maximum].

    Breakpoints: the cycles without spread (their cdfs have a kink or a step there), and
    multiples of the time between claims, over which the shortest residual's integrand falls
    (~exp(-r x rate)): 8 even pieces of [0, top] gave E[min] of 200 experts 0.3 s off."""
    top = max(c * math.exp(s * (TAIL_SIGMAS - s / 2)) for c, s in sds)
    scale = 1.0 / sum(1.0 / c for c, _ in sds)
    near = (scale * 2.0**k for k in range(-1, 5))
    marks = sorted({0.0, top, *(c for c, s in sds if s == 0.0), *(m for m in near if m < top)})
    return _nodes(marks)


def _nodes(marks: list[float]) -> list[tuple[float, float]]:
    """(r, weight): Gauss nodes on the pieces between sorted breakpoints from 0 to the last
    (the top), each piece cut into about TAIL_PIECES per top's length."""
    top = marks[-1]
    nodes: list[tuple[float, float]] = []
    for a, b in itertools.pairwise(marks):
        k = max(1, math.ceil(TAIL_PIECES * (b - a) / top))
        for lo, hi in ((a + (b - a) * i / k, a + (b - a) * (i + 1) / k) for i in range(k)):
            # r > 0: no Gauss node sits on a piece's end
            nodes += [(lo + (hi - lo) * x, w * (hi - lo)) for x, w in _GL4]
    return nodes


def _claim_odds(sds: list[tuple[float, float]]) -> list[float]:
    """P(expert i makes a given claim): their pace over the sum of paces."""
    rates = [1.0 / c for c, _ in sds]
    total_rate = sum(rates)
    return [rate / total_rate for rate in rates]


def _cdfs(r: float, sds: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Per expert, in closed form: P(residual of a task in progress <= r), P(fresh cycle <= r)."""
    res: list[float] = []
    fresh: list[float] = []
    for c, s in sds:
        if s <= 0.0:
            res.append(min(1.0, r / c))
            fresh.append(1.0 if r >= c else 0.0)
            continue
        z = (math.log(r / c) + s * s / 2) / s
        longer = 0.5 * math.erfc(z / SQRT2)  # P(cycle > r)
        res.append(0.5 * math.erfc((s - z) / SQRT2) + r / c * longer)
        fresh.append(1.0 - longer)
    return res, fresh


@functools.lru_cache(maxsize=TAIL_CACHE)
def _ends(paces: tuple[tuple[float, float], ...]) -> tuple[float, float]:
    """The two ways the work of n experts ends, one per (mean cycle, cv), in seconds from now:
    - every task claimed: the longest residual of the n tasks in progress, E[max];
    - tasks still to claim: the first claim (the shortest residual, E[min]) plus, after the
      last claim, the longer of the claimer's whole fresh cycle and the others' residuals
      (the claimer is expert i with probability pace_i / sum of paces).
    Each E[] is the integral over r of its integrand, in one pass over the same nodes.

    Seen at a random moment a task in progress is length-biased (long ones are more likely
    to be in progress): its residual has density P(cycle > r) / mean, mean cycle (1 + cv^2)
    / 2; a fresh cycle is lognormal with mean c and log-sd s."""
    sds = _sds(paces)
    claimer = _claim_odds(sds)  # who claims the last open task
    longest = shortest = after_last = 0.0
    for r, span in _grid(sds):
        res, fresh = _cdfs(r, sds)
        every = none = 1.0
        for q in res:
            every *= q
            none *= 1.0 - q
        # sum over claimers i of p_i P(fresh_i <= r) prod over j != i of P(res_j <= r),
        # with the products of the others from both sides (no division by a zero cdf)
        below = [1.0]
        for q in res[:-1]:
            below.append(below[-1] * q)
        above, mix = 1.0, 0.0
        for i in range(len(res) - 1, -1, -1):
            mix += claimer[i] * fresh[i] * below[i] * above
            above *= res[i]
        longest += span * (1.0 - every)
        shortest += span * none
        after_last += span * (1.0 - mix)
    return longest, shortest + after_last


@functools.lru_cache(maxsize=TAIL_CACHE)
def _dry_end(paces: tuple[tuple[float, float], ...], held: int) -> float:
    """Seconds until the last of `held` tasks in progress is done, once none is left to claim.

    As many tasks as experts (or more: an expert holds one at a time): each expert's
    length-biased residual, the longest of them (`_ends`). Fewer: the forecast counts a
    project's tasks in progress, not who holds them, so each is held by expert i with the
    claim's odds (pace_i / sum of paces) and the end is the longest of `held` such residuals.
    Taken as every expert holding one, one task in progress beside an idle expert (exact
    10-minute cycles) came out at 250 s against the 300 s its residual averages
    (tests/test_forecast.py)."""
    if held >= len(paces):
        return _ends(paces)[0]
    sds = _sds(paces)
    odds = _claim_odds(sds)
    longest = 0.0
    for r, span in _grid(sds):
        res, _fresh = _cdfs(r, sds)
        mixed = sum(p * q for p, q in zip(odds, res, strict=True))
        longest += span * (1.0 - mixed**held)
    return longest


# An age past this many log-sd above a cycle's median is taken as this one: a task held that
# much longer than its holder's cycles says nothing more about its end (the holder stepped
# away; the heartbeat timeout and the lease bound it), and the survival ratios underflow.
AGE_SIGMAS = TAIL_SIGMAS
_UNIT = statistics.NormalDist()
# P(z > TAIL_SIGMAS): how much of a residual lies past its near-maximum.
_PAST_TOP = _UNIT.cdf(-TAIL_SIGMAS)


# Where a residual's cdf climbs: marks at these quantiles of each one (and its near-maximum)
# split the integral into pieces over which Gauss-Legendre is exact enough; of many tasks the
# largest marks only (the longest residual lives there; below them the product is ~0).
HELD_QUANTILES = (0.05, 0.5, 0.95)
HELD_MARKS = 64


def _survival(x: float, c: float, s: float) -> float:
    """P(cycle > x), cycles lognormal of mean `c` and log-sd `s` (> 0)."""
    return 0.5 * math.erfc((math.log(x / c) + s * s / 2) / s / SQRT2)


def _residual(c: float, s: float, age: float) -> tuple[float, float, list[float]]:
    """(the age conditioned on, P(cycle > it), the residual at HELD_QUANTILES and at its
    near-maximum) of a task in progress for `age` seconds, its holder's cycles lognormal of
    mean `c` and log-sd `s`."""
    mu = math.log(c) - s * s / 2
    age = min(age, math.exp(mu + AGE_SIGMAS * s))
    alive = _survival(age, c, s) if age > 0 else 1.0
    # P(cycle > age + x | cycle > age) = 1 - q: the cycle's survival at alive x (1 - q)
    marks = [
        math.exp(mu - _UNIT.inv_cdf(alive * (1.0 - q)) * s) - age
        for q in (*HELD_QUANTILES, 1.0 - _PAST_TOP)
    ]
    return age, alive, marks


def _held_end(held: Sequence[tuple[float, float, float]]) -> float:
    """Seconds until the last task in progress is done, once none is left to claim, when who
    holds each is known (the leases): per task, its holder's (mean cycle, cv) and its age.

    Each residual is its holder's cycle less the age, given that the cycle is longer than
    the age (a task held for a while has less left; exact cycles: c - age); the end is the
    longest of them, E[max] = the integral over r of 1 - prod P(residual_i <= r). Without the
    holders (`_dry_end`) each task is anyone's, seen at a random moment: asked at the last
    claim, those ends come out earlier than the ends from the holders."""
    exact: list[float] = []  # residuals of holders without spread
    spread: list[tuple[float, float, float, float]] = []  # (c, s, age, P(cycle > age))
    marks = {0.0}
    for c, cv, age in held:
        if cv <= EXACT_CV:
            exact.append(max(c - age, 0.0))
            marks.add(exact[-1])
            continue
        s = math.sqrt(math.log1p(cv * cv))
        age, alive, quantiles = _residual(c, s, age)
        spread.append((c, s, age, alive))
        marks.update(q for q in quantiles if q > 0.0)
    ordered = sorted(marks)
    if ordered[-1] <= 0.0:
        return 0.0
    longest = 0.0
    for r, span in _nodes([0.0, *ordered[1:][-HELD_MARKS:]]):
        every = 1.0  # P(every residual <= r)
        if all(r >= d for d in exact):
            for c, s, age, alive in spread:
                every *= 1.0 - _survival(age + r, c, s) / alive
        else:
            every = 0.0
        longest += span * (1.0 - every)
    return longest


def clear_caches() -> None:
    """Forget everything looked up by value: paces, tails, kept cycles (benches time a forecast
    without them)."""
    _pace.cache_clear()
    _ends.cache_clear()
    _dry_end.cache_clear()
    _kept.cache_clear()
    _split.cache_clear()


def _tail(paces: tuple[tuple[float, float], ...], throughput: float, equiv: float) -> float:
    """Seconds the end of the work adds to remaining / throughput (which counts the open
    tasks at one claim per 1 / throughput, and each of the `equiv` experts' tasks in progress
    as half done) while tasks are still to claim (once every one is claimed: `_dry_end`).

    Still to claim (O open): the O-th claim comes after the first (the shortest residual) and
    O - 1 more at the group's rate; the work ends with the longer of the claimer's fresh cycle
    and the others' residuals. The former model, the longest of n residuals after O / rate,
    took the last claimer to be mid-task like the others, which came out early; this one is
    close for any number of experts, and the same for one expert (exact there: O c + c (1 +
    cv^2) / 2). Every expert with a share is taken to hold one (the project that ends last
    has the whole group at its end)."""
    if not paces or throughput <= 0:
        return 0.0
    _longest, first_and_last = _ends(paces)
    return first_and_last - (1.0 + 0.5 * equiv) / throughput


def _skill(
    row: asyncpg.Record,
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
    skills = sorted({r["skill"] for r in rows})
    window = settings.forecast_window
    # the idle cap is the presence window (the longest gap between tasks that is working)
    cap_us, window_us = micros(settings.forecast_presence), micros(window)
    experts = await conn.fetch(
        Q["forecast_experts"],
        settings.forecast_presence,
        clock,
        skills if project_id is not None else None,
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
