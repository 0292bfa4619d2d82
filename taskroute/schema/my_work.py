"""An expert's own work and earnings over GraphQL (`me { expert { work earnings } }`).
Resolvers of the `Expert` type (schema/accounts.py); only the expert themself (or an admin)
may read them."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any

import strawberry
from strawberry.relay import PageInfo

from taskroute.resolvers import my_work
from taskroute.resolvers.accounts.credentials import parse_id

from .context import Context
from .paging import page_info

Info = strawberry.Info[Context, None]


@strawberry.enum(description="Which of an expert's answers to list.")
class WorkStatus(Enum):
    PENDING = "PENDING"
    PAID = "PAID"
    REJECTED = "REJECTED"


@strawberry.type(description="One submitted answer, as its expert sees it.")
class WorkItem:
    assignment_id: strawberry.ID
    project_id: strawberry.ID
    task_id: strawberry.ID
    submitted_at: datetime
    pay_state: str = strawberry.field(
        description="'paid' | 'pending' (not decided yet) | 'rejected' | 'reversed' (paid,"
        " then clawed back)"
    )
    pay_cents: int = strawberry.field(description="what the answer pays once accepted")
    paid_cents: int = strawberry.field(description="what the ledger paid for it, net")
    rejection_reason: str | None
    reviewed_at: datetime | None
    auto_approval_at: datetime | None = strawberry.field(
        description="pending work under on_review: when it is accepted unless reviewed"
    )
    instructions_version: int | None = strawberry.field(
        description="the project's instructions version the answer was given under"
    )
    too_fast: bool

    @classmethod
    def of(cls, w: my_work.Work) -> WorkItem:
        return cls(
            assignment_id=strawberry.ID(str(w.assignment_id)),
            project_id=strawberry.ID(str(w.project_id)),
            task_id=strawberry.ID(str(w.task_id)),
            submitted_at=w.submitted_at,
            pay_state=w.pay_state,
            pay_cents=w.pay_cents,
            paid_cents=w.paid_cents,
            rejection_reason=w.rejection_reason,
            reviewed_at=w.reviewed_at,
            auto_approval_at=w.auto_approval_at,
            instructions_version=w.instructions_version,
            too_fast=w.too_fast,
        )


@strawberry.type
class WorkEdge:
    cursor: str
    node: WorkItem


@strawberry.type
class WorkConnection:
    edges: list[WorkEdge]
    page_info: PageInfo


@strawberry.type
class BonusLine:
    id: strawberry.ID
    project_id: strawberry.ID
    amount_cents: int
    reason: str | None
    created_at: datetime


@strawberry.type(description="An expert's totals, in cents.")
class Earnings:
    paid_cents: int = strawberry.field(description="payments, net of reversals")
    pending_cents: int = strawberry.field(description="submitted work not decided yet")
    rejected_cents: int = strawberry.field(description="what rejected answers would have paid")
    bonus_cents: int
    next_auto_approval_at: datetime | None = strawberry.field(
        description="when the first pending on_review answer is accepted unless reviewed"
    )
    expert_id: strawberry.Private[Any] = None

    @strawberry.field(description="The bonus lines, newest first, at most `first` (100).")
    async def bonuses(self, info: Info, first: int = 20) -> list[BonusLine]:
        rows = await my_work.bonuses(info.context.db, self.expert_id, first)
        return [
            BonusLine(
                id=strawberry.ID(str(r["id"])),
                project_id=strawberry.ID(str(r["project_id"])),
                amount_cents=r["amount_cents"],
                reason=r["reason"],
                created_at=r["created_at"],
            )
            for r in rows
        ]


async def expert_work(
    root: strawberry.Parent[Any],
    info: Info,
    status: WorkStatus | None = None,
    after: str | None = None,
    first: int = 20,
) -> WorkConnection:
    expert_id = my_work.own(await info.context.viewer(), parse_id(root.id))
    found = await my_work.work_page(
        info.context.db, expert_id, status.value if status else None, after, first
    )
    edges = [WorkEdge(cursor=c, node=WorkItem.of(w)) for c, w in found.pairs()]
    return WorkConnection(edges=edges, page_info=page_info(found, after))


async def expert_earnings(root: strawberry.Parent[Any], info: Info) -> Earnings:
    expert_id = my_work.own(await info.context.viewer(), parse_id(root.id))
    e = await my_work.earnings(info.context.db, expert_id)
    return Earnings(
        paid_cents=e.paid_cents,
        pending_cents=e.pending_cents,
        rejected_cents=e.rejected_cents,
        bonus_cents=e.bonus_cents,
        next_auto_approval_at=e.next_auto_approval_at,
        expert_id=expert_id,
    )
