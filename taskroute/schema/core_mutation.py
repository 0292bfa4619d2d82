"""Core mutations: accounts, projects, and the claim loop.

Each resolver parses, authorises, calls the domain in `taskroute.resolvers`, shapes the answer.
"""

from __future__ import annotations

import strawberry
from strawberry.scalars import JSON

from taskroute.auth import parse_id
from taskroute.resolvers import accounts, batches, claims, projects
from taskroute.resolvers import validation as v

from .context import Context
from .inputs import CreateProjectInput, SkillInput, as_dict
from .types import Claim, CreateProjectPayload, Credential, Lease, Project, Receipt

Info = strawberry.Info[Context, None]


@strawberry.type
class CoreMutation:
    @strawberry.mutation
    async def create_customer(self, info: Info, name: str) -> Credential:
        (await info.context.viewer()).require_admin()
        return Credential.of(await accounts.create_customer(info.context.db, name))

    @strawberry.mutation
    async def create_expert(
        self,
        info: Info,
        name: str,
        skills: list[SkillInput],
        capabilities: list[str] | None = None,
    ) -> Credential:
        (await info.context.viewer()).require_admin()
        cred = await accounts.create_expert(
            info.context.db, name, [as_dict(s) for s in skills], capabilities
        )
        return Credential.of(cred)

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

    @strawberry.mutation
    async def claim_next_task(
        self,
        info: Info,
        skills: list[str] | None = None,
        project_id: strawberry.ID | None = None,
    ) -> Claim | None:
        expert_id = (await info.context.viewer()).require_expert()
        scope = parse_id(project_id, "project") if project_id is not None else None
        claim = await claims.claim_next(
            info.context.db,
            expert_id,
            v.skills_filter(skills),
            scope,
            info.context.services.payload_urls,
        )
        return Claim.of(claim) if claim else None

    @strawberry.mutation
    async def heartbeat(self, info: Info, assignment_id: strawberry.ID) -> Lease:
        expert_id = (await info.context.viewer()).require_expert()
        lease = await claims.heartbeat(
            info.context.db, expert_id, parse_id(assignment_id, "assignment")
        )
        return Lease.of(lease)

    @strawberry.mutation
    async def submit(self, info: Info, assignment_id: strawberry.ID, answer: JSON) -> Receipt:
        expert_id = (await info.context.viewer()).require_expert()
        receipt = await claims.submit(
            info.context.db, expert_id, parse_id(assignment_id, "assignment"), answer
        )
        return Receipt.of(receipt)
