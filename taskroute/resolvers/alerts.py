"""Deadline risk alerts: a periodic job judges every deadline and records each flip once.

Alerts fire on projects that will miss, not on young ones:
- on track -> at risk when work remains and either the deadline has passed, or the forecast
  rests on evidence (every skill with work left has a pace measured from at least
  `MIN_SAMPLES` submissions, or nobody present holds it) and its ETA is unknown or even the
  early end of its 90% range is after the deadline (a project that will miss, not one whose
  point ETA is a little late by luck). A brand-new project whose pace is only the prior does
  not alert yet.
Hysteresis, so a project hovering at its deadline does not flap:
- at risk -> on track only when all work is done, or the forecast rests on evidence and its
  ETA beats the deadline by at least `forecast_hysteresis` x the time left until the deadline.
Each flip writes one `project_alerts` row ('at_risk' or 'recovered'); staying in a state
writes none. One process evaluates at a time (advisory lock), like the lease sweeper.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import asyncpg

from taskroute.config import Settings
from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.resolvers import cursors, paging
from taskroute.resolvers.forecast import Forecast, forecasts

log = logging.getLogger(__name__)

# Arbitrary constant naming "the deadline evaluator" among advisory locks.
ALERTS_LOCK_KEY = 0x7A5C0006
ALERTS_SHOWN = 50


@dataclass(frozen=True)
class Risk:
    state: str  # 'on_track' | 'at_risk'
    changed_at: datetime | None


def at_risk_now(f: Forecast) -> bool:
    if f.deadline is None or f.remaining == 0:
        return False
    if f.evaluated_at >= f.deadline:
        return True
    if not f.evidence:
        return False
    # Even the early end of the 90% band misses: the project will miss unless something
    # changes (a point ETA a little late is as likely luck as lateness).
    return f.eta_early is None or f.eta_early > f.deadline


def recovered_now(f: Forecast, hysteresis: float) -> bool:
    if f.deadline is None or f.remaining == 0:
        return True
    # a pace from one or two submissions is no more evidence of recovery than of risk
    if f.eta is None or not f.evidence:
        return False
    time_left = f.deadline - f.evaluated_at
    return f.deadline - f.eta >= time_left * hysteresis


def _message(kind: str, f: Forecast) -> str:
    if kind == "recovered":
        return "all work done" if f.remaining == 0 else "back on track to meet the deadline"
    why = "; ".join(f.reasons)
    why = f" ({why})" if why else ""
    if f.eta is None:
        return f"{f.remaining} tasks left and no throughput: the deadline is at risk{why}"
    return f"{f.remaining} tasks left, expected {f.eta.isoformat()}, after the deadline{why}"


async def _judge(conn: asyncpg.Connection, f: Forecast, hysteresis: float) -> str | None:
    """Update the project's risk state; return the alert kind written, if any."""
    row = await conn.fetchrow(Q["risk_lock"], f.project_id)
    before = row["state"] if row else None
    if before == "at_risk":
        after = "on_track" if recovered_now(f, hysteresis) else "at_risk"
    else:
        after = "at_risk" if at_risk_now(f) else "on_track"
    await conn.execute(Q["risk_upsert"], f.project_id, after)
    kind = None
    if after == "at_risk" and before != "at_risk":
        kind = "at_risk"
    elif after == "on_track" and before == "at_risk":
        kind = "recovered"
    if kind:
        await conn.execute(
            Q["alert_insert"],
            f.project_id,
            kind,
            _message(kind, f),
            f.remaining,
            f.eta,
            f.deadline,
        )
    return kind


async def evaluate(
    db: Database, settings: Settings, wait: bool = False, clock: datetime | None = None
) -> int | None:
    """Judge every active project with a deadline; return alerts written.

    None when another process holds the evaluator lock and `wait` is False. `clock` (default:
    the database's now()) lets a simulator judge on simulated time.
    """
    async with db.transaction() as conn:
        if wait:
            await conn.execute(Q["advisory_xact_lock"], ALERTS_LOCK_KEY)
        elif not await conn.fetchval(Q["advisory_xact_try_lock"], ALERTS_LOCK_KEY):
            return None
        written = 0
        for f in await forecasts(conn, settings, None, clock):
            if await _judge(conn, f, settings.forecast_hysteresis):
                written += 1
    if written:
        log.info("deadline evaluator wrote %d alerts", written)
    return written


async def risk(db: Database, project_id: UUID) -> Risk:
    row = await db.fetchrow(Q["risk_get"], project_id)
    if row is None:
        return Risk("on_track", None)
    return Risk(row["state"], row["changed_at"])


async def alerts(db: Database, project_id: UUID, limit: int = ALERTS_SHOWN) -> list[asyncpg.Record]:
    return await db.fetch(Q["alerts_for_project"], project_id, limit)


async def alerts_page(
    db: Database, project_id: UUID, after: str | None, first: int
) -> paging.Page[asyncpg.Record]:
    """The project's alerts, newest first."""
    size = paging.size(first)
    below = None if after is None else cursors.decode_seq(after, "alert")
    return await paging.read(
        db, "alerts_page", project_id, below, first=size,
        cursor=lambda r: cursors.encode("alert", str(r["seq"])),
    )  # fmt: skip


async def latest_alert_seq(db: Database, project_id: UUID) -> int:
    """The newest alert's sequence number (0: none yet): where a subscriber starts."""
    return int(await db.fetchval(Q["alert_latest_seq"], project_id))
