"""The claim loop: claim the next task, keep the lease alive, submit exactly once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import (
    AlreadySubmitted,
    BadInput,
    LeaseExpired,
    NotFound,
    ProjectCanceled,
)
from taskroute.resolvers.validation import canonical_json

MAX_ANSWER_BYTES = 256 * 1024
SWEEP_BATCH = 1000  # leases released per sweep transaction


@dataclass(frozen=True)
class ClaimedTask:
    id: UUID
    project_id: UUID
    skill: str
    priority: int
    payload: Any


@dataclass(frozen=True)
class Claim:
    assignment_id: UUID
    lease_until: datetime
    task: ClaimedTask


@dataclass(frozen=True)
class Lease:
    assignment_id: UUID
    lease_until: datetime


@dataclass(frozen=True)
class Receipt:
    id: UUID
    assignment_id: UUID
    submitted_at: datetime
    pay_cents: int


def _claim_from_row(row: asyncpg.Record) -> Claim:
    task = ClaimedTask(
        row["task_id"], row["project_id"], row["skill"], row["priority"], row["payload"]
    )
    return Claim(row["assignment_id"], row["lease_until"], task)


async def claim_next(
    db: Database, expert_id: UUID, skills: list[str] | None, project_id: UUID | None = None
) -> Claim | None:
    """The expert's live claim if they hold one, else the best task they qualify for
    (only from `project_id` when given)."""
    if project_id is not None and await db.fetchval(Q["routing_project_scope"], project_id) is None:
        raise NotFound("no such project")
    async with db.transaction() as conn:
        status = await conn.fetchval(Q["expert_touch"], expert_id)
        if status != "active":
            return None
        held = await conn.fetchrow(Q["assignment_active_for_expert"], expert_id)
        if held is not None:
            return _claim_from_row(held)
        # The expert's own stale claim would block a new one (one live claim per expert).
        await conn.fetch(Q["leases_release_expired"], SWEEP_BATCH, expert_id)
        row = await conn.fetchrow(Q["task_claim"], expert_id, skills, project_id)
        if row is None:
            return None
        await conn.execute(
            Q["audit_insert"],
            expert_id,
            row["customer_id"],
            row["project_id"],
            row["task_id"],
            "claim",
        )
    return _claim_from_row(row)


async def _explain_missing(
    conn: asyncpg.Connection, assignment_id: UUID, expert_id: UUID
) -> asyncpg.Record:
    """Why an assignment could not be used: raises NotFound for another expert's claim."""
    row = await conn.fetchrow(Q["assignment_get"], assignment_id)
    if row is None or row["expert_id"] != expert_id:
        raise NotFound("no such assignment")
    return row


async def heartbeat(db: Database, expert_id: UUID, assignment_id: UUID) -> Lease:
    async with db.transaction() as conn:
        # Presence first: the expert row before the task row, the claim's lock order.
        await conn.execute(Q["expert_seen"], expert_id)
        row = await conn.fetchrow(Q["assignment_heartbeat"], assignment_id, expert_id)
        if row is not None:
            return Lease(row["id"], row["lease_until"])
        current = await _explain_missing(conn, assignment_id, expert_id)
    if current["status"] == "submitted":
        raise AlreadySubmitted("this assignment was already submitted")
    if current["status"] == "active" and current["lease_live"]:
        # Live but not extended: the project was canceled.
        raise ProjectCanceled("the project was canceled; submit within the current lease")
    raise LeaseExpired("the lease expired; claim again")


def _receipt(row: asyncpg.Record | dict[str, Any], assignment_id: UUID) -> Receipt:
    return Receipt(row["receipt_id"], assignment_id, row["submitted_at"], row["pay_cents"])


async def submit(db: Database, expert_id: UUID, assignment_id: UUID, answer: Any) -> Receipt:
    """Idempotent: the first submit stores the answer and pays; later ones get that receipt."""
    if answer is None:
        raise BadInput("answer is required", field="answer")
    if len(canonical_json(answer).encode()) > MAX_ANSWER_BYTES:
        raise BadInput(f"answer is larger than {MAX_ANSWER_BYTES} bytes", field="answer")
    async with db.transaction() as conn:
        found = await _explain_missing(conn, assignment_id, expert_id)
        if found["status"] == "submitted":
            return _receipt(found, assignment_id)
        # Task first, then assignment: the same lock order as the claim and the sweeper.
        task = await conn.fetchrow(Q["task_lock"], found["task_id"])
        current = await conn.fetchrow(Q["assignment_lock"], assignment_id)
        assert task is not None and current is not None
        if current["status"] == "submitted":  # a racing double submit got here first
            return _receipt(current, assignment_id)
        if (
            current["status"] != "active"
            or not current["lease_live"]
            or task["assignment_id"] != assignment_id
        ):
            raise LeaseExpired("the lease expired; claim again")
        stored = await conn.fetchrow(
            Q["assignment_submit"], assignment_id, answer, found["project_pay_cents"]
        )
        assert stored is not None
        await conn.execute(Q["task_done"], found["task_id"], assignment_id)
        await conn.execute(
            Q["payout_insert"],
            assignment_id,
            expert_id,
            found["project_id"],
            found["project_pay_cents"],
        )
    return _receipt(stored, assignment_id)


async def release_expired(db: Database, limit: int = SWEEP_BATCH) -> list[asyncpg.Record]:
    """One sweep: expired leases go back to the pool (or fail after max_retries)."""
    async with db.transaction() as conn:
        return await conn.fetch(Q["leases_release_expired"], limit, None)
