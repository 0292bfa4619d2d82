"""The routing job: deadline bumps, fairness boosts and skill scarcity, one process at a time.

The claim (`task_claim`) only reads what this job maintains (`tasks.eff_priority`,
`skill_scarcity`), so claims stay a few index probes however the policy evolves.
"""

from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from taskroute.config import Settings
from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput
from taskroute.resolvers.forecast import Forecast, forecasts

log = logging.getLogger(__name__)

# Arbitrary constant naming "the routing job" among advisory locks.
ROUTING_LOCK_KEY = 0x7A5C0006

# Named levels of the project priority (validation.PRIORITY_CLASSES, SQL routing_class()).
PRIORITY_CLASSES = ("high", "normal", "low")


def parse_class_shares(raw: str) -> dict[str, float]:
    """`high=0.5,normal=0.25,low=0.1`: the least share of a skill's claims each class with
    open work gets under saturation. Missing classes get 0 (no guarantee)."""
    shares = dict.fromkeys(PRIORITY_CLASSES, 0.0)
    for part in filter(None, (p.strip() for p in raw.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip().lower()
        if not sep or name not in shares:
            raise BadInput(f"class share {part!r} must be one of high|normal|low=<fraction>")
        try:
            share = float(value)
        except ValueError as exc:
            raise BadInput(f"class share {part!r} is not a number") from exc
        if not 0.0 <= share <= 1.0:
            raise BadInput(f"class share {part!r} must be between 0 and 1")
        shares[name] = share
    if sum(shares.values()) > 1.0 + 1e-9:
        raise BadInput("class shares must add up to at most 1")
    return shares


@dataclass(frozen=True)
class RoutingPolicy:
    # Claims of the last `fair_window` seconds decide who is owed a share.
    fair_window: float = 60.0
    class_shares: dict[str, float] = field(
        default_factory=lambda: {"high": 0.5, "normal": 0.25, "low": 0.1}
    )
    # Inside a class, in a saturated skill, the least share of the class's claims its projects
    # without a deadline split evenly (routing_class_lift); 0: priority is a strict order.
    project_share: float = 0.2
    # A project's own completions over the last `forecast_window` seconds are its realised
    # rate (the deadline bump's second view, next to the forecast).
    forecast_window: float = 600.0
    # Unbump once both views finish within this fraction of the time left.
    unbump_slack: float = 0.8
    # Experts seen (or created) within this many seconds count as active for scarcity.
    active_window: float = 3600.0
    # A skill is scarce when its other active holders per second of backlog are below this
    # fraction of the average over all skills with backlog.
    scarcity_ratio: float = 0.5
    # The forecast's own settings (pace history window, presence window): the same
    # `forecasts` the customers see decides the bumps.
    forecast: Settings = field(default_factory=Settings)

    @classmethod
    def from_settings(cls, settings: Settings) -> RoutingPolicy:
        return cls(
            fair_window=settings.routing_fair_window,
            class_shares=parse_class_shares(settings.routing_class_shares),
            project_share=settings.routing_project_share,
            forecast_window=settings.routing_forecast_window,
            active_window=settings.routing_active_window,
            scarcity_ratio=settings.routing_scarcity_ratio,
            forecast=settings,
        )


@dataclass
class RoutingReport:
    ran: bool = False
    bumps: list[dict[str, Any]] = field(default_factory=list)
    boosted: int = 0
    lifted: int = 0


async def routing_once(
    db: Database, policy: RoutingPolicy, clock: datetime | None = None
) -> RoutingReport:
    """One pass of the job in one transaction; skipped if another process holds the lock.

    `clock` replaces now() in the job's windows (the simulator runs on simulated time).
    """
    report = RoutingReport()
    names = list(policy.class_shares)
    async with db.transaction() as conn:
        if not await conn.fetchval(Q["advisory_xact_try_lock"], ROUTING_LOCK_KEY):
            return report
        report.ran = True
        # Bumps first: they rewrite eff_priority, which the boost below builds on.
        ahead = await forecasts(conn, policy.forecast, None, clock)
        await conn.execute(Q["routing_bump_planning"])
        rows = await conn.fetch(
            Q["routing_deadline_bump"],
            clock,
            policy.forecast_window,
            policy.unbump_slack,
            [f.project_id for f in ahead],
            [f.eta for f in ahead],
            [f.evidence for f in ahead],
        )
        await conn.execute(Q["routing_bump_planning_done"])
        report.bumps = [dict(r) for r in rows]
        boosts = await conn.fetch(
            Q["routing_fair_boost"],
            clock,
            policy.fair_window,
            names,
            [policy.class_shares[n] for n in names],
        )
        report.boosted = sum(r["boosted"] for r in boosts)
        lifts = await conn.fetch(
            Q["routing_class_lift"], clock, policy.fair_window, policy.project_share
        )
        report.lifted = sum(r["lifted"] for r in lifts)
        skills, typical = typical_seconds(ahead)
        await conn.execute(
            Q["routing_scarcity_refresh"],
            clock,
            policy.active_window,
            skills,
            typical,
            policy.scarcity_ratio,
        )
    for b in report.bumps:
        log.info("project %s %sed (remaining %d)", b["project_id"], b["kind"], b["remaining"])
    return report


def typical_seconds(ahead: list[Forecast]) -> tuple[list[str], list[float]]:
    """Typical seconds per task of each skill the forecasts measured a pace for (the median
    over projects of one working expert's cycle); skills left out get the median of these
    in the scarcity SQL."""
    cycles: dict[str, list[float]] = defaultdict(list)
    for f in ahead:
        for s in f.by_skill:
            if s.pace_per_expert > 0:
                cycles[s.skill].append(3600.0 / s.pace_per_expert)
    skills = sorted(cycles)
    return skills, [statistics.median(cycles[s]) for s in skills]
