"""Who is present, and how their time is shared over the work they qualify for: the throughput
each (project, skill) is forecast at.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import asyncpg

from taskroute.resolvers.forecast.pace import Kept, PaceBook
from taskroute.resolvers.forecast.tail import _tail

# An expert without a live lease, idle for this many of their own cycles, has left ...
IDLE_CYCLES = 4.0


# ... but never sooner than this: an expert whose one cycle took milliseconds (a script, a
# click-through) would count as gone before any dashboard could ask. Human cycles of a minute
# or more meet IDLE_CYCLES first, so this changes nothing for them.
IDLE_MIN_SECONDS = 60.0


# Rounds of `_allocate`: each moves an expert's time towards the work of theirs that would
# finish last; the split is settled to well under 1% by then.
ALLOCATE_ROUNDS = 40


# A share of an expert's time below this fraction after the rounds is none.
NEGLIGIBLE_SHARE = 1e-3


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
    scarce skill that also hold busy common skills would give it a sliver forever, and its
    ETAs would come out many times too late.
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
