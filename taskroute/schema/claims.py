"""The claim loop over GraphQL: claim the next task, heartbeat the lease, submit the answer."""

from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry
from strawberry.scalars import JSON

from taskroute.resolvers import claims
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import parse_id

from .context import Context
from .types import Claim, Lease, Receipt

Info = strawberry.Info[Context, None]


@strawberry.enum(description="Why an expert gives a claim back.")
class ReleaseReason(Enum):
    SKIP = "SKIP"
    CANNOT_ANSWER = "CANNOT_ANSWER"
    BAD_ITEM = "BAD_ITEM"


@strawberry.type
class Release:
    assignment_id: strawberry.ID
    reason: ReleaseReason
    releases_left: int = strawberry.field(description="releases left in the current hour")
    resets_at: datetime = strawberry.field(
        description="when the oldest release counted in the hour stops counting"
    )


# The mutations that claim new work (`claims.claim_next`, admitted last and shed first): the
# server answers a request of only these from the admission gate alone when it would refuse.
CLAIM_OPS = frozenset({"claimNextTask"})


@strawberry.type
class ClaimsMutation:
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
            info.context.services.held_claims,
        )
        return Claim.of(claim) if claim else None

    @strawberry.mutation
    async def heartbeat(self, info: Info, assignment_id: strawberry.ID) -> Lease:
        expert_id = (await info.context.viewer()).require_expert()
        lease = await claims.heartbeat(
            info.context.db,
            expert_id,
            parse_id(assignment_id, "assignment"),
            info.context.services.held_claims,
        )
        return Lease.of(lease)

    @strawberry.mutation
    async def submit(self, info: Info, assignment_id: strawberry.ID, answer: JSON) -> Receipt:
        expert_id = (await info.context.viewer()).require_expert()
        receipt = await claims.submit(
            info.context.db,
            expert_id,
            parse_id(assignment_id, "assignment"),
            answer,
            info.context.services.held_claims,
        )
        return Receipt.of(receipt)

    @strawberry.mutation(
        description="Give the live claim back: the task is open again at once for others, no"
        " attempt is counted, and this item is never offered to you again. BAD_ITEM from"
        " several experts flags the item. Bounded per hour (TOO_MANY_RELEASES, resetsAt)."
    )
    async def release_assignment(
        self, info: Info, assignment_id: strawberry.ID, reason: ReleaseReason
    ) -> Release:
        expert_id = (await info.context.viewer()).require_expert()
        r = await claims.release(
            info.context.db,
            expert_id,
            parse_id(assignment_id, "assignment"),
            reason.value,
            info.context.settings.releases_per_hour,
            info.context.services.held_claims,
        )
        return Release(
            assignment_id=strawberry.ID(str(r.assignment_id)),
            reason=ReleaseReason(r.reason),
            releases_left=r.releases_left,
            resets_at=r.resets_at,
        )
