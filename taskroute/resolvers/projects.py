"""Projects: create (with their tasks), read, cancel, progress."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import NotFound
from taskroute.resolvers.validation import ProjectSpec, TaskSpec


@dataclass(frozen=True)
class Created:
    project: asyncpg.Record
    # False: stored and claimable now; True: queued for background ingest.
    accepted: bool


async def insert_tasks(
    conn: asyncpg.Connection, project_id: UUID, specs: list[TaskSpec], status: str
) -> int:
    """Store items (payloads inline) and their task slots; return how many items were new."""
    if not specs:
        return 0
    ids = [uuid.uuid4() for _ in specs]
    new_ids = {
        r["id"]
        for r in await conn.fetch(
            Q["items_insert"],
            project_id,
            ids,
            [s.skill for s in specs],
            [s.external_id for s in specs],
            [s.payload for s in specs],
            [None] * len(specs),
            [len(s.payload_json.encode()) for s in specs],
            [s.gold for s in specs],
        )
    }
    fresh = [(i, s) for i, s in zip(ids, specs, strict=True) if i in new_ids]
    if fresh:
        await conn.execute(
            Q["tasks_insert"],
            project_id,
            [i for i, _ in fresh],
            status,
            [s.skill for _, s in fresh],
            [s.priority for _, s in fresh],
        )
        tagged = [(i, s) for i, s in fresh if s.required_capabilities]
        if tagged:
            await conn.execute(
                Q["tasks_set_required_caps"],
                [i for i, _ in tagged],
                [",".join(s.required_capabilities) for _, s in tagged],
            )
    return len(fresh)


async def create_project(db: Database, customer_id: UUID, spec: ProjectSpec) -> Created:
    async with db.transaction() as conn:
        project = await conn.fetchrow(
            Q["project_insert"],
            customer_id,
            spec.name,
            "active",
            spec.priority,
            spec.deadline,
            spec.lease_seconds,
            spec.pay_cents,
            spec.min_quality,
            spec.redundancy,
            spec.max_retries,
        )
        await insert_tasks(conn, project["id"], spec.tasks, "open")
    return Created(project, accepted=False)


async def get_project(
    db: Database, project_id: UUID, customer_scope: UUID | None
) -> asyncpg.Record:
    row = await db.fetchrow(Q["project_get"], project_id, customer_scope)
    if row is None:
        raise NotFound("no such project")
    return row


async def cancel_project(db: Database, project_id: UUID, customer_id: UUID) -> asyncpg.Record:
    async with db.transaction() as conn:
        if await conn.fetchrow(Q["project_get"], project_id, customer_id) is None:
            raise NotFound("no such project")
        await conn.execute(Q["project_cancel"], project_id, customer_id)
        row = await conn.fetchrow(Q["project_get"], project_id, customer_id)
    assert row is not None
    return row


async def progress(db: Database, project_id: UUID) -> dict[str, Any]:
    row = await db.fetchrow(Q["project_progress"], project_id)
    assert row is not None
    return dict(row)
