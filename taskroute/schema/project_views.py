"""Forecasts, risk alerts and progress by skill: the customer's view of a project.

`Project.forecast`, `Project.alerts` and `Project.progressBySkill` resolve here (wired in
types.py). This module must not import `types` (types imports it).

`forecastUpdated(projectId)` is an async generator that re-evaluates the forecast when the
project's tasks change (the hub's progress NOTIFY) or, with nothing changing, every
`forecast_poll` seconds, and yields only when what a subscriber sees changed (remaining work,
throughput, on-track, ETA to the minute, risk state, or a new alert). The subscribers of one
project share each evaluation (`realtime/shared.py`): N dashboards cost one, not N polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Any

import strawberry
from strawberry.relay import PageInfo
from strawberry.scalars import JSON

from taskroute.resolvers import alerts as alert_domain
from taskroute.resolvers import customer_views
from taskroute.resolvers import forecast as fc
from taskroute.resolvers.accounts.credentials import parse_id
from taskroute.resolvers.projects import visible_project

from .context import Context
from .paging import page_info

Info = strawberry.Info[Context, None]


@strawberry.type
class SkillProgress:
    skill: str
    total: int
    open: int
    claimed: int
    done: int
    failed: int
    canceled: int


@strawberry.type(description="Forecast of one skill of a project.")
class SkillForecast:
    skill: str
    total: int
    done: int
    remaining: int = strawberry.field(description="open slots plus in-flight (claimed) slots")
    in_flight: int
    active_experts: int = strawberry.field(
        description="present experts qualified for this skill and project"
    )
    expert_equivalents: float = strawberry.field(
        description="active experts weighted by the share of their time this project gets"
    )
    tasks_per_expert_hour: float
    throughput_per_hour: float
    eta: datetime | None
    eta_early: datetime | None
    eta_late: datetime | None
    on_track: bool
    extra_experts_needed: int | None = strawberry.field(
        description="dedicated experts to add to meet the deadline; null when unknown"
    )
    pace_samples: int = strawberry.field(
        description="recent submissions of the skill the pace was measured from"
    )
    reason: str | None = strawberry.field(
        description="why the ETA is unknown or late (no present expert holds the skill; "
        "N more experts needed); null when on track"
    )

    @classmethod
    def of(cls, s: fc.SkillForecast) -> SkillForecast:
        return cls(
            skill=s.skill,
            total=s.total,
            done=s.done,
            remaining=s.remaining,
            in_flight=s.in_flight,
            active_experts=s.active_experts,
            expert_equivalents=s.expert_equiv,
            tasks_per_expert_hour=s.pace_per_expert,
            throughput_per_hour=s.throughput,
            eta=s.eta,
            eta_early=s.eta_early,
            eta_late=s.eta_late,
            on_track=s.on_track,
            extra_experts_needed=s.extra_experts,
            pace_samples=s.samples,
            reason=s.reason,
        )


@strawberry.type
class Forecast:
    project_id: strawberry.ID
    deadline: datetime | None
    evaluated_at: datetime
    remaining: int
    throughput_per_hour: float
    eta: datetime | None = strawberry.field(description="null when work remains but no throughput")
    eta_early: datetime | None
    eta_late: datetime | None
    on_track: bool = strawberry.field(description="the ETA meets the deadline (this instant)")
    at_risk: bool = strawberry.field(
        description="the alerting state, with hysteresis (see project.alerts)"
    )
    by_skill: list[SkillForecast]
    reasons: list[str] = strawberry.field(
        description="why the ETA is unknown or late, per skill (empty when on track)"
    )

    @classmethod
    def of(cls, f: fc.Forecast, risk: alert_domain.Risk) -> Forecast:
        return cls(
            project_id=strawberry.ID(str(f.project_id)),
            deadline=f.deadline,
            evaluated_at=f.evaluated_at,
            remaining=f.remaining,
            throughput_per_hour=f.throughput,
            eta=f.eta,
            eta_early=f.eta_early,
            eta_late=f.eta_late,
            on_track=f.on_track,
            at_risk=risk.state == "at_risk",
            by_skill=[SkillForecast.of(s) for s in f.by_skill],
            reasons=f.reasons,
        )


@strawberry.type
class Alert:
    id: strawberry.ID
    kind: str = strawberry.field(description="'at_risk' or 'recovered'")
    message: str
    remaining: int
    eta: datetime | None
    deadline: datetime | None
    created_at: datetime

    @classmethod
    def of(cls, row: Any) -> Alert:
        return cls(
            id=strawberry.ID(str(row["id"])),
            kind=row["kind"],
            message=row["message"],
            remaining=row["remaining"],
            eta=row["eta"],
            deadline=row["deadline"],
            created_at=row["created_at"],
        )


@strawberry.type
class AlertEdge:
    cursor: str
    node: Alert


@strawberry.type
class AlertConnection:
    edges: list[AlertEdge]
    page_info: PageInfo


@strawberry.type
class ForecastUpdate:
    forecast: Forecast
    alert: Alert | None = strawberry.field(description="an alert recorded since the last update")


async def _forecast(info: Info, project: Any) -> Forecast:
    ctx = info.context
    async with ctx.db.connection() as conn:
        f = await fc.project_forecast(conn, ctx.settings, project)
    return Forecast.of(f, await alert_domain.risk(ctx.db, project["id"]))


async def _project(info: Info, project_id: Any) -> Any:
    viewer = await info.context.viewer()
    return await visible_project(info.context.db, viewer, parse_id(project_id, "project"))


# --- Project fields (the parent was already authorised when the project was read) --------


async def project_forecast(root: strawberry.Parent[Any], info: Info) -> Forecast:
    return await _project_forecast_by_id(info, root.id)


async def _project_forecast_by_id(info: Info, project_id: Any) -> Forecast:
    return await _forecast(info, await _project(info, project_id))


async def project_alert_history(
    root: strawberry.Parent[Any], info: Info, after: str | None = None, first: int = 20
) -> AlertConnection:
    page = await alert_domain.alerts_page(info.context.db, parse_id(root.id), after, first)
    edges = [AlertEdge(cursor=c, node=Alert.of(r)) for c, r in page.pairs()]
    return AlertConnection(edges=edges, page_info=page_info(page, after))


async def project_alerts(root: strawberry.Parent[Any], info: Info, first: int = 20) -> list[Alert]:
    limit = max(1, min(first, alert_domain.ALERTS_SHOWN))
    rows = await alert_domain.alerts(info.context.db, parse_id(root.id), limit)
    return [Alert.of(r) for r in rows]


@strawberry.type(
    description="Progress by item: an item with redundancy k has k answer slots (Progress "
    "counts those); it is resolved once its answers agree or an adjudication settles it."
)
class ItemProgress:
    total: int = strawberry.field(description="the project's items (gold items excluded)")
    resolved: int = strawberry.field(description="items with a resolved result")


async def project_item_progress(root: strawberry.Parent[Any], info: Info) -> ItemProgress:
    return ItemProgress(**await customer_views.item_progress(info.context.db, parse_id(root.id)))


async def project_progress_by_skill(
    root: strawberry.Parent[Any], info: Info
) -> list[SkillProgress]:
    rows = await customer_views.progress_by_skill(info.context.db, parse_id(root.id))
    return [SkillProgress(**r) for r in rows]


@strawberry.type
class ForecastQuery:
    @strawberry.field(description="When the project's remaining work is expected to be done.")
    async def forecast(self, info: Info, project_id: strawberry.ID) -> Forecast:
        return await _project_forecast_by_id(info, project_id)


@strawberry.type
class ForecastMutation:
    @strawberry.mutation(description="Admin: judge every deadline now; returns alerts written.")
    async def evaluate_deadlines(self, info: Info) -> int:
        (await info.context.viewer()).require_admin()
        written = await alert_domain.evaluate(info.context.db, info.context.settings, wait=True)
        return written or 0


@strawberry.type
class ForecastSubscription:
    @strawberry.subscription
    async def forecast_updated(
        self, info: Info, project_id: strawberry.ID
    ) -> AsyncGenerator[ForecastUpdate, None]:
        viewer = await info.context.viewer()
        project = await _project(info, project_id)
        db = info.context.db
        settings = info.context.settings
        hub = info.context.services.hub
        shared = info.context.services.forecasts
        seen_alerts = await alert_domain.latest_alert_seq(db, project["id"])
        last: tuple[Any, ...] | None = None

        async def evaluate() -> tuple[Any, Any, Any]:
            async with db.connection() as conn:
                f = await fc.project_forecast(conn, settings, project)
            risk = await alert_domain.risk(db, project["id"])
            newest = await alert_domain.alerts(db, project["id"], 1)
            return f, risk, newest[0] if newest else None

        with info.context.subscription_slot(viewer):
            watch_cm = hub.progress_watch(project["id"]) if hub is not None else None
            async with watch_cm or contextlib.nullcontext() as watch:
                counts: Any = None
                while True:
                    # Re-evaluate when the project's tasks change (the progress NOTIFY) or,
                    # with nothing changing, once per `forecast_poll` (time moves an ETA).
                    # Subscribers of one project share each evaluation: the key is the
                    # counts they all saw and the interval they are in.
                    bucket = int(time.monotonic() / settings.forecast_poll)
                    f, risk, newest = await shared.get(
                        (project["id"], repr(counts), bucket), evaluate
                    )
                    alert = None
                    if newest is not None and newest["seq"] > seen_alerts:
                        seen_alerts = newest["seq"]
                        alert = Alert.of(newest)
                    signature = (f.signature(), risk.state)
                    if alert is not None or signature != last:
                        last = signature
                        yield ForecastUpdate(forecast=Forecast.of(f, risk), alert=alert)
                    counts = await _next_change(watch, settings.forecast_poll, counts)


async def _next_change(watch: Any, timeout: float, counts: Any) -> Any:
    """The project's task counts after the next change, or the same counts after `timeout`."""
    if watch is None:
        await asyncio.sleep(timeout)
        return counts
    try:
        return await asyncio.wait_for(watch.next(), timeout)
    except TimeoutError:
        return counts


@strawberry.type(description="An item that left the pool: experts released it as BAD_ITEM.")
class FlaggedItem:
    item_id: strawberry.ID
    external_id: str | None
    flagged_at: datetime
    reasons: JSON = strawberry.field(
        description='the experts\' release reasons, counted: {"BAD_ITEM": 2, "SKIP": 1}'
    )


async def project_flagged_items(
    root: strawberry.Parent[Any], info: Info, first: int = 100
) -> list[FlaggedItem]:
    rows = await customer_views.flagged_items(info.context.db, parse_id(root.id), first)
    return [
        FlaggedItem(
            item_id=strawberry.ID(str(r["item_id"])),
            external_id=r["external_id"],
            flagged_at=r["flagged_at"],
            reasons=JSON(r["reasons"] or {}),
        )
        for r in rows
    ]
