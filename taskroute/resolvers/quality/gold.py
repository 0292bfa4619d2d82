"""Gold items added on their own (`addGoldItems`) and the gold pool's status."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput, Unavailable
from taskroute.resolvers import payloads
from taskroute.resolvers import validation as v
from taskroute.storage.blobs import BlobStore, BlobStoreError


async def add_gold_items(
    db: Database,
    blobs: BlobStore,
    project_id: UUID,
    raw_tasks: Any,
    limits: GoldLimits,
) -> int:
    """Gold items added on their own: stored into the pool, no slots. Returns how many were new.

    Payloads are stored like every task's (blob store first; inline only up to the same size),
    so a gold serving is delivered the same way as the real work it is mixed into."""
    specs = v.task_specs(raw_tasks, limits.max_tasks, limits.max_payload_bytes)
    if not specs:
        raise BadInput("tasks must list at least one gold item", field="tasks")
    for i, s in enumerate(specs):
        if s.gold is None:
            raise BadInput(f"tasks[{i}].gold is required", field=f"tasks[{i}].gold")
    async with db.transaction() as conn:
        try:
            refs = await payloads.store_payloads(conn, blobs, specs, limits.inline_payload_bytes)
        except BlobStoreError as exc:
            raise Unavailable("the payload store is unavailable; nothing was stored") from exc
        rows = await conn.fetch(
            Q["items_insert"],
            project_id,
            [uuid.uuid4() for _ in specs],
            [s.skill for s in specs],
            [s.external_id for s in specs],
            [s.payload_json if ref.inline else None for s, ref in zip(specs, refs, strict=True)],
            [ref.key for ref in refs],
            [len(s.payload_json.encode()) for s in specs],
            [v.json_text(s.gold) for s in specs],
        )
    return len(rows)


@dataclass(frozen=True)
class GoldLimits:
    max_tasks: int
    max_payload_bytes: int
    # payloads up to this size also travel inline (the same rule as real work)
    inline_payload_bytes: int


async def gold_pool(db: Database, project_id: UUID) -> list[asyncpg.Record]:
    return await db.fetch(Q["gold_pool_status"], project_id)
