"""Batches: createProject / addTasks with payloads in the blob store, sync or in the background.

Fewer than ASYNC_MIN_TASKS tasks: payloads are written (durably) first, then one transaction
inserts the tasks as 'open', then the answer (REST 201, `accepted: false`). Otherwise the
request is stored as an ingest job and the answer comes at once (REST 202, `accepted: true`);
see `ingest.py`. The lifespan (app.py) opens the store and starts the ingest worker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.queries import Q
from taskroute.errors import BadInput, NotFound, ProjectCanceled, TaskrouteError, Unavailable
from taskroute.realtime import notify
from taskroute.resolvers import ingest, payloads, projects
from taskroute.resolvers import validation as v
from taskroute.resolvers.services import Services
from taskroute.resolvers.validation import ProjectSpec, TaskSpec
from taskroute.storage.blobs import BlobStore, BlobStoreError

log = logging.getLogger(__name__)


def blobs_of(services: Services) -> BlobStore:
    store = services.blobs
    if store is None:
        raise Unavailable("the payload store is not configured in this process")
    return store


async def _store_or_unavailable(
    conn: asyncpg.Connection, services: Services, specs: list[TaskSpec]
) -> list[Any]:
    """In the transaction that then inserts the items (see payloads.store_payloads)."""
    try:
        return await payloads.store_payloads(
            conn, blobs_of(services), specs, services.settings.inline_payload_bytes
        )
    except BlobStoreError as exc:
        log.warning("payload store unavailable: %s", exc)
        raise Unavailable("the payload store is unavailable; nothing was stored") from exc


async def create_project(
    services: Services, customer_id: UUID, spec: ProjectSpec
) -> projects.Created:
    if len(spec.tasks) < ingest.ASYNC_MIN_TASKS:
        async with services.db.transaction() as conn:
            refs = await _store_or_unavailable(conn, services, spec.tasks)
            created = await projects.create_project_in(conn, customer_id, spec, refs)
        notify.progress_changed(created.project["id"])
        return created
    blobs = blobs_of(services)
    stored = await ingest.store_request(blobs, spec.tasks, services.settings.ingest_chunk_tasks)
    try:
        async with services.db.transaction() as conn:
            project = await projects.insert_project(conn, customer_id, spec, "ingesting")
            await ingest.enqueue(conn, project["id"], customer_id, "create", stored)
    except TaskrouteError:
        # refused (canceled meanwhile, busy pool): nothing recorded the stored texts. Other
        # errors may come from a commit that happened after all; their texts stay.
        await ingest.discard_request(blobs, stored.keys)
        raise
    services.wake_ingest()
    return projects.Created(project, accepted=True)


@dataclass(frozen=True)
class Added:
    project: asyncpg.Record
    # False: stored and open now (`added` new tasks); True: queued as background job `job_id`.
    accepted: bool
    added: int | None = None
    job_id: UUID | None = None


async def _lock_project(
    conn: asyncpg.Connection, project_id: UUID, customer_id: UUID, adding: bool = False
) -> Any:
    project = await conn.fetchrow(Q["project_get"], project_id, customer_id)
    if project is None:
        raise NotFound("no such project")
    if adding:
        # Before the row lock: a submit completing the project holds this lock, then
        # updates the row (functions/projects.sql).
        await conn.execute(Q["project_settle_lock"], project_id)
    # FOR SHARE: a concurrent cancel waits for us, then cancels what we insert too.
    if await conn.fetchval(Q["project_lock_share"], project_id) == "canceled":
        raise ProjectCanceled("the project was canceled")
    return project


async def add_tasks(
    services: Services, customer_id: UUID, project_id: UUID, specs: list[TaskSpec]
) -> Added:
    if not specs:
        raise BadInput("tasks must list at least one task", field="tasks")
    db = services.db
    if len(specs) < ingest.ASYNC_MIN_TASKS:
        # Check before writing blobs, so a wrong project id stores nothing at all.
        async with db.transaction() as conn:
            project = await _lock_project(conn, project_id, customer_id)
        v.check_gold(specs, project["answer_schema"])
        async with db.transaction() as conn:
            refs = await _store_or_unavailable(conn, services, specs)
            project = await _lock_project(conn, project_id, customer_id, adding=True)
            added = await projects.insert_tasks(conn, project_id, specs, "open", refs)
            # a completed project is active again
            await projects.settle(conn, [project_id])
            project = await conn.fetchrow(Q["project_get"], project_id, None)
        notify.progress_changed(project_id)
        return Added(project, accepted=False, added=added)
    # Checked before the request is written to the store, as in the synchronous path.
    async with db.transaction() as conn:
        project = await _lock_project(conn, project_id, customer_id)
    v.check_gold(specs, project["answer_schema"])
    blobs = blobs_of(services)
    stored = await ingest.store_request(blobs, specs, services.settings.ingest_chunk_tasks)
    try:
        async with db.transaction() as conn:
            project = await _lock_project(conn, project_id, customer_id, adding=True)
            job = await ingest.enqueue(conn, project_id, customer_id, "add", stored)
            # the queued batch is work left: a completed project is active again
            await projects.settle(conn, [project_id])
            project = await conn.fetchrow(Q["project_get"], project_id, None)
    except TaskrouteError:
        # refused (canceled meanwhile, busy pool): nothing recorded the stored texts. Other
        # errors may come from a commit that happened after all; their texts stay.
        await ingest.discard_request(blobs, stored.keys)
        raise
    # settle() may have made a completed project active again: its watchers hear it now, and
    # of the tasks as each chunk is stored (ingest.py)
    notify.progress_changed(project_id)
    services.wake_ingest()
    return Added(project, accepted=True, job_id=job["id"])
