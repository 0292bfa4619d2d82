"""Batches: createProject / addTasks with payloads in the blob store, sync or in the background.

Fewer than ASYNC_MIN_TASKS tasks: payloads are written (durably) first, then one transaction
inserts the tasks as 'open', then the answer (REST 201, `accepted: false`). Otherwise the
request is stored as an ingest job and the answer comes at once (REST 202, `accepted: true`);
see `ingest.py`. Also the audit log query and the per-process runtime (store, worker, URLs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

import asyncpg

from taskroute.blobs import BlobStore, BlobStoreError, open_blob_store
from taskroute.db.queries import Q
from taskroute.errors import BadInput, NotFound, ProjectCanceled, TaskrouteError, Unavailable
from taskroute.realtime import notify
from taskroute.resolvers import cursors, ingest, payloads, projects, retention
from taskroute.resolvers import validation as v
from taskroute.resolvers.validation import ProjectSpec, TaskSpec

if TYPE_CHECKING:
    from taskroute.jobs import Jobs
    from taskroute.services import Services

log = logging.getLogger(__name__)

AUDIT_PAGE_MAX = 1000


def blobs_of(services: Services) -> BlobStore:
    store: BlobStore | None = services.extras.get("blobs")
    if store is None:
        raise Unavailable("the payload store is not configured in this process")
    return store


def _wake_worker(services: Services) -> None:
    worker = services.extras.get("ingest_worker")
    if worker is not None:
        worker.wake()


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
    _wake_worker(services)
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
            # a completed project is active again (issue 13)
            await projects.settle(conn, [project_id])
            project = await conn.fetchrow(Q["project_get"], project_id, None)
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
    _wake_worker(services)
    return Added(project, accepted=True, job_id=job["id"])


async def audit_page(
    services: Services,
    customer_scope: UUID | None,
    project_id: UUID | None,
    expert_id: UUID | None,
    after: str | None,
    limit: int,
) -> tuple[list[asyncpg.Record], str | None]:
    """Entries after the cursor `after`, oldest first, and the cursor of the next page."""
    limit = cursors.limit(limit, "limit", 1, AUDIT_PAGE_MAX)
    after_seq = 0 if after is None or after == "" else cursors.seq(after)
    # a token limited to one project reads that project's log only
    project_id = project_id or getattr(customer_scope, "project_id", None)
    if project_id is not None:
        await projects.get_project(services.db, project_id, customer_scope)
    rows = await services.db.fetch(
        Q["audit_log_page"], customer_scope, project_id, expert_id, after_seq, limit + 1
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (str(rows[-1]["seq"]) if more else None)


# --- the per-process runtime -------------------------------------------------------------


@dataclass
class Runtime:
    blobs: BlobStore

    async def stop(self) -> None:
        """After the jobs stopped (the ingest worker writes to the store until then)."""
        # payload URL signing stays configured: another app in this process may still use it
        await self.blobs.close()


async def start(services: Services, jobs: Jobs) -> Runtime:
    """Called by the app's lifespan: the blob store, payload URLs, the ingest worker and the
    payload retention job (two of the process's background jobs)."""
    s = services.settings
    blobs = open_blob_store(s.blob_url, s.data_dir, s.blob_concurrency)
    secret = await payloads.load_secret(services.db, s.url_secret)
    payloads.configure(payloads.PayloadUrls(secret, s.payload_url_ttl))
    worker = ingest.IngestWorker(services.db, blobs, s)
    services.extras["blobs"] = blobs
    services.extras["ingest_worker"] = worker
    jobs.spawn("ingest worker", worker.run(), on_stop=worker.stop_at_safe_point)
    # never refused by admission (admission.py), like the other background jobs
    purge_db = services.db.for_jobs()
    jobs.every(
        "payload retention", s.retention_interval, lambda: retention.retention_pass(purge_db, blobs)
    )
    log.info("payloads in %s; ingest worker and retention job started", blobs.url)
    return Runtime(blobs)
