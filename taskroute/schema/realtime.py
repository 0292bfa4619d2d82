"""Subscriptions: `taskAvailable` wakes idle experts, `projectProgress` feeds dashboards.

WebSocket clients authenticate in `connection_init` (see `taskroute.app.GraphQLApp`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from taskroute.auth import parse_id
from taskroute.errors import BadInput, Unavailable
from taskroute.realtime.hub import Hub
from taskroute.resolvers import projects
from taskroute.resolvers import validation as v

from .context import Context
from .types import Progress

Info = strawberry.Info[Context, None]


@strawberry.type(description="A hint that a task may be claimable: call claimNextTask.")
class TaskAvailable:
    skill: str
    # null when the server lost events (its listener reconnected): re-check this skill
    project_id: strawberry.ID | None
    recheck: bool


def _hub(info: Info) -> Hub:
    hub = info.context.services.hub
    if hub is None:
        raise Unavailable("subscriptions are not available on this server")
    return hub


@strawberry.type
class RealtimeSubscription:
    @strawberry.subscription(
        description="For experts: a hint each time a task they could claim may have opened."
    )
    async def task_available(
        self, info: Info, skills: list[str] | None = None
    ) -> AsyncGenerator[TaskAvailable, None]:
        viewer = await info.context.viewer()
        expert_id = viewer.require_expert()
        wanted = v.skills_filter(skills)
        with info.context.subscription_slot(viewer):
            async with _hub(info).task_waiter(expert_id, wanted) as waiter:
                if waiter is None:
                    raise BadInput("the expert holds none of these skills (active)", field="skills")
                while True:
                    hint = await waiter.next()
                    yield TaskAvailable(
                        skill=hint.skill,
                        project_id=strawberry.ID(hint.project_id) if hint.project_id else None,
                        recheck=hint.project_id is None,
                    )

    @strawberry.subscription(
        description="For the owning customer: task counts, now and on change (coalesced)."
    )
    async def project_progress(
        self, info: Info, project_id: strawberry.ID
    ) -> AsyncGenerator[Progress, None]:
        viewer = await info.context.viewer()
        pid = parse_id(project_id, "project")
        # Another customer's project (or an expert) is refused as not found.
        await projects.get_project(info.context.db, pid, viewer.customer_scope())
        with info.context.subscription_slot(viewer):
            async with _hub(info).progress_watch(pid) as watch:
                while True:
                    yield Progress(**await watch.next())
