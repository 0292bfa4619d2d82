"""The claim loop: claim the next task, keep the lease alive, submit exactly once."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.admission import Overloaded, Priority
from taskroute.db.pool import Database, ProbeUnanswered
from taskroute.db.queries import Q
from taskroute.errors import (
    AlreadySubmitted,
    BadInput,
    LeaseExpired,
    NotFound,
    ProjectCanceled,
    TooManyReleases,
)
from taskroute.observability import metrics
from taskroute.realtime import notify
from taskroute.resolvers import answer_schema, payloads, reviews
from taskroute.resolvers.held_claims import HeldClaims
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
    # For a review task: what a correction must be.
    answer_schema: Any = None
    # How the workbench presents it (layouts.py); PAIRWISE: the candidates' payload keys
    # and the order shown to this assignment ("ab": a on the left, "ba": b on the left).
    layout: str = "GENERIC"
    candidate_keys: tuple[str, str] | None = None
    candidate_order: str | None = None
    # A review task (reviews.py): the answer under review; None for other work.
    review_of: ReviewOf | None = None
    # The project's instructions version this claim was given under (None: none); the text
    # is read by `instructions.get`, cached per process, only when a client asks for it.
    instructions_version: int | None = None


@dataclass(frozen=True)
class ReviewOf:
    answer: Any
    # PAIRWISE: the order the reviewed expert saw ("ab" | "ba")
    candidate_order: str | None = None


def candidate_order(layout: str, swapped: bool | None) -> str | None:
    """PAIRWISE: "ba" when candidate b was shown on the left, else "ab"; None otherwise."""
    if layout != "PAIRWISE" or swapped is None:
        return None
    return "ba" if swapped else "ab"


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
    # a repeated submit: this receipt is the first answer's
    duplicate: bool = False
    # a repeated submit whose answer differs from the stored one (which stands)
    answer_differs: bool = False


def _claim_from_row(row: asyncpg.Record, urls: PayloadUrls | None) -> Claim:
    payload, payload_url = payloads.deliver(row, urls)
    layout = row["layout"] or "GENERIC"
    keys = row["candidate_keys"]
    review_of = None
    if row["reviewed_answer"] is not None:
        review_of = ReviewOf(
            row["reviewed_answer"], candidate_order(layout, row["reviewed_swapped"])
        )
    task = ClaimedTask(
        row["task_id"],
        row["project_id"],
        row["skill"],
        row["priority"],
        payload,
        payload_url,
        row["answer_schema"],
        layout,
        (keys[0], keys[1]) if keys else ("a", "b") if layout == "PAIRWISE" else None,
        candidate_order(layout, row["candidates_swapped"]),
        review_of,
        row["instructions_version"],
    )
    return Claim(row["assignment_id"], row["lease_until"], task)


def _opened(rows: list[dict[str, Any]]) -> list[notify.Opened]:
    """Wake-up hints for tasks a database function opened: [{skill, project_id, min_quality}]."""
    return [(r["skill"], r["project_id"], 1, r["min_quality"]) for r in rows]


# Pauses (seconds) before asking again when the only work left is locked for a moment by
# another transaction; about 0.8 s in all, then "nothing for you".
BUSY_PAUSES = (0.02, 0.05, 0.1, 0.2, 0.4)


async def claim_next(
    db: Database,
    expert_id: UUID,
    skills: list[str] | None,
    project_id: UUID | None = None,
    payload_urls: PayloadUrls | None = None,
    memo: HeldClaims[Claim] | None = None,
) -> Claim | None:
    """The expert's live claim if they hold one, else the best task they qualify for
    (only from `project_id` when given); large payloads as links signed by `payload_urls`.
    One round trip: `taskroute_claim` (functions/claims.sql) holds the whole rule; gold is
    drawn with probability from the project's gold share.

    Past capacity the admission gate refuses claims (UNAVAILABLE / overloaded), but never the
    claim of an expert who holds one: a repeated claim (a double click, a refreshed page) gets
    the held claim back, found by one probe outside the claim line (`claims_held`), or, when
    the probe goes unanswered, remembered from this process's own answers (`memo`)."""
    gate = db.admission
    probed = gate is not None and gate.would_refuse(Priority.CLAIM)
    if probed:
        held = await _held(db, expert_id, payload_urls, memo)
        if held is not None:
            return held
    for pause in (*BUSY_PAUSES, None):
        try:
            row = await db.fetchrow(
                Q["claim_call"],
                expert_id,
                skills,
                project_id,
                random.random(),
                priority=Priority.CLAIM,  # new work waits behind work in progress, shed first
            )
        except Overloaded as refused:
            # refused at the gate (or its wait budget ran out): a held claim is still the answer
            held = (
                None
                if probed and not refused.waited
                else await _held(db, expert_id, payload_urls, memo)
            )
            if held is None:
                raise
            return held
        assert row is not None
        outcome = row["outcome"]
        if outcome == "no_project":
            raise NotFound("no such project")
        if outcome == "unknown_skill":
            raise BadInput(f"you do not hold the skill(s): {row['skill']}", field="skills")
        released = row["released"]
        if released:
            # Hints after the commit (the call was its own transaction), by the notifier.
            notify.tasks_opened_committed(_opened([r for r in released if r["status"] == "open"]))
            metrics.count_expired(released)
        changed = {r["project_id"] for r in released}
        if outcome != "busy" or pause is None:
            break
        # Work this expert may take is locked for a moment (a claim or a submit's completion
        # probe in flight): ask again rather than say there is nothing.
        metrics.CLAIMS_RETRIED.inc()
        await asyncio.sleep(pause)
    if outcome in ("none", "busy", "inactive"):
        metrics.CLAIMS_EMPTY.inc()
        notify.progress_changed(*changed)
        if memo is not None:
            memo.forget(expert_id)
        return None
    assert row is not None
    metrics.CLAIMS.labels("held" if outcome == "held" else "new").inc()
    if outcome == "claimed":
        notify.progress_changed(row["project_id"], *changed)
    claim = _claim_from_row(row, payload_urls)
    if memo is not None:
        memo.remember(expert_id, claim)
    return claim


async def _held(
    db: Database,
    expert_id: UUID,
    payload_urls: PayloadUrls | None,
    memo: HeldClaims[Claim] | None,
) -> Claim | None:
    """The expert's live claim, read outside the claim line (Database.probe); when the probe
    goes unanswered, the one this process last handed out, if still within the memo's window.
    When the database answers, its answer stands and the memo follows it."""
    try:
        row = await db.probe(Q["claims_held"], "expert_id", expert_id)
    except ProbeUnanswered:
        remembered = memo.get(expert_id) if memo is not None else None
        if remembered is not None:
            metrics.CLAIMS.labels("remembered").inc()
        return remembered
    if row is None:
        if memo is not None:
            memo.forget(expert_id)
        return None
    metrics.CLAIMS.labels("held").inc()
    claim = _claim_from_row(row, payload_urls)
    if memo is not None:
        memo.remember(expert_id, claim)
    return claim


async def holds_claim(db: Database, expert_id: UUID) -> bool:
    """Whether the expert holds a live claim: one index probe, outside the claim line.
    ProbeUnanswered when the database does not answer in time."""
    row = await db.probe(Q["experts_holding_claims"], "expert_id", expert_id)
    return row is not None


async def heartbeat(
    db: Database, expert_id: UUID, assignment_id: UUID, memo: HeldClaims[Claim] | None = None
) -> Lease:
    """Extends the lease (one round trip: `taskroute_heartbeat`)."""
    row = await db.fetchrow(
        Q["heartbeat_call"], assignment_id, expert_id, priority=Priority.PROTECT
    )
    assert row is not None
    outcome = row["outcome"]
    if outcome == "extended":
        return Lease(assignment_id, row["lease_until"], row["has_high_priority_tasks"])
    if memo is not None:
        memo.forget(expert_id, assignment_id)
    if outcome == "not_found":
        raise NotFound("no such assignment")
    if outcome == "submitted":
        raise AlreadySubmitted("this assignment was already submitted")
    if outcome == "canceled":
        raise ProjectCanceled("the project was canceled; submit within the current lease")
    raise LeaseExpired("the lease expired; claim again")


async def submit(
    db: Database,
    expert_id: UUID,
    assignment_id: UUID,
    answer: Any,
    memo: HeldClaims[Claim] | None = None,
) -> Receipt:
    """Idempotent: the first submit stores the answer and pays; later ones get that receipt."""
    with metrics.timed(metrics.SUBMIT_SECONDS):
        try:
            receipt = await _submit(db, expert_id, assignment_id, answer)
        except (NotFound, LeaseExpired):
            if memo is not None:
                memo.forget(expert_id, assignment_id)
            raise
    if memo is not None:
        memo.forget(expert_id, assignment_id)  # stored now, or before
    return receipt


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
    if row["review"] or row["answer_schema"] is not None:
        # a review task's answer is a verdict whose correction must match the schema
        if row["review"]:
            await reviews.check_answer(row["answer_schema"], answer)
        else:
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
        row["receipt_id"],
        assignment_id,
        row["submitted_at"],
        row["pay_cents"],
        row["pay_status"],
        duplicate=outcome == "already",
        answer_differs=bool(row["answer_differs"]),
    )
    if outcome == "stored":
        notify.tasks_opened_committed(_opened(row["opened"]))
        notify.progress_changed(row["project_id"])
    return receipt


RELEASE_REASONS = ("SKIP", "CANNOT_ANSWER", "BAD_ITEM")


@dataclass(frozen=True)
class Release:
    assignment_id: UUID
    reason: str
    releases_left: int
    resets_at: datetime


async def release(
    db: Database,
    expert_id: UUID,
    assignment_id: UUID,
    reason: Any,
    per_hour: int,
    memo: HeldClaims[Claim] | None = None,
) -> Release:
    """Gives a live claim back (one round trip: `taskroute_release`, functions/releases.sql):
    the slot opens at once (an idle expert is woken), no attempt is counted, and this expert
    is never offered the item again. At most `per_hour` releases per expert per hour."""
    if reason not in RELEASE_REASONS:
        raise BadInput(f"reason must be one of {', '.join(RELEASE_REASONS)}", field="reason")
    row = await db.fetchrow(
        Q["release_call"], assignment_id, expert_id, reason, per_hour, priority=Priority.PROTECT
    )
    assert row is not None
    outcome = row["outcome"]
    if outcome != "limited" and memo is not None:
        memo.forget(expert_id, assignment_id)  # released, or over already
    if outcome == "not_found":
        raise NotFound("no such assignment")
    if outcome == "submitted":
        raise AlreadySubmitted("this assignment was already submitted")
    if outcome == "expired":
        raise LeaseExpired("the lease expired; claim again")
    if outcome == "limited":
        resets = row["resets_at"]
        raise TooManyReleases(
            f"no releases left this hour; the next one is allowed at {resets.isoformat()}",
            resetsAt=resets.isoformat(),
        )
    notify.tasks_opened_committed(_opened(row["opened"]))
    notify.progress_changed(row["project_id"])
    return Release(assignment_id, reason, row["releases_left"], row["resets_at"])


async def releases_left(
    db: Database, expert_id: UUID, per_hour: int
) -> tuple[int, datetime | None]:
    """This hour's remaining releases, and when the oldest counted one stops counting."""
    row = await db.fetchrow(Q["releases_left"], expert_id, per_hour)
    assert row is not None
    return row["releases_left"], row["resets_at"]
