"""What customers see of their projects: a paginated list and progress by skill."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput
from taskroute.resolvers import cursors
from taskroute.resolvers import validation as v

PROJECT_STATUSES = ("ingesting", "active", "completed", "canceled")
PAGE_MAX = 200


@dataclass(frozen=True)
class ProjectPage:
    rows: list[asyncpg.Record]
    has_next: bool


def encode_cursor(row: Any) -> str:
    return cursors.encode("project", f"{row['created_at'].isoformat()}|{row['id']}")


def decode_cursor(raw: str | None) -> tuple[datetime | None, UUID | None]:
    if raw is None:
        return None, None
    return cursors.decode_keyset(raw, "project")


async def projects_page(
    db: Database, customer_scope: UUID | None, status: str | None, after: str | None, first: int
) -> ProjectPage:
    if status is not None and status not in PROJECT_STATUSES:
        raise BadInput(f"status must be one of {', '.join(PROJECT_STATUSES)}", field="status")
    first = v.integer(first, "first", 1, PAGE_MAX)
    at, pid = decode_cursor(after)
    rows = await db.fetch(Q["projects_page"], customer_scope, status, at, pid, first + 1)
    limit = getattr(customer_scope, "project_id", None)
    if limit is not None:  # a token limited to one project lists that one only
        return ProjectPage([r for r in rows[:first] if r["id"] == limit], False)
    return ProjectPage(rows[:first], len(rows) > first)


async def progress_by_skill(db: Database, project_id: UUID) -> list[dict[str, Any]]:
    return [dict(r) for r in await db.fetch(Q["project_progress_by_skill"], project_id)]
