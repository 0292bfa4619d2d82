"""Customers' lists: `projects(status, after)` as a Relay-style connection."""

from __future__ import annotations

import strawberry
from strawberry.relay import PageInfo

from taskroute.resolvers import customer_views
from taskroute.schema.paging import page_info

from .context import Context
from .types import Project

Info = strawberry.Info[Context, None]


@strawberry.type
class ProjectEdge:
    cursor: str
    node: Project


@strawberry.type
class ProjectConnection:
    edges: list[ProjectEdge]
    page_info: PageInfo


@strawberry.type
class CustomerViewsQuery:
    @strawberry.field(description="The customer's projects, newest first (admins: everyone's).")
    async def projects(
        self,
        info: Info,
        status: str | None = None,
        after: str | None = None,
        first: int = 50,
    ) -> ProjectConnection:
        viewer = await info.context.viewer()
        found = await customer_views.projects_page(
            info.context.db, viewer.customer_scope(), status, after, first
        )
        edges = [ProjectEdge(cursor=c, node=Project.of(r)) for c, r in found.pairs()]
        return ProjectConnection(edges=edges, page_info=page_info(found, after))
