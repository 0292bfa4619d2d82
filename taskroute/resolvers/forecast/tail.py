"""The tail numerics: how long the last tasks in progress take to end, from the holders' paces
(length-biased residuals of lognormal cycles, integrated by Gauss-Legendre).
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Sequence

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
    (tests/forecast/test_forecast_from_history.py)."""
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
