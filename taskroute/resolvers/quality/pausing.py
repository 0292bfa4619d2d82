"""Admins pause and unpause an expert's skill (the automatic pause test is
functions/quality.sql); a pause gives the expert's live claims on the skill back."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import NotFound
from taskroute.resolvers import validation as v
from taskroute.resolvers.quality.resolution import tasks_opened


async def _pause(conn: asyncpg.Connection, expert_id: UUID, skill: str, reason: str) -> bool:
    """Pause the skill and give the expert's live claims on it back (`taskroute_pause_skill`);
    False if it was not active."""
    opened = await conn.fetchval(Q["expert_skill_pause_call"], expert_id, skill, reason)
    if opened is None:
        return False
    await tasks_opened(conn, opened)
    return True


async def expert_skills(db: Database, expert_id: UUID) -> list[asyncpg.Record]:
    rows = await db.fetch(Q["expert_skills_of"], expert_id)
    if not rows:
        raise NotFound("no such expert")
    return rows


async def pause_expert(db: Database, expert_id: UUID, skill: Any, reason: Any) -> None:
    skill = v.skill(skill)
    reason = v.text(reason, "reason", 1000)
    async with db.transaction() as conn:
        if not any(r["skill"] == skill for r in await conn.fetch(Q["expert_skills_of"], expert_id)):
            raise NotFound("no such expert skill")
        await _pause(conn, expert_id, skill, reason)


async def unpause_expert(db: Database, expert_id: UUID, skill: Any, reason: Any) -> None:
    skill = v.skill(skill)
    reason = v.text(reason, "reason", 1000)
    row = await db.fetchrow(Q["expert_skill_unpause"], expert_id, skill, reason)
    if row is None:
        raise NotFound("no such expert skill")
