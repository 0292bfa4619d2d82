"""The payload audit log: which expert received which task's payload (or an adjudicator the
other answers), when. Customers read their own projects' entries, admins all."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.resolvers import cursors, projects

AUDIT_PAGE_MAX = 1000


async def audit_page(
    db: Database,
    customer_scope: UUID | None,
    project_id: UUID | None,
    expert_id: UUID | None,
    after: str | None,
    limit: int,
) -> tuple[list[asyncpg.Record], str | None]:
    """Entries after the cursor `after`, oldest first, and the cursor of the next page."""
    limit = cursors.limit(limit, "limit", 1, AUDIT_PAGE_MAX)
    after_seq = 0 if after is None or after == "" else cursors.seq(after)
    # a token limited to one project reads that project's log only
    project_id = project_id or getattr(customer_scope, "project_id", None)
    if project_id is not None:
        await projects.get_project(db, project_id, customer_scope)
    rows = await db.fetch(
        Q["audit_log_page"], customer_scope, project_id, expert_id, after_seq, limit + 1
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (str(rows[-1]["seq"]) if more else None)
