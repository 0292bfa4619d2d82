"""Paying for accepted work: review states, customer reviews, auto-approval.

A submitted assignment is `submitted` (undecided), `accepted` or `rejected`. Who decides
depends on the project's payment policy:

- on_submit: accepted at submit (taskroute_submit), paid at once.
- on_acceptance: the quality rules, inside the database when the item resolves
  (functions/quality.sql); agreeing answers are accepted, the others rejected (answers that
  disagree with an adjudicated result are paid if the project says so). A gold answer is
  decided by its correctness on real work's schedule: together with a real answer another
  expert submitted just before it (taskroute_gold_submitted), so its timing tells nothing.
- on_review: the customer (`approve` / `reject`, in batches); what is not reviewed within the
  project's auto-approval delay is accepted by `auto_approve_once` (a background job, one
  process at a time). Gold answers there are decided by correctness at the delay.

Under every policy a customer may decide undecided work, and may turn a rejection into an
acceptance within the project's override window (never a rejection by retraction: that is the
admin's). An acceptance is never turned into a rejection by a customer; the admin's correction
is a retraction with clawback (a reversal line). The statements that decide write the payment
line in the same statement (queries/ledger.sql), so the ledger has exactly one payment line per
accepted assignment, whoever decided and however many decided at once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput, NotFound
from taskroute.realtime import notify
from taskroute.resolvers import claims, cursors, paging, projects
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import Viewer, project_allowed

log = logging.getLogger(__name__)

BATCH_MAX = 500
REASON_MAX = 1000
STATUSES = ("submitted", "accepted", "rejected")


@dataclass(frozen=True)
class Review:
    assignment_id: UUID
    expert_id: UUID
    project_id: UUID
    status: str
    reason: str | None
    reviewed_by: str | None
    reviewed_at: datetime | None
    submitted_at: datetime
    pay_cents: int
    payment_policy: str
    override_until: datetime | None
    answer: Any
    # PAIRWISE: the order its expert saw the candidates in ("ab" | "ba"; claims.py)
    candidate_order: str | None
    # set by approve / reject: did this call change the state, and if not, why not
    changed: bool = False
    note: str | None = None
    # answered sooner than the project's min_seconds_per_task after the claim
    too_fast: bool = False

    @classmethod
    def of(cls, row: asyncpg.Record, changed: bool = False, note: str | None = None) -> Review:
        return cls(
            row["id"],
            row["expert_id"],
            row["project_id"],
            row["review_status"],
            row["review_reason"],
            row["reviewed_by"],
            row["reviewed_at"],
            row["submitted_at"],
            row["pay_cents"],
            row["payment_policy"],
            row["override_until"],
            row["answer"],
            claims.candidate_order(row["layout"], row["candidates_swapped"]),
            changed,
            note,
            too_fast=bool(row.get("too_fast", False)),
        )


def _ids(raw: Sequence[UUID]) -> list[UUID]:
    if not raw:
        raise BadInput("give at least one assignment id", field="assignmentIds")
    if len(raw) > BATCH_MAX:
        raise BadInput(f"at most {BATCH_MAX} assignments at once", field="assignmentIds")
    return sorted(set(raw))


def _customer_rows(viewer: Viewer, rows: list[asyncpg.Record], ids: list[UUID]) -> None:
    """Every id must be submitted real work of the viewer's projects (gold is never shown; an
    expert reviewer's review is paid per review, not decided by the customer)."""
    scope = viewer.customer_scope()
    found = {
        r["id"]
        for r in rows
        if (scope is None or r["customer_id"] == scope)
        and project_allowed(scope, r["project_id"])
        and r["task_kind"] not in ("gold", "review")
        and r["review_status"] is not None
    }
    missing = [str(i) for i in ids if i not in found]
    if missing:
        raise NotFound(f"no such submitted assignment: {', '.join(missing[:5])}")


async def _decide(
    db: Database, viewer: Viewer, raw_ids: Sequence[UUID], accept: bool, reason: Any
) -> list[Review]:
    viewer.require_write()
    ids = _ids(raw_ids)
    if accept:
        reason = None if reason is None else v.text(reason, "reason", REASON_MAX)
    else:
        reason = v.text(reason, "reason", REASON_MAX)  # an expert is owed a reason
    by = "admin" if viewer.role == "admin" else f"customer:{viewer.customer_id}"
    async with db.transaction() as conn:
        _customer_rows(viewer, await conn.fetch(Q["reviews_of"], ids), ids)
        status = "accepted" if accept else "rejected"
        # Review tasks before the answers they review (the lock order of a reviewer's submit)
        await conn.execute(Q["review_tasks_lock"], ids)
        decided = await conn.fetch(Q["assignments_decide"], ids, status, by, reason)
        changed = {r["id"] for r in decided}
        if accept:
            changed |= {
                r["id"]
                for r in await conn.fetch(
                    Q["assignments_override"], ids, by, reason or "rejection overridden"
                )
            }
        closed = await close_reviews(conn, ids)
        rows = await conn.fetch(Q["reviews_of"], ids)
    notify.progress_changed(*closed)
    out = []
    for r in sorted(rows, key=lambda r: r["id"]):
        note = None
        if r["id"] not in changed:
            if r["review_status"] == status:
                note = f"already {status}"
            elif r["review_status"] == "accepted":
                note = "accepted work stays accepted (an admin retraction can claw it back)"
            elif r["reviewed_by"] == "retraction":
                note = "rejected by a retraction"
            else:
                note = "the override window has closed"
        out.append(Review.of(r, r["id"] in changed, note))
    return out


async def close_reviews(conn: asyncpg.Connection, decided: list[UUID]) -> list[UUID]:
    """Expert review tasks of answers now decided (by a customer or auto-approval) are closed:
    an open one is canceled, a claimed one taken back unpaid; one a reviewer is submitting
    right now is left to that submit (queries/reviews.sql review_tasks_close). Returns the
    projects whose progress changed (tell subscribers once committed)."""
    if not decided:
        return []
    closed = [r["project_id"] for r in await conn.fetch(Q["review_tasks_close"], decided)]
    if closed:
        await projects.settle(conn, closed, probe=True)
    return closed


async def approve(
    db: Database, viewer: Viewer, ids: Sequence[UUID], reason: Any = None
) -> list[Review]:
    """Accept (and pay) undecided work, or a rejection still in its override window.
    Idempotent: what is already accepted is left as it is."""
    return await _decide(db, viewer, ids, True, reason)


async def reject(db: Database, viewer: Viewer, ids: Sequence[UUID], reason: Any) -> list[Review]:
    """Reject undecided work (no payment line is ever written for it, unless overridden)."""
    return await _decide(db, viewer, ids, False, reason)


async def review_of(db: Database, viewer: Viewer, assignment_id: UUID) -> Review:
    """The expert who did the work, the project's customer, and admins may read it."""
    rows = await db.fetch(Q["reviews_of"], [assignment_id])
    row = rows[0] if rows else None
    if row is None or row["review_status"] is None:
        raise NotFound("no such submitted assignment")
    if viewer.role == "expert":
        if row["expert_id"] != viewer.expert_id:
            raise NotFound("no such submitted assignment")
    elif viewer.role != "admin":
        _customer_rows(viewer, [row], [assignment_id])
    return Review.of(row)


async def page(
    db: Database, project_id: UUID, status: str | None, after: str | None, first: int
) -> paging.Page[Review]:
    """A project's submitted real work, oldest first (the caller checked the project)."""
    first = paging.size(first)
    if status is not None and status not in STATUSES:
        raise BadInput(f"status must be one of {', '.join(STATUSES)}", field="status")
    at, rid = (
        cursors.decode_keyset(after, "review")
        if after
        else (datetime.fromisoformat("0001-01-01T00:00:00+00:00"), UUID(int=0))
    )
    found = await paging.read(
        db, "reviews_page", project_id, status, at, rid, first=first,
        cursor=lambda r: cursors.encode_keyset("review", r["submitted_at"], r["id"]),
    )  # fmt: skip
    return found.map(Review.of)


async def retracted(
    conn: asyncpg.Connection, assignment_ids: list[UUID], reason: str, clawback: bool
) -> None:
    """Retraction: undecided answers are rejected; with a clawback, accepted ones too (their
    payment gets its reversal line from `payouts_clawback` in the same transaction)."""
    await conn.execute(
        Q["assignments_reject_retracted"], assignment_ids, f"retracted: {reason}", clawback
    )
