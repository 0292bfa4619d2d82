"""Background ingest of large batches (>= ASYNC_MIN_TASKS tasks).

Accepting a batch stores the validated task specs durably before the 202: each chunk's text
(`encode_chunk`) as one blob in the blob store, then, in one transaction, the job and one
`ingest_chunks` row per chunk holding the blob's key and the chunk's payload keys. (If the
store refuses the write, the text goes into the row itself, where it always used to go: the
batch is still accepted while Postgres is up.) A worker in every server process then takes
one chunk at a time with `FOR UPDATE SKIP LOCKED`, reads its text, writes its payloads to the
blob store, and in the same transaction inserts its items and tasks as 'open' and deletes
the chunk (queuing its text's blob for deletion; the worker deletes it after the commit).
So:
- a task is never open before its payload is durable (blob writes come before the insert);
- a crash anywhere rolls the chunk back and another worker (or the restart) redoes it: the
  blobs are content-addressed, and the chunk row vanishes only with its tasks, so no
  duplicates;
- object-store errors leave the job 'retrying' with its error and an exponential back-off.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.config import Settings
from taskroute.db.pool import Database, Reader
from taskroute.db.queries import Q
from taskroute.resolvers.payloads import store_payloads
from taskroute.resolvers.projects import insert_tasks, settle
from taskroute.resolvers.validation import TaskSpec
from taskroute.storage.blobs import BlobNotFound, BlobStore, BlobStoreError, blob_key

log = logging.getLogger(__name__)

# Batches of this many tasks or more are ingested in the background (202 / accepted: true).
ASYNC_MIN_TASKS = 100
# What a customer is told about a failed attempt (details are for the operators' log).
STORE_DOWN = "the object store is unavailable; the batch is retried automatically"
INTERNAL_FAILURE = "an internal error interrupted this batch; the operators have the details"

# Unexpected (non object-store) errors fail a job after this many consecutive attempts;
# object-store errors are retried for as long as the store is down.
MAX_UNEXPECTED_ATTEMPTS = 10


def encode_chunk(specs: Sequence[TaskSpec]) -> str:
    """One line per task: `[skill, priority, external_id, gold, required_capabilities,
    answer_schema]` TAB canonical payload JSON.

    The payload's canonical JSON is kept verbatim (no second encoding, and the worker hashes
    the very bytes the request was validated with: the same blob key as the synchronous
    path). Compact JSON never contains a raw tab or newline, so the separators are safe.
    """
    # Plain tasks (no external id, gold or own schema) of one skill and priority share
    # their metadata line: encoded once.
    plain: dict[tuple[str, int, tuple[str, ...]], str] = {}
    lines = []
    for s in specs:
        key = (s.skill, s.priority, s.required_capabilities)
        is_plain = s.external_id is None and s.gold is None and s.answer_schema is None
        meta = plain.get(key) if is_plain else None
        if meta is None:
            meta = json.dumps(
                [
                    s.skill,
                    s.priority,
                    s.external_id,
                    s.gold,
                    list(s.required_capabilities),
                    s.answer_schema,
                ],
                separators=(",", ":"),
            )
            if is_plain:
                plain[key] = meta
        lines.append(meta + "\t" + s.payload_json)
    return "\n".join(lines)


def decode_chunk(body: str) -> list[TaskSpec]:
    specs = []
    # Most tasks of a batch share their metadata (same skill, priority, no external id):
    # each distinct metadata line is parsed once.
    metas: dict[str, tuple[Any, ...]] = {}
    for line in body.split("\n"):
        meta_json, _, payload_json = line.partition("\t")
        meta = metas.get(meta_json)
        if meta is None:
            # chunks stored before answer schemas existed have no 6th element
            skill, priority, external_id, gold, caps, *rest = json.loads(meta_json)
            meta = (skill, priority, external_id, gold, tuple(caps), rest[0] if rest else None)
            metas[meta_json] = meta
        skill, priority, external_id, gold, caps, schema = meta
        specs.append(
            TaskSpec(
                skill=skill,
                payload_json=payload_json,  # validated at accept: kept as text, never parsed
                priority=priority,
                external_id=external_id,
                gold=gold,
                required_capabilities=caps,
                answer_schema=schema,
            )
        )
    return specs


@dataclass(frozen=True)
class StoredRequest:
    """A batch's chunks as `enqueue` records them: each chunk's text is in the blob store
    under `keys[i]`, or (the store refused it) travels in `texts[i]` to the chunk row."""

    starts: list[int]
    counts: list[int]
    keys: list[str | None]
    texts: list[str | None]
    payload_keys: list[str]


async def store_request(
    blobs: BlobStore, specs: Sequence[TaskSpec], chunk_size: int
) -> StoredRequest:
    """Write the batch's chunks to the blob store (durably), before the transaction that
    records them (`enqueue`). A store that is down makes the texts go to Postgres instead."""
    chunk_size = max(1, chunk_size)
    starts = list(range(0, len(specs), chunk_size))
    texts = [encode_chunk(specs[i : i + chunk_size]) for i in starts]
    payload_keys = [blob_key(s.payload_json) for s in specs]
    counts = [min(chunk_size, len(specs) - i) for i in starts]
    # Random keys: two identical requests must not share (and so delete) each other's text.
    keys = [secrets.token_hex(32) for _ in starts]
    try:
        await blobs.put_many(zip(keys, (t.encode() for t in texts), strict=True))
    except BlobStoreError as exc:
        log.warning("batch request kept in Postgres: the payload store refused it (%s)", exc)
        await discard_request(blobs, keys)
        return StoredRequest(starts, counts, [None] * len(starts), list(texts), payload_keys)
    return StoredRequest(starts, counts, list(keys), [None] * len(starts), payload_keys)


async def discard_request(blobs: BlobStore, keys: Sequence[str | None]) -> None:
    """Best effort: the texts of a request that was not recorded (nothing refers to them)."""
    present = [k for k in keys if k is not None]
    if present:
        try:
            await blobs.delete_many(present)
        except BlobStoreError as exc:
            log.warning("could not delete %d unrecorded batch chunks: %s", len(present), exc)


async def enqueue(
    conn: asyncpg.Connection,
    project_id: UUID,
    customer_id: UUID,
    kind: str,
    stored: StoredRequest,
) -> asyncpg.Record:
    """Record the stored batch as a job of chunks (in the caller's transaction)."""
    job = await conn.fetchrow(
        Q["ingest_job_insert"],
        project_id,
        customer_id,
        kind,
        len(stored.payload_keys),
        len(stored.starts),
    )
    await conn.execute(
        Q["ingest_chunks_insert"],
        job["id"],
        list(range(len(stored.starts))),
        stored.starts,
        stored.counts,
        stored.texts,
        stored.keys,
        stored.payload_keys,
    )
    return job


async def status(db: Reader, project_id: UUID) -> dict[str, Any] | None:
    row = await db.fetchrow(Q["ingest_status"], project_id)
    return dict(row) if row is not None else None


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
