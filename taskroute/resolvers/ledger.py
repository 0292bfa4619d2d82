"""The payout ledger: listings, balances, totals, reversals, CSV export.

`payouts` is append-only (a trigger refuses UPDATE and DELETE): a correction is a reversal
line with the negated amount, and a payment can be reversed at most once (UNIQUE reverses_id).
Who sees what: admins everything; an expert their own lines; a customer their projects' lines.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import AlreadyReversed, BadInput, Conflict, NotFound
from taskroute.resolvers import cursors, paging, projects
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import Viewer

REASON_MAX = 1000
KEY_MAX = 200
CSV_CHUNK = 1000
# pending rows in one CSV (undecided work is bounded by auto-approval and resolution)
PENDING_MAX = 100_000
CSV_COLUMNS = [
    "seq",
    "id",
    "kind",
    "created_at",
    "project_id",
    "expert_id",
    "assignment_id",
    "amount_cents",
    "reverses_id",
    "reason",
]


@dataclass(frozen=True)
class Scope:
    expert_id: UUID | None
    project_id: UUID | None


def _cursor(row: asyncpg.Record) -> str:
    return cursors.encode("payout", str(row["seq"]))


def _after(raw: str | None) -> int:
    if raw is None:
        return 0
    return cursors.decode_seq(raw, "payout")


async def scope_for(
    db: Database, viewer: Viewer, expert_id: UUID | None, project_id: UUID | None
) -> Scope:
    """Which lines the viewer asked for and may see; refuses (as not found) the rest."""
    if viewer.role == "admin":
        if expert_id is None and project_id is None:
            raise BadInput("give expertId or projectId", field="expertId")
        return Scope(expert_id, project_id)
    if viewer.role == "expert":
        # An expert sees only their own lines, of any project.
        return Scope(_own(viewer, expert_id), project_id)
    customer_id = viewer.require_customer()
    if project_id is None:
        raise BadInput("give projectId", field="projectId")
    await projects.get_project(db, project_id, customer_id)
    return Scope(expert_id, project_id)


def _own(viewer: Viewer, expert_id: UUID | None) -> UUID:
    """An expert's own id; another expert's reads as not found (never as forbidden)."""
    own = viewer.require_expert()
    if expert_id is not None and expert_id != own:
        raise NotFound("no such expert")
    return own


async def page(
    db: Database, scope: Scope, after: str | None, first: int
) -> paging.Page[asyncpg.Record]:
    return await paging.read(
        db, "payouts_page", scope.expert_id, scope.project_id, _after(after),
        first=paging.size(first), cursor=_cursor,
    )  # fmt: skip


async def expert_balance(
    db: Database, viewer: Viewer, expert_id: UUID | None, project_id: UUID | None
) -> tuple[UUID, dict[str, Any]]:
    """Whose balance (an expert: their own; an admin: the one named) and what it is."""
    if viewer.role == "expert":
        subject = _own(viewer, expert_id)
    else:
        viewer.require_admin()
        if expert_id is None:
            raise BadInput("give expertId", field="expertId")
        subject = expert_id
    row = await db.fetchrow(Q["expert_balance"], subject, project_id)
    assert row is not None
    return subject, dict(row)


async def project_totals(db: Database, project_id: UUID) -> list[dict[str, Any]]:
    return [dict(r) for r in await db.fetch(Q["project_payout_totals"], project_id)]


async def reverse(db: Database, payout_id: UUID, reason: Any) -> asyncpg.Record:
    reason = v.text(reason, "reason", REASON_MAX)
    try:
        async with db.transaction() as conn:
            row = await conn.fetchrow(Q["payout_reverse"], payout_id, reason)
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name == "payouts_reverses_id_key":
            raise AlreadyReversed("this payout was already reversed") from exc
        raise
    if row is not None:
        return row
    found = await db.fetchrow(Q["payout_get"], payout_id)
    if found is None:
        raise NotFound("no such payout")
    raise BadInput("only a payment line can be reversed, not a reversal", field="payoutId")


async def grant_bonus(
    db: Database,
    viewer: Viewer,
    project_id: UUID,
    expert_id: UUID,
    amount_cents: Any,
    reason: Any,
    key: Any,
    max_cents: int,
) -> asyncpg.Record:
    """A customer's bonus to an expert who submitted work in their project: one ledger line
    per (project, idempotency key), however often or concurrently it is asked for. The same
    key with another expert, amount or reason is a CONFLICT; an expert who never worked on
    the project is NOT_FOUND (as every refusal that would tell who exists)."""
    viewer.require_write()
    amount = v.integer(amount_cents, "amountCents", 1, max_cents)
    reason = v.text(reason, "reason", REASON_MAX)
    key = v.text(key, "idempotencyKey", KEY_MAX)
    await projects.get_project(db, project_id, viewer.customer_scope())
    async with db.transaction() as conn:
        row = await conn.fetchrow(Q["bonus_insert"], project_id, expert_id, amount, reason, key)
    if row is not None:
        return row
    found = await db.fetchrow(Q["bonus_get"], project_id, key)
    if found is None:
        raise NotFound("no such expert in this project")
    if (found["expert_id"], found["amount_cents"], found["reason"]) != (expert_id, amount, reason):
        raise Conflict("this idempotency key was used for another bonus", idempotencyKey=key)
    return found


def _cell(value: Any) -> Any:
    # Spreadsheets run cells starting with these as formulas: make free text inert.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return "" if value is None else value


async def csv_lines(db: Database, scope: Scope) -> AsyncIterator[str]:
    """The scope's lines as CSV, fetched in chunks so a large ledger streams."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(CSV_COLUMNS)
    after = 0
    while True:
        rows = await db.fetch(
            Q["payouts_page"], scope.expert_id, scope.project_id, after, CSV_CHUNK
        )
        for r in rows:
            writer.writerow(
                [
                    r["seq"],
                    r["id"],
                    r["kind"],
                    r["created_at"].isoformat(),
                    r["project_id"],
                    r["expert_id"],
                    _cell(r["assignment_id"]),
                    r["amount_cents"],
                    _cell(r["reverses_id"]),
                    _cell(r["reason"]),
                ]
            )
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
        if len(rows) < CSV_CHUNK:
            break
        after = rows[-1]["seq"]
    # Undecided work after the ledger: no line, no seq or id yet; what it would pay.
    for r in await db.fetch(Q["pending_page"], scope.expert_id, scope.project_id, PENDING_MAX):
        writer.writerow(
            [
                "",
                "",
                "pending",
                r["submitted_at"].isoformat(),
                r["project_id"],
                r["expert_id"],
                r["assignment_id"],
                r["pay_cents"],
                "",
                "awaiting acceptance",
            ]
        )
    yield buf.getvalue()
