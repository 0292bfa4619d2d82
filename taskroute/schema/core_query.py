"""Core queries: projects."""

from __future__ import annotations

import strawberry

from taskroute.auth import parse_id
from taskroute.resolvers import projects

from .context import Context
from .types import Project


@strawberry.type
class CoreQuery:
    @strawberry.field
    async def project(
        self, info: strawberry.Info[Context, None], id: strawberry.ID
    ) -> Project | None:
        viewer = await info.context.viewer()
        row = await projects.get_project(
            info.context.db, parse_id(id, "project"), viewer.customer_scope()
        )
        return Project.of(row)
