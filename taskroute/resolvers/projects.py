"""Projects: create (with their tasks), read, cancel, progress."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database, Reader
from taskroute.db.queries import Q
from taskroute.errors import NotFound
from taskroute.realtime import notify
from taskroute.resolvers.accounts.credentials import Viewer, project_allowed
from taskroute.resolvers.json_values import json_text
from taskroute.resolvers.payloads import PayloadRef
from taskroute.resolvers.validation import ProjectSpec, TaskSpec


@dataclass(frozen=True)
class Created:
    project: asyncpg.Record
    # False: stored and claimable now; True: queued for background ingest.
    accepted: bool


def _utf8_size(text: str) -> int:
    # isascii() reads a flag CPython keeps on the string: no 2 KB encode per payload.
    return len(text) if text.isascii() else len(text.encode())


async def insert_tasks(
    conn: asyncpg.Connection,
    project_id: UUID,
    specs: list[TaskSpec],
    status: str,
    refs: list[PayloadRef] | None = None,
) -> int:
    """Store items and their task slots; return how many items were new.

    The one step that makes tasks 'open', for the synchronous and the background paths alike.
    `refs` say where each payload lives (its blob key, written durably BEFORE this call, and
    whether it also stays inline); without refs every payload is inline only.
    """
    if not specs:
        return 0
    if refs is None:
        inline: list[str | None] = [s.payload_json for s in specs]
        keys: list[str | None] = [None] * len(specs)
    else:
        inline = [s.payload_json if r.inline else None for s, r in zip(specs, refs, strict=True)]
        keys = [r.key for r in refs]
    ids = [uuid.uuid4() for _ in specs]
    new_ids = {
        r["id"]
        for r in await conn.fetch(
            Q["items_insert"],
            project_id,
            ids,
            [s.skill for s in specs],
            [s.external_id for s in specs],
            inline,
            keys,
            [_utf8_size(s.payload_json) for s in specs],
            [json_text(s.gold) for s in specs],
        )
    }
    fresh = [(i, s) for i, s in zip(ids, specs, strict=True) if i in new_ids]
    own_schema = [(i, s) for i, s in fresh if s.answer_schema is not None]
    if own_schema:
        await conn.execute(
            Q["items_set_answer_schema"],
            [i for i, _ in own_schema],
            [s.answer_schema for _, s in own_schema],
        )
    if fresh:
        await conn.execute(
            Q["tasks_insert"],
            project_id,
            [i for i, _ in fresh],
            status,
            [s.skill for _, s in fresh],
            [s.priority for _, s in fresh],
        )
        tagged = [(i, s) for i, s in fresh if s.required_capabilities]
        if tagged:
            await conn.execute(
                Q["tasks_set_required_caps"],
                [i for i, _ in tagged],
                [",".join(s.required_capabilities) for _, s in tagged],
            )
        if status == "open":
            # Delivered at commit: one hint per task slot (redundancy slots per item).
            project = await conn.fetchrow(Q["project_get"], project_id, None)
            slots, q = (project["redundancy"], project["min_quality"]) if project else (1, 0.0)
            per_skill = Counter(s.skill for _, s in fresh)
            await notify.tasks_opened(
                conn, [(skill, project_id, n * slots, q) for skill, n in per_skill.items()]
            )
    return len(fresh)


async def insert_project(
    conn: asyncpg.Connection, customer_id: UUID, spec: ProjectSpec, status: str
) -> asyncpg.Record:
    """The project row alone; `status` is 'active' (tasks follow now) or 'ingesting'."""
    project = await conn.fetchrow(
        Q["project_insert"],
        customer_id,
        spec.name,
        status,
        spec.priority,
        spec.deadline,
        spec.lease_seconds,
        spec.pay_cents,
        spec.min_quality,
        spec.redundancy,
        spec.max_retries,
        spec.heartbeat_timeout_seconds,
        spec.answer_schema,
        spec.payment_policy,
        spec.auto_approve_seconds,
        spec.override_seconds,
        spec.pay_adjudicated_disagreements,
        spec.payload_retention_seconds,
        spec.flag_after_bad_item_releases,
        spec.max_items_per_expert,
        spec.min_seconds_per_task,
        spec.too_fast_policy,
        spec.layout,
        spec.candidate_keys,
        spec.expert_review,
        spec.review_pay_cents,
        spec.pay_corrected,
    )
    assert project is not None
    return project


async def create_project(
    db: Database, customer_id: UUID, spec: ProjectSpec, refs: list[PayloadRef] | None = None
) -> Created:
    """Synchronous creation with inline payloads only (simulations); the API goes through
    `batches.create_project` (payloads in the blob store first)."""
    async with db.transaction() as conn:
        created = await create_project_in(conn, customer_id, spec, refs)
    notify.progress_changed(created.project["id"])
    return created


async def create_project_in(
    conn: asyncpg.Connection,
    customer_id: UUID,
    spec: ProjectSpec,
    refs: list[PayloadRef] | None = None,
) -> Created:
    """The project and its open tasks, in the caller's transaction."""
    project = await insert_project(conn, customer_id, spec, "active")
    await insert_tasks(conn, project["id"], spec.tasks, "open", refs)
    return Created(project, accepted=False)


async def get_project(db: Reader, project_id: UUID, customer_scope: UUID | None) -> asyncpg.Record:
    """The project if `customer_scope` owns it (None: admins, any); NOT_FOUND otherwise. The
    one ownership check: every read and change of a customer's project goes through it."""
    row = await db.fetchrow(Q["project_get"], project_id, customer_scope)
    # a token limited to one project finds no other (auth.CustomerScope)
    if row is None or not project_allowed(customer_scope, project_id):
        raise NotFound("no such project")
    return row


async def visible_project(db: Reader, viewer: Viewer, project_id: UUID) -> asyncpg.Record:
    """The project if this viewer may see it (its customer, or an admin)."""
    return await get_project(db, project_id, viewer.customer_scope())


async def cancel_project(db: Database, project_id: UUID, customer_id: UUID) -> asyncpg.Record:
    async with db.transaction() as conn:
        await get_project(conn, project_id, customer_id)
        await conn.execute(Q["project_cancel"], project_id, customer_id)
        # Cancel keeps its promise: under on_acceptance, answers whose item can no
        # longer resolve are accepted and paid now (on_review work stays for review/auto).
        await conn.execute(Q["assignments_decide_canceled"], project_id, None)
        row = await conn.fetchrow(Q["project_get"], project_id, customer_id)
    assert row is not None
    notify.progress_changed(project_id)
    return row


async def settle(
    conn: asyncpg.Connection, project_ids: Iterable[UUID], probe: bool = False
) -> None:
    """Complete or reopen projects in the caller's transaction (functions/projects.sql:
    taskroute_project_settle). `probe=False` for callers that add work (they took
    `project_settle_lock` before any project row lock) or run off the hot path."""
    ids = sorted(set(project_ids))  # the lock order
    if ids:
        await conn.execute(Q["projects_settle_call"], ids, probe)


async def progress(db: Reader, project_id: UUID) -> dict[str, Any]:
    row = await db.fetchrow(Q["project_progress"], project_id)
    assert row is not None
    return dict(row)
