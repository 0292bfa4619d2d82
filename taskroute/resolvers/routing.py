"""Routing as the API reads it: a project's deadline bump, skill scarcity, an expert's presence.

The routing job that maintains them is `taskroute.resolvers.jobs.routing`.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from taskroute.db.pool import Database
from taskroute.db.queries import Q


async def project_routing(db: Database, project_id: UUID) -> tuple[bool, list[Any]]:
    """Whether the project's deadline bump is on, and its bump/unbump history."""
    state = await db.fetchrow(Q["routing_project_state"], project_id)
    events = await db.fetch(Q["routing_project_events"], project_id)
    return bool(state and state["deadline_bumped"]), list(events)


async def skill_scarcity(db: Database) -> list[Any]:
    """Per-skill scarcity as the routing job last measured it, scarcest first."""
    return list(await db.fetch(Q["routing_scarcity_list"]))


async def expert_presence(db: Database, expert_id: UUID) -> Any:
    """The expert's status and when it was last seen (None: no such expert)."""
    return await db.fetchrow(Q["routing_expert_presence"], expert_id)
