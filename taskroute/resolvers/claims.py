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
from taskroute.observability import metrics
from taskroute.realtime import notify
from taskroute.resolvers import payloads, quality
from taskroute.resolvers.validation import json_value

MAX_ANSWER_BYTES = 256 * 1024
SWEEP_BATCH = 1000  # leases released per sweep transaction


@dataclass(frozen=True)
class ClaimedTask:
    id: UUID
    project_id: UUID
    skill: str
    priority: int
    payload: Any
    # Set instead of `payload` when the payload is too large to travel inline (payloads.py).
    payload_url: str | None = None


@dataclass(frozen=True)
class Claim:
    assignment_id: UUID
    lease_until: datetime
    task: ClaimedTask


@dataclass(frozen=True)
class Lease:
    assignment_id: UUID
    lease_until: datetime
    # an open task with higher priority than the held one is claimable by this expert
    has_high_priority_tasks: bool = False


@dataclass(frozen=True)
class Receipt:
    id: UUID
    assignment_id: UUID
    submitted_at: datetime
    pay_cents: int


def _claim_from_row(row: asyncpg.Record) -> Claim:
    payload, payload_url = payloads.deliver(row)
    task = ClaimedTask(
        row["task_id"], row["project_id"], row["skill"], row["priority"], payload, payload_url
    )
    return Claim(row["assignment_id"], row["lease_until"], task)


async def _audit_claim(conn: asyncpg.Connection, expert_id: UUID, row: asyncpg.Record) -> None:
    """Who received which customer's data, when: every time a claim hands out a payload."""
    await conn.execute(
        Q["audit_insert"], expert_id, row["customer_id"], row["project_id"], row["task_id"], "claim"
    )


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
            metrics.CLAIMS.labels("held").inc()
            # The payload is handed out again: that is audited like the first time.
            await _audit_claim(conn, expert_id, held)
            return _claim_from_row(held)
        # The expert's own stale claim would block a new one (one live claim per expert).
        released = await conn.fetch(Q["leases_release_expired"], SWEEP_BATCH, expert_id)
        await notify.leases_released(conn, released)
        metrics.count_expired(released)
        # Gold (known answers) is mixed into the work first, by the project's gold share.
        row = await quality.claim_gold(conn, expert_id, skills, project_id)
        if row is None:
            row = await conn.fetchrow(Q["task_claim"], expert_id, skills, project_id)
        if row is not None:
            await _audit_claim(conn, expert_id, row)
    # After commit: dashboards recount what changed.
    changed = {r["project_id"] for r in released}
    if row is None:
        metrics.CLAIMS_EMPTY.inc()
        notify.progress_changed(*changed)
        return None
    metrics.CLAIMS.labels("new").inc()
    notify.progress_changed(row["project_id"], *changed)
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
            return Lease(row["id"], row["lease_until"], row["has_high_priority_tasks"])
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
    with metrics.timed(metrics.SUBMIT_SECONDS):
        return await _submit(db, expert_id, assignment_id, answer)


async def _submit(db: Database, expert_id: UUID, assignment_id: UUID, answer: Any) -> Receipt:
    if answer is None:
        raise BadInput("answer is required", field="answer")
    json_value(answer, "answer", MAX_ANSWER_BYTES)
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
        # Gold scoring and pausing, or agreement / adjudication / the item's result.
        await quality.after_submit(conn, found, answer)
    notify.progress_changed(found["project_id"])
    return _receipt(stored, assignment_id)
