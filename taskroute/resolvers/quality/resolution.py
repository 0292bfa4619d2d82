"""Resolving items (the rules live in functions/quality.sql `taskroute_resolve_item`) and
waking experts for the tasks a resolution or a pause opened."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.queries import Q
from taskroute.realtime import notify


async def tasks_opened(conn: asyncpg.Connection, opened: list[dict[str, Any]]) -> None:
    """Wake idle experts for tasks this transaction opened (hints arrive after commit)."""
    if opened:
        await notify.tasks_opened(
            conn, [(r["skill"], r["project_id"], 1, r["min_quality"]) for r in opened]
        )


async def resolve_item(conn: asyncpg.Connection, item_id: UUID, refill: bool = False) -> None:
    """Recompute an item's result from its valid answers (`taskroute_resolve_item`); write a
    change row if it is visible. `refill` (retraction): add open slots so valid answers plus
    live slots make k again."""
    await tasks_opened(conn, await conn.fetchval(Q["item_resolve_call"], item_id, refill))
