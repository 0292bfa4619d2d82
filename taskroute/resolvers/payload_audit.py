"""The payload audit log: which expert received which task's payload (or an adjudicator the
other answers), when. Customers read their own projects' entries, admins all."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.resolvers import cursors, paging, projects
from taskroute.resolvers.paging import Page

KIND = "payload_audit"


def _after(raw: str | None) -> int:
    """The entry a page starts after: an opaque cursor or (deprecated `auditLog`, REST's
    `next_cursor`) the raw entry number; an empty cursor is the start."""
    return 0 if raw is None or raw == "" else cursors.decode_seq_or_raw(raw, KIND)


async def audit_page(
    db: Database,
    customer_scope: UUID | None,
    project_id: UUID | None,
    expert_id: UUID | None,
    after: str | None,
    first: int | str,
    field: str = "first",
) -> Page[asyncpg.Record]:
    """Entries after the cursor `after`, oldest first."""
    size = paging.size(first, field)
    after_seq = _after(after)
    # a token limited to one project reads that project's log only
    project_id = project_id or getattr(customer_scope, "project_id", None)
    if project_id is not None:
        await projects.get_project(db, project_id, customer_scope)
    return await paging.read(
        db, "audit_log_page", customer_scope, project_id, expert_id, after_seq,
        first=size, cursor=lambda r: cursors.encode(KIND, str(r["seq"])),
    )  # fmt: skip


def entry_seq_next_cursor(page: Page[asyncpg.Record]) -> str | None:
    """The deprecated `nextCursor`: the last entry's number, null on the last page."""
    return str(page.rows[-1]["seq"]) if page.has_next else None
