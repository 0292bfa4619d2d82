"""The claim loop: claim the next task, keep the lease alive, submit exactly once."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.admission import Overloaded, Priority
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
from taskroute.resolvers import answer_schema, payloads
from taskroute.resolvers.json_values import json_value
from taskroute.storage.payload_links import PayloadUrls

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
    # What an answer must be (JSON Schema: the item's, else the project's); None: any JSON.
    answer_schema: Any = None


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
    # 'paid' | 'pending_review' | 'pending_resolution' (the project's payment policy)
    pay_status: str = "paid"


def _claim_from_row(row: asyncpg.Record, urls: PayloadUrls | None) -> Claim:
    payload, payload_url = payloads.deliver(row, urls)
    task = ClaimedTask(
        row["task_id"],
        row["project_id"],
        row["skill"],
        row["priority"],
        payload,
        payload_url,
        row["answer_schema"],
    )
    return Claim(row["assignment_id"], row["lease_until"], task)


def _opened(rows: list[dict[str, Any]]) -> list[notify.Opened]:
    """Wake-up hints for tasks a database function opened: [{skill, project_id, min_quality}]."""
    return [(r["skill"], r["project_id"], 1, r["min_quality"]) for r in rows]


async def claim_next(
    db: Database,
    expert_id: UUID,
    skills: list[str] | None,
    project_id: UUID | None = None,
    payload_urls: PayloadUrls | None = None,
) -> Claim | None:
    """The expert's live claim if they hold one, else the best task they qualify for
    (only from `project_id` when given); large payloads as links signed by `payload_urls`.
    One round trip: `taskroute_claim` (functions/claims.sql) holds the whole rule; gold is
    drawn with probability from the project's gold share.

    Past capacity the admission gate refuses claims (UNAVAILABLE / overloaded), but never the
    claim of an expert who holds one: a repeated claim (a double click, a refreshed page) gets
    the held claim back, found by one probe outside the claim line (`claim_held`)."""
    gate = db.admission
    probed = gate is not None and gate.would_refuse(Priority.CLAIM)
    if probed:
        held = await _held(db, expert_id, payload_urls)
        if held is not None:
            return held
    try:
        row = await db.fetchrow(
            Q["claim_call"],
            expert_id,
            skills,
            project_id,
            random.random(),
            priority=Priority.CLAIM,  # new work waits behind work in progress, and is shed first
        )
    except Overloaded as refused:
        # refused at the gate (or its wait budget ran out): a held claim is still the answer
        held = None if probed and not refused.waited else await _held(db, expert_id, payload_urls)
        if held is None:
            raise
        return held
    assert row is not None
    outcome = row["outcome"]
    if outcome == "no_project":
        raise NotFound("no such project")
    released = row["released"]
    if released:
        # Hints after the commit (the call was its own transaction), by the notifier.
        notify.tasks_opened_committed(_opened([r for r in released if r["status"] == "open"]))
        metrics.count_expired(released)
    changed = {r["project_id"] for r in released}
    if outcome in ("none", "inactive"):
        metrics.CLAIMS_EMPTY.inc()
        notify.progress_changed(*changed)
        return None
    metrics.CLAIMS.labels("held" if outcome == "held" else "new").inc()
    if outcome == "claimed":
        notify.progress_changed(row["project_id"], *changed)
    return _claim_from_row(row, payload_urls)


async def _held(db: Database, expert_id: UUID, payload_urls: PayloadUrls | None) -> Claim | None:
    """The expert's live claim, read outside the claim line (Database.probe)."""
    row = await db.probe(Q["claim_held"], expert_id)
    if row is None:
        return None
    metrics.CLAIMS.labels("held").inc()
    return _claim_from_row(row, payload_urls)


async def holds_claim(db: Database, expert_id: UUID) -> bool:
    """Whether the expert holds a live claim: one index probe, outside the claim line."""
    row = await db.probe(Q["expert_holds_claim"], expert_id)
    return bool(row is not None and row[0])


async def heartbeat(db: Database, expert_id: UUID, assignment_id: UUID) -> Lease:
    """Extends the lease (one round trip: `taskroute_heartbeat`)."""
    row = await db.fetchrow(
        Q["heartbeat_call"], assignment_id, expert_id, priority=Priority.PROTECT
    )
    assert row is not None
    outcome = row["outcome"]
    if outcome == "extended":
        return Lease(assignment_id, row["lease_until"], row["has_high_priority_tasks"])
    if outcome == "not_found":
        raise NotFound("no such assignment")
    if outcome == "submitted":
        raise AlreadySubmitted("this assignment was already submitted")
    if outcome == "canceled":
        raise ProjectCanceled("the project was canceled; submit within the current lease")
    raise LeaseExpired("the lease expired; claim again")


async def submit(db: Database, expert_id: UUID, assignment_id: UUID, answer: Any) -> Receipt:
    """Idempotent: the first submit stores the answer and pays; later ones get that receipt."""
    with metrics.timed(metrics.SUBMIT_SECONDS):
        return await _submit(db, expert_id, assignment_id, answer)


async def _submit(db: Database, expert_id: UUID, assignment_id: UUID, answer: Any) -> Receipt:
    if answer is None:
        raise BadInput("answer is required", field="answer")
    encoded = json_value(answer, "answer", MAX_ANSWER_BYTES)
    # One round trip: `taskroute_submit` stores, pays and does the quality bookkeeping, unless
    # the item or project has an answer schema: then the statement only returns the schema,
    # the answer is checked here (BAD_INPUT naming its JSON path, nothing written, the lease
    # stays) and a second statement submits. One more round trip only for those projects:
    # JSON Schema is checked in Python, and which schema applies is known only from the row.
    row = await db.fetchrow(
        Q["submit_unless_schema_call"], assignment_id, expert_id, answer, priority=Priority.PROTECT
    )
    assert row is not None
    if row["answer_schema"] is not None:
        await answer_schema.check_answer(row["answer_schema"], answer, encoded, "answer")
        row = await db.fetchrow(
            Q["submit_call"], assignment_id, expert_id, answer, priority=Priority.PROTECT
        )
        assert row is not None
    outcome = row["outcome"]
    if outcome == "not_found":
        raise NotFound("no such assignment")
    if outcome == "expired":
        raise LeaseExpired("the lease expired; claim again")
    receipt = Receipt(
        row["receipt_id"], assignment_id, row["submitted_at"], row["pay_cents"], row["pay_status"]
    )
    if outcome == "stored":
        notify.tasks_opened_committed(_opened(row["opened"]))
        notify.progress_changed(row["project_id"])
    return receipt
