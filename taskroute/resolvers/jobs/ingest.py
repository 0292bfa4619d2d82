"""The ingest worker: takes queued chunks of large batches and makes their tasks open.

What accepting a batch stores, and the guarantees, are described in `taskroute.resolvers.ingest`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.config import Settings
from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.realtime import notify
from taskroute.resolvers.ingest import INTERNAL_FAILURE, STORE_DOWN, decode_chunk
from taskroute.resolvers.payloads import store_payloads
from taskroute.resolvers.projects import insert_tasks, settle
from taskroute.storage.blobs import BlobNotFound, BlobStore, BlobStoreError

log = logging.getLogger(__name__)

# Unexpected (non object-store) errors fail a job after this many consecutive attempts;
# object-store errors are retried for as long as the store is down.
MAX_UNEXPECTED_ATTEMPTS = 10


class IngestWorker:
    """One per server process; any number of processes share the queue safely."""

    def __init__(self, db: Database, blobs: BlobStore, settings: Settings) -> None:
        self.db = db
        self.blobs = blobs
        self.settings = settings
        self._wake = asyncio.Event()
        self._stopping = False

    def wake(self) -> None:
        """A job was just accepted here: start now instead of at the next poll."""
        self._wake.set()

    def stop_at_safe_point(self) -> None:
        """Shutdown (jobs.py): finish the chunk in hand, take no other."""
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        """`ingest_workers` loops: one writes a chunk's blobs while another inserts rows."""
        loops = [self._loop() for _ in range(max(1, self.settings.ingest_workers))]
        await asyncio.gather(*loops)

    async def _loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                while not self._stopping and await self.step():
                    pass
                await self.db.execute(Q["ingest_chunks_of_canceled_delete"])
            except asyncio.CancelledError:
                raise
            except Exception:  # e.g. the database is down: keep the worker alive
                log.exception("ingest worker failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.settings.ingest_poll_interval)

    async def step(self) -> bool:
        """Store one chunk; False when no chunk is due."""
        s = self.settings
        async with self.db.connection() as conn:
            tx = conn.transaction()
            await tx.start()
            job_id = None
            try:
                chunk = await conn.fetchrow(Q["ingest_chunk_claim"])
                if chunk is None:
                    await tx.rollback()
                    return False
                job_id = chunk["job_id"]
                project = await conn.fetchrow(Q["project_get"], chunk["project_id"], None)
                if project["status"] == "canceled":  # don't write blobs nobody will need
                    await conn.execute(Q["ingest_job_cancel"], job_id)
                    await tx.commit()
                    return True
                specs = decode_chunk(await self._chunk_text(chunk))
                # Payloads first (durable), then the tasks that need them become open.
                refs = await store_payloads(
                    conn, self.blobs, specs, s.inline_payload_bytes, chunk["payload_keys"]
                )
                # Locked only now (not during the blob writes): a cancel that committed
                # meanwhile is seen here; one that comes later waits and cancels our tasks.
                project_status = await conn.fetchval(Q["project_lock_share"], chunk["project_id"])
                if project_status == "canceled":
                    await conn.execute(Q["ingest_job_cancel"], job_id)
                    await tx.commit()
                    return True
                await insert_tasks(conn, chunk["project_id"], specs, "open", refs)
                await conn.execute(Q["ingest_chunk_delete"], job_id, chunk["chunk_no"])
                job = await conn.fetchrow(Q["ingest_job_progress"], job_id, len(specs))
                if job["state"] == "done" and job["kind"] == "create":
                    await conn.execute(Q["project_activate"], chunk["project_id"])
                await tx.commit()
                # after the commit, so the recount sees the chunk's tasks
                notify.progress_changed(chunk["project_id"])
                if chunk["body_key"] is not None:
                    await self._delete_request(conn, chunk["body_key"])
            except BlobNotFound as exc:
                # The chunk's own text is gone (someone emptied the store): no retry brings
                # it back, so it counts towards failing the job.
                await tx.rollback()
                log.error("ingest of job %s: its stored request is gone: %s", job_id, exc)
                await self._attempt_failed(
                    conn, job_id, INTERNAL_FAILURE, f"request: {exc}", MAX_UNEXPECTED_ATTEMPTS
                )
                return True
            except BlobStoreError as exc:
                await tx.rollback()
                await self._attempt_failed(conn, job_id, STORE_DOWN, f"object store: {exc}", None)
            except (asyncpg.PostgresConnectionError, OSError, asyncio.CancelledError):
                await _quiet_rollback(tx)
                raise  # shutdown, or the database itself: the run loop waits and retries
            except Exception as exc:
                await _quiet_rollback(tx)
                if job_id is None:
                    raise
                log.exception("ingest of job %s failed", job_id)
                await self._attempt_failed(
                    conn,
                    job_id,
                    INTERNAL_FAILURE,
                    f"{type(exc).__name__}: {exc}",
                    MAX_UNEXPECTED_ATTEMPTS,
                )
        return True

    async def _chunk_text(self, chunk: asyncpg.Record) -> str:
        if chunk["body"] is not None:
            text: str = chunk["body"]
            return text
        try:
            return (await self.blobs.get(chunk["body_key"])).decode()
        except BlobNotFound as exc:
            raise BlobNotFound(f"chunk {chunk['chunk_no']} of job {chunk['job_id']}") from exc

    async def _delete_request(self, conn: asyncpg.Connection, key: str) -> None:
        """The stored chunk's text, now that its tasks committed. If this fails, the key
        stays queued (ingest_chunk_delete) and the retention job deletes it."""
        try:
            await self.blobs.delete_many([key])
            await conn.execute(Q["ingest_request_deleted"], key)
        except (BlobStoreError, asyncpg.PostgresError) as exc:
            log.warning("stored batch chunk %s left for the retention job: %s", key, exc)

    async def _attempt_failed(
        self,
        conn: asyncpg.Connection,
        job_id: UUID | None,
        reason: str,
        error: str,
        max_attempts: int | None,
    ) -> None:
        """Record a failed attempt. The customer reads `reason` (`project { ingest { error } }`);
        the details (paths, errno, exception text) go to the log only."""
        if job_id is None:
            return
        s = self.settings
        async with conn.transaction():
            row = await conn.fetchrow(
                Q["ingest_job_attempt_failed"],
                job_id,
                reason,
                s.ingest_retry_base,
                s.ingest_retry_max,
                max_attempts,
            )
            if row is not None and row["state"] == "failed":
                # the batch no longer counts as work left: maybe nothing is (completion)
                await settle(conn, [row["project_id"]])
        if row is not None:
            log.warning(
                "ingest job %s attempt %d failed (%s): %s",
                job_id,
                row["attempts"],
                row["state"],
                error,
            )


async def _quiet_rollback(tx: Any) -> None:
    with contextlib.suppress(Exception):
        await tx.rollback()
