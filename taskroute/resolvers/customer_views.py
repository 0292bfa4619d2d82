"""What customers see of their projects: a paginated list and progress by skill."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput
from taskroute.resolvers import cursors, paging

PROJECT_STATUSES = ("ingesting", "active", "completed", "canceled")


def _cursor(row: asyncpg.Record) -> str:
    return cursors.encode_keyset("project", row["created_at"], row["id"])


def _after(raw: str | None) -> tuple[datetime | None, UUID | None]:
    if raw is None:
        return None, None
    return cursors.decode_keyset(raw, "project")


async def projects_page(
    db: Database, customer_scope: UUID | None, status: str | None, after: str | None, first: int
) -> paging.Page[asyncpg.Record]:
    if status is not None and status not in PROJECT_STATUSES:
        raise BadInput(f"status must be one of {', '.join(PROJECT_STATUSES)}", field="status")
    at, pid = _after(after)
    found = await paging.read(
        db, "projects_page", customer_scope, status, at, pid,
        first=paging.size(first), cursor=_cursor,
    )  # fmt: skip
    limit = getattr(customer_scope, "project_id", None)
    if limit is not None:  # a token limited to one project lists that one only
        mine = [r for r in found.rows if r["id"] == limit]
        return paging.cut(mine, len(mine), _cursor)
    return found


async def item_progress(db: Database, project_id: UUID) -> dict[str, Any]:
    """Items (not answer slots) of the project, and how many are resolved."""
    row = await db.fetchrow(Q["project_item_progress"], project_id)
    assert row is not None
    return dict(row)


async def progress_by_skill(db: Database, project_id: UUID) -> list[dict[str, Any]]:
    return [dict(r) for r in await db.fetch(Q["project_progress_by_skill"], project_id)]


async def flagged_items(db: Database, project_id: UUID, first: int) -> list[dict[str, Any]]:
    """Items experts flagged as bad (k BAD_ITEM releases), newest first, reasons counted."""
    rows = await db.fetch(Q["project_flagged_items"], project_id, paging.size(first))
    return [dict(r) for r in rows]
