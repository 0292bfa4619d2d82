"""Subscriptions: `taskAvailable` wakes idle experts, `projectProgress` feeds dashboards.

WebSocket clients authenticate in `connection_init` (see `taskroute.server.app.GraphQLApp`);
graphql-transport-ws serves `taskAvailable` on a lean path of its own (realtime_ws.py).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from taskroute.errors import BadInput, Unavailable
from taskroute.realtime.hub import Hub, TaskWaiter
from taskroute.resolvers import projects
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import parse_id

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


class TaskSubscription:
    """What a `taskAvailable` subscription holds while it lives: the authenticated expert's
    waiter and its slot in the subscription budget (`async with TaskSubscription(...) as
    waiter`). Shared by the schema's resolver and the graphql-transport-ws path that serves
    this subscription without strawberry's executor (realtime_ws.py), so both refuse and wake
    alike. One object with slots rather than nested context managers: every idle subscriber
    keeps it, and each generator-based context manager kept its own frame."""

    __slots__ = ("_context", "_skills", "_waiter", "_taken")

    def __init__(self, context: Context, skills: list[str] | None) -> None:
        self._context = context
        self._skills = skills
        self._waiter: TaskWaiter | None = None
        self._taken: object | None = None

    async def __aenter__(self) -> TaskWaiter:
        context = self._context
        viewer = await context.viewer()
        expert_id = viewer.require_expert()
        wanted = v.skills_filter(self._skills)
        self._skills = None
        self._taken = context.take_subscription(viewer)
        try:
            waiter = await _hub(context).open_waiter(expert_id, wanted)
            if waiter is None:
                raise BadInput("the expert holds none of these skills (active)", field="skills")
        except BaseException:
            self._give_back()
            raise
        self._waiter = waiter
        return waiter

    async def __aexit__(self, *exc: object) -> None:
        waiter, self._waiter = self._waiter, None
        try:
            if waiter is not None:
                await _hub(self._context).close_waiter(waiter)
        finally:
            self._give_back()

    def _give_back(self) -> None:
        taken, self._taken = self._taken, None
        self._context.give_back_subscription(taken)


@strawberry.type
class RealtimeSubscription:
    @strawberry.subscription(
        description="For experts: a hint each time a task they could claim may have opened."
    )
    async def task_available(
        self, info: Info, skills: list[str] | None = None
    ) -> AsyncGenerator[TaskAvailable, None]:
        async with TaskSubscription(info.context, skills) as waiter:
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
