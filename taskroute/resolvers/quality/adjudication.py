"""What an adjudicator is shown of an item's other answers."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from taskroute.db.pool import Database
from taskroute.db.queries import Q


async def prior_answers(db: Database, expert_id: UUID, task_id: UUID) -> list[Any] | None:
    """What an adjudicator is shown, under the payload's rule: only while they hold the task's
    live lease, and every read is audited. None for any other task or holder (gold looks like
    normal work; a lapsed adjudicator no longer sees the other experts' answers)."""
    async with db.transaction() as conn:
        held = await conn.fetchrow(Q["adjudication_held"], task_id, expert_id)
        if held is None:
            return None
        rows = await conn.fetch(Q["adjudication_prior_answers"], held["item_id"])
        await conn.execute(
            Q["audit_insert"],
            expert_id,
            held["customer_id"],
            held["project_id"],
            task_id,
            "prior_answers",
        )
    return [r["answer"] for r in rows]
