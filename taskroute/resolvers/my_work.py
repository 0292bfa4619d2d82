"""An expert's own work and earnings: each submitted answer with its pay state and, when
rejected, the reason; the totals; the bonus lines. Only ever the viewer's own (an admin may
read any expert's). Reads start from the expert on per-expert indexes (queries/my_work.sql)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Reader
from taskroute.db.queries import Q
from taskroute.errors import BadInput, NotFound
from taskroute.resolvers import cursors, paging
from taskroute.resolvers.accounts.credentials import Viewer

# status filter -> its query (each on its own index)
STATUSES = {
    None: "expert_work_page",
    "PENDING": "expert_work_page_pending",
    "PAID": "expert_work_page_paid",
    "REJECTED": "expert_work_page_rejected",
}
MAX_BONUSES = 100
_NEWEST = (datetime.fromisoformat("9999-12-31T00:00:00+00:00"), UUID(int=(1 << 128) - 1))


@dataclass(frozen=True)
class Work:
    assignment_id: UUID
    project_id: UUID
    task_id: UUID
    submitted_at: datetime
    pay_state: str  # 'paid' | 'pending' | 'rejected' | 'reversed'
    pay_cents: int  # what the answer pays once accepted
    paid_cents: int  # what the ledger paid for it, net of a reversal
    rejection_reason: str | None
    reviewed_at: datetime | None
    auto_approval_at: datetime | None
    instructions_version: int | None
    too_fast: bool

    @classmethod
    def of(cls, r: asyncpg.Record) -> Work:
        return cls(
            r["assignment_id"], r["project_id"], r["task_id"], r["submitted_at"],
            r["pay_state"], r["pay_cents"] or 0, r["paid_cents"], r["rejection_reason"],
            r["reviewed_at"], r["auto_approval_at"], r["instructions_version"], r["too_fast"],
        )  # fmt: skip


@dataclass(frozen=True)
class Earnings:
    paid_cents: int
    pending_cents: int
    rejected_cents: int
    bonus_cents: int
    next_auto_approval_at: datetime | None


def own(viewer: Viewer, expert_id: UUID) -> UUID:
    """The expert whose work this viewer may read: their own; admins any."""
    if viewer.role != "admin" and viewer.expert_id != expert_id:
        raise NotFound("only the expert can see their own work")
    return expert_id


async def work_page(
    db: Reader, expert_id: UUID, status: Any, after: str | None, first: Any
) -> paging.Page[Work]:
    if status not in STATUSES:
        raise BadInput("status must be PENDING, PAID or REJECTED (or null: all)", field="status")
    size = paging.size(first)
    at, rid = cursors.decode_keyset(after, "work") if after else _NEWEST
    found = await paging.read(
        db, STATUSES[status], expert_id, at, rid, first=size,
        cursor=lambda r: cursors.encode_keyset("work", r["submitted_at"], r["assignment_id"]),
    )  # fmt: skip
    return found.map(Work.of)


async def earnings(db: Reader, expert_id: UUID) -> Earnings:
    r = await db.fetchrow(Q["expert_earnings"], expert_id)
    assert r is not None
    return Earnings(
        r["paid_cents"], r["pending_cents"], r["rejected_cents"], r["bonus_cents"],
        r["next_auto_approval_at"],
    )  # fmt: skip


async def bonuses(db: Reader, expert_id: UUID, first: int) -> list[asyncpg.Record]:
    if not 1 <= first <= MAX_BONUSES:
        raise BadInput(f"first must be between 1 and {MAX_BONUSES}", field="first")
    return await db.fetch(Q["expert_bonuses"], expert_id, first)
