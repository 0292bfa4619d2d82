"""The payout ledger over GraphQL: listings, balances, project totals, reversals;
reviews of submitted work and the decisions that pay it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.relay import PageInfo
from strawberry.scalars import JSON

from taskroute.resolvers import acceptance, ledger
from taskroute.resolvers.accounts.credentials import parse_id
from taskroute.resolvers.projects import visible_project
from taskroute.schema.paging import page_info

from .context import Context

Info = strawberry.Info[Context, None]


def _id(value: Any) -> strawberry.ID | None:
    return None if value is None else strawberry.ID(str(value))


@strawberry.type
class Payout:
    id: strawberry.ID
    seq: int
    kind: str = strawberry.field(description="'payment', 'reversal' or 'bonus'")
    amount_cents: int = strawberry.field(description="negative on a reversal line")
    expert_id: strawberry.ID
    project_id: strawberry.ID
    assignment_id: strawberry.ID | None
    reverses_id: strawberry.ID | None
    reversed_by_id: strawberry.ID | None
    reason: str | None
    created_at: datetime

    @classmethod
    def of(cls, row: Any) -> Payout:
        return cls(
            id=strawberry.ID(str(row["id"])),
            seq=row["seq"],
            kind=row["kind"],
            amount_cents=row["amount_cents"],
            expert_id=strawberry.ID(str(row["expert_id"])),
            project_id=strawberry.ID(str(row["project_id"])),
            assignment_id=_id(row["assignment_id"]),
            reverses_id=_id(row["reverses_id"]),
            reversed_by_id=_id(row["reversed_by"]),
            reason=row["reason"],
            created_at=row["created_at"],
        )


@strawberry.type
class PayoutEdge:
    cursor: str
    node: Payout


@strawberry.type
class PayoutConnection:
    edges: list[PayoutEdge]
    page_info: PageInfo


@strawberry.type
class Balance:
    expert_id: strawberry.ID
    payments: int
    reversals: int
    paid_cents: int
    reversed_cents: int
    balance_cents: int
    pending: int = strawberry.field(description="submitted work not decided yet (no line yet)")
    pending_cents: int

    @classmethod
    def of(cls, expert_id: Any, row: dict[str, Any]) -> Balance:
        return cls(
            expert_id=strawberry.ID(str(expert_id)),
            payments=row["payments"],
            reversals=row["reversals"],
            paid_cents=row["paid_cents"],
            reversed_cents=row["reversed_cents"],
            balance_cents=row["balance_cents"],
            pending=row["pending"],
            pending_cents=row["pending_cents"],
        )


@strawberry.type
class ProjectPayoutTotals:
    project_id: strawberry.ID
    payments: int
    reversals: int
    paid_cents: int
    reversed_cents: int
    net_cents: int
    pending: int
    pending_cents: int
    by_expert: list[Balance]


@strawberry.type(description="The review state of a submitted assignment.")
class AssignmentReview:
    assignment_id: strawberry.ID
    expert_id: strawberry.ID
    project_id: strawberry.ID
    status: str = strawberry.field(description="'submitted' (undecided), 'accepted', 'rejected'")
    reason: str | None
    reviewed_by: str | None = strawberry.field(
        description="'customer:<id>', 'admin', 'policy' (on_submit), 'quality' (on_acceptance),"
        " 'auto' (auto-approval), 'canceled', 'retraction', 'expert-review' (a reviewer's"
        " verdict)"
    )
    reviewed_at: datetime | None
    submitted_at: datetime
    pay_cents: int
    payment_policy: str
    override_until: datetime | None = strawberry.field(
        description="a rejection may still be approved until then"
    )
    candidate_order: str | None = strawberry.field(
        description="PAIRWISE: the order the expert saw the candidates in: 'ab' (a on the"
        " left) or 'ba' (the answer names a / b either way)"
    )
    changed: bool = strawberry.field(description="approve/reject: this call changed the state")
    note: str | None = strawberry.field(description="approve/reject: why nothing changed")
    too_fast: bool = strawberry.field(
        description="submitted sooner than the project's minSecondsPerTask after the claim"
    )

    @classmethod
    def of(cls, r: acceptance.Review) -> AssignmentReview:
        return cls(
            assignment_id=strawberry.ID(str(r.assignment_id)),
            expert_id=strawberry.ID(str(r.expert_id)),
            project_id=strawberry.ID(str(r.project_id)),
            status=r.status,
            reason=r.reason,
            reviewed_by=r.reviewed_by,
            reviewed_at=r.reviewed_at,
            submitted_at=r.submitted_at,
            pay_cents=r.pay_cents,
            payment_policy=r.payment_policy,
            override_until=r.override_until,
            candidate_order=r.candidate_order,
            changed=r.changed,
            note=r.note,
            too_fast=r.too_fast,
        )


@strawberry.type
class AssignmentReviewEdge:
    cursor: str
    node: AssignmentReview
    answer: JSON


@strawberry.type
class AssignmentReviewConnection:
    edges: list[AssignmentReviewEdge]
    page_info: PageInfo


@strawberry.type
class LedgerQuery:
    @strawberry.field(description="Ledger lines of one expert or one project, oldest first.")
    async def payouts(
        self,
        info: Info,
        expert_id: strawberry.ID | None = None,
        project_id: strawberry.ID | None = None,
        after: str | None = None,
        first: int = 100,
    ) -> PayoutConnection:
        db = info.context.db
        scope = await ledger.scope_for(
            db,
            await info.context.viewer(),
            parse_id(expert_id, "expert") if expert_id is not None else None,
            parse_id(project_id, "project") if project_id is not None else None,
        )
        found = await ledger.page(db, scope, after, first)
        edges = [PayoutEdge(cursor=c, node=Payout.of(r)) for c, r in found.pairs()]
        return PayoutConnection(edges=edges, page_info=page_info(found, after))

    @strawberry.field(
        description="An expert's balance (experts: their own), optionally per project."
    )
    async def expert_balance(
        self,
        info: Info,
        expert_id: strawberry.ID | None = None,
        project_id: strawberry.ID | None = None,
    ) -> Balance:
        eid, balance = await ledger.expert_balance(
            info.context.db,
            await info.context.viewer(),
            parse_id(expert_id, "expert") if expert_id is not None else None,
            parse_id(project_id, "project") if project_id is not None else None,
        )
        return Balance.of(eid, balance)

    @strawberry.field(description="What a project paid, in total and per expert.")
    async def project_payout_totals(
        self, info: Info, project_id: strawberry.ID
    ) -> ProjectPayoutTotals:
        project = await visible_project(
            info.context.db, await info.context.viewer(), parse_id(project_id, "project")
        )
        rows = await ledger.project_totals(info.context.db, project["id"])
        return ProjectPayoutTotals(
            project_id=strawberry.ID(str(project["id"])),
            payments=sum(r["payments"] for r in rows),
            reversals=sum(r["reversals"] for r in rows),
            paid_cents=sum(r["paid_cents"] for r in rows),
            reversed_cents=sum(r["reversed_cents"] for r in rows),
            net_cents=sum(r["balance_cents"] for r in rows),
            pending=sum(r["pending"] for r in rows),
            pending_cents=sum(r["pending_cents"] for r in rows),
            by_expert=[Balance.of(r["expert_id"], r) for r in rows],
        )

    @strawberry.field(
        description="The review state of a submitted assignment: for the expert who did it,"
        " the project's customer and admins."
    )
    async def assignment_review(self, info: Info, assignment_id: strawberry.ID) -> AssignmentReview:
        review = await acceptance.review_of(
            info.context.db, await info.context.viewer(), parse_id(assignment_id, "assignment")
        )
        return AssignmentReview.of(review)

    @strawberry.field(
        description="A project's submitted work with answers and review states, oldest first"
        " (customers: to approve or reject)."
    )
    async def assignment_reviews(
        self,
        info: Info,
        project_id: strawberry.ID,
        status: str | None = None,
        after: str | None = None,
        first: int = 100,
    ) -> AssignmentReviewConnection:
        project = await visible_project(
            info.context.db, await info.context.viewer(), parse_id(project_id, "project")
        )
        found = await acceptance.page(info.context.db, project["id"], status, after, first)
        edges = [
            AssignmentReviewEdge(cursor=c, node=AssignmentReview.of(r), answer=r.answer)
            for c, r in found.pairs()
        ]
        return AssignmentReviewConnection(edges=edges, page_info=page_info(found, after))


def _assignment_ids(raw: list[strawberry.ID]) -> list[Any]:
    return [parse_id(i, "assignment") for i in raw]


@strawberry.type
class LedgerMutation:
    @strawberry.mutation(
        description="Customers: accept submitted work (and pay it), or turn a rejection into"
        " an acceptance within the override window. Batch, idempotent."
    )
    async def approve_assignments(
        self, info: Info, assignment_ids: list[strawberry.ID], reason: str | None = None
    ) -> list[AssignmentReview]:
        reviews = await acceptance.approve(
            info.context.db, await info.context.viewer(), _assignment_ids(assignment_ids), reason
        )
        return [AssignmentReview.of(r) for r in reviews]

    @strawberry.mutation(
        description="Customers: reject undecided submitted work (never paid unless approved"
        " within the override window). Batch, idempotent; a reason is required."
    )
    async def reject_assignments(
        self, info: Info, assignment_ids: list[strawberry.ID], reason: str
    ) -> list[AssignmentReview]:
        reviews = await acceptance.reject(
            info.context.db, await info.context.viewer(), _assignment_ids(assignment_ids), reason
        )
        return [AssignmentReview.of(r) for r in reviews]

    @strawberry.mutation(
        description="Customers: grant a bonus to an expert who submitted work in the project:"
        " one ledger line per idempotency key (a repeat returns it)."
    )
    async def grant_bonus(
        self,
        info: Info,
        project_id: strawberry.ID,
        expert_id: strawberry.ID,
        amount_cents: int,
        reason: str,
        idempotency_key: str,
    ) -> Payout:
        row = await ledger.grant_bonus(
            info.context.db,
            await info.context.viewer(),
            parse_id(project_id, "project"),
            parse_id(expert_id, "expert"),
            amount_cents,
            reason,
            idempotency_key,
            info.context.settings.bonus_max_cents,
        )
        return Payout.of(row)

    @strawberry.mutation(
        description="Admin: write a reversal line for a payment (once; never edits the ledger)."
    )
    async def reverse(self, info: Info, payout_id: strawberry.ID, reason: str) -> Payout:
        (await info.context.viewer()).require_admin()
        row = await ledger.reverse(info.context.db, parse_id(payout_id, "payout"), reason)
        return Payout.of(row)
