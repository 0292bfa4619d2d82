"""Routing queries (admin): skill scarcity and expert presence."""

from __future__ import annotations

import strawberry

from taskroute.resolvers import routing
from taskroute.resolvers.accounts.credentials import parse_id

from .context import Context
from .routing_types import ExpertPresence, SkillScarcity

Info = strawberry.Info[Context, None]


@strawberry.type
class RoutingQuery:
    @strawberry.field(description="Admin: per-skill scarcity, scarcest first.")
    async def skill_scarcity(self, info: Info) -> list[SkillScarcity]:
        (await info.context.viewer()).require_admin()
        rows = await routing.skill_scarcity(info.context.db)
        return [SkillScarcity(**dict(r)) for r in rows]

    @strawberry.field(description="Admin: when an expert was last seen (claims, heartbeats).")
    async def expert_presence(self, info: Info, id: strawberry.ID) -> ExpertPresence | None:
        (await info.context.viewer()).require_admin()
        row = await routing.expert_presence(info.context.db, parse_id(id, "expert"))
        if row is None:
            return None
        return ExpertPresence(
            id=strawberry.ID(str(row["id"])), status=row["status"], last_seen_at=row["last_seen_at"]
        )
