"""Subscriptions: `taskAvailable` wakes idle experts, `projectProgress` feeds dashboards.

WebSocket clients authenticate in `connection_init` (see `taskroute.app.GraphQLApp`);
graphql-transport-ws serves `taskAvailable` on a lean path of its own (realtime_ws.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

import strawberry

from taskroute.auth import parse_id
from taskroute.errors import BadInput, Unavailable
from taskroute.realtime.hub import Hub, TaskWaiter
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


def _hub(context: Context) -> Hub:
    hub = context.services.hub
    if hub is None:
        raise Unavailable("subscriptions are not available on this server")
    return hub


@contextlib.asynccontextmanager
async def task_waiter(context: Context, skills: list[str] | None) -> AsyncIterator[TaskWaiter]:
    """What a `taskAvailable` subscription holds while it lives: the authenticated expert's
    waiter and its slot in the subscription budget. Shared by the schema's resolver and the
    graphql-transport-ws path that serves this subscription without strawberry's executor
    (realtime_ws.py), so both refuse and wake alike."""
    viewer = await context.viewer()
    expert_id = viewer.require_expert()
    wanted = v.skills_filter(skills)
    with context.subscription_slot(viewer):
        async with _hub(context).task_waiter(expert_id, wanted) as waiter:
            if waiter is None:
                raise BadInput("the expert holds none of these skills (active)", field="skills")
            yield waiter


@strawberry.type
class RealtimeSubscription:
    @strawberry.subscription(
        description="For experts: a hint each time a task they could claim may have opened."
    )
    async def task_available(
        self, info: Info, skills: list[str] | None = None
    ) -> AsyncGenerator[TaskAvailable, None]:
        async with task_waiter(info.context, skills) as waiter:
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
            async with _hub(info.context).progress_watch(pid) as watch:
                while True:
                    yield Progress(**await watch.next())
