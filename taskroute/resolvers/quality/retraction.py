"""Retraction: an admin marks an expert's answers retracted (never deleted); their items get
fresh slots and are resolved again; a clawback reverses what was paid for them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import NotFound
from taskroute.resolvers import acceptance, cursors, projects
from taskroute.resolvers import validation as v
from taskroute.resolvers.quality.resolution import resolve_item


@dataclass(frozen=True)
class Retraction:
    answers: int
    items: int
    reversals: int


async def retract(
    db: Database,
    expert_id: UUID,
    skill: Any,
    since: datetime | None,
    by: str,
    reason: Any,
    clawback: bool,
) -> Retraction:
    skill = None if skill is None else v.skill(skill)
    reason = v.text(reason, "reason", 1000)
    if since is not None:
        since = cursors.instant(since, "since")
    async with db.transaction() as conn:
        if not await conn.fetch(Q["expert_skills_of"], expert_id):
            raise NotFound("no such expert")
        await conn.execute(Q["retract_lock"])
        rows = await conn.fetch(Q["retract_answers"], expert_id, skill, since, by, reason)
        items = sorted({r["item_id"] for r in rows})
        # All item locks in id order (a racing submit holds at most one item).
        await conn.fetch(Q["items_lock_many"], items)
        for item_id in items:
            await resolve_item(conn, item_id, refill=True)
        # relabelling reopens a completed project; a canceled adjudication may complete one
        await projects.settle(conn, [r["project_id"] for r in rows])
        # the payment policy: retracted answers are rejected (accepted ones only with a clawback)
        await acceptance.retracted(conn, [r["id"] for r in rows], reason, clawback)
        reversals = []
        if clawback and rows:
            reversals = await conn.fetch(
                Q["payouts_clawback"], [r["id"] for r in rows], f"retracted: {reason}"
            )
    return Retraction(len(rows), len(items), len(reversals))
