"""GraphQL types of routing: priority classes, bump history, scarcity, presence."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any
from uuid import UUID

import strawberry

from taskroute.db.pool import Database
from taskroute.resolvers import routing


@strawberry.enum(description="Named levels of a project's priority: HIGH 100, NORMAL 0, LOW -100.")
class PriorityClass(Enum):
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


@strawberry.type(description="A recorded automatic deadline bump or unbump.")
class PriorityEvent:
    kind: str
    remaining: int
    rate_per_second: float
    forecast_finish: datetime | None
    deadline: datetime
    at: datetime

    @classmethod
    def of(cls, row: Any) -> PriorityEvent:
        return cls(**dict(row))


@strawberry.type
class ProjectRouting:
    deadline_bumped: bool
    events: list[PriorityEvent]

    @classmethod
    async def load(cls, db: Database, project_id: UUID) -> ProjectRouting:
        bumped, events = await routing.project_routing(db, project_id)
        return cls(deadline_bumped=bumped, events=[PriorityEvent.of(r) for r in events])


@strawberry.type(description="Per-skill scarcity as last measured by the routing job.")
class SkillScarcity:
    skill: str
    active_experts: int
    open_backlog: int
    backlog_seconds: float = strawberry.field(
        description="Open backlog in seconds of work (tasks x the skill's typical cycle)."
    )
    typical_seconds: float | None = strawberry.field(
        description="The skill's typical seconds per task from the forecast's pace; null: "
        "no history (the median over skills stands in)."
    )
    scarce: bool = strawberry.field(
        description="Few other active holders per second of backlog: holders take this "
        "skill's work before their other skills' (routing)."
    )
    updated_at: datetime


@strawberry.type
class ExpertPresence:
    id: strawberry.ID
    status: str
    last_seen_at: datetime | None
