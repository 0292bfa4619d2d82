"""Projects over GraphQL: read one, create one (with its tasks), cancel one.

Each resolver parses, authorises, calls the domain in `taskroute.resolvers`, shapes the answer.
"""

from __future__ import annotations

import strawberry

from taskroute.resolvers import batches, projects
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import parse_id

from .context import Context
from .inputs import CreateProjectInput, as_dict
from .types import CreateProjectPayload, Project

Info = strawberry.Info[Context, None]


@strawberry.type
class ProjectsQuery:
    @strawberry.field
    async def project(self, info: Info, id: strawberry.ID) -> Project | None:
        viewer = await info.context.viewer()
        row = await projects.visible_project(info.context.db, viewer, parse_id(id, "project"))
        return Project.of(row)


@strawberry.type
class ProjectsMutation:
    @strawberry.mutation
    async def create_project(self, info: Info, input: CreateProjectInput) -> CreateProjectPayload:
        customer_id = (await info.context.viewer()).require_customer()
        settings = info.context.settings
        spec = v.project_spec(
            as_dict(input), settings.max_tasks_per_request, settings.max_payload_bytes
        )
        created = await batches.create_project(info.context.services, customer_id, spec)
        return CreateProjectPayload(project=Project.of(created.project), accepted=created.accepted)

    @strawberry.mutation
    async def cancel_project(self, info: Info, id: strawberry.ID) -> Project:
        customer_id = (await info.context.viewer()).require_customer()
        row = await projects.cancel_project(info.context.db, parse_id(id, "project"), customer_id)
        return Project.of(row)
