"""Payload retention: the customer's payloads do not outlive their purpose.

A project that ended (canceled, or completed) keeps its payloads for its `payload_retention`
(default 30 days, set at creation), then a background job, one process at a time:

1. expires the project's payloads (`expire_due`): its items still holding one are marked
   (`payload_deleted_at`) and their inline copies cleared, their blob keys queued in
   `blob_deletions`, and the admin audit records it (items, keys, bytes, when the project
   ended). Item rows, answers, results, the ledger and both audits stay; so do `payload_key`
   and `payload_bytes`, the fact that a payload existed. A completed project that gets new
   work is active again: its new payloads are kept until it ends again.
2. deletes queued blobs (`delete_queued`) that no item whose payload is kept references:
   blobs are content-addressed, so another project may hold the very same payload, and its
   copy is the same object. Keys of batch chunks dropped by a cancel are queued too
   (queries/batches.sql), so a canceled batch leaves nothing behind.

Step 2 holds the blob-writes lock exclusively (payloads.BLOB_WRITES_LOCK_KEY): writers hold it
shared from their blob writes until their items commit, so a blob a writer just found (and did
not rewrite) is never deleted under it. Each step is idempotent: a crash redoes the batch,
deleting a blob that is already gone is not an error, and a queue row goes only in the
transaction that saw its blob deleted (or kept).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.resolvers.accounts import rules as accounts
from taskroute.resolvers.payloads import BLOB_WRITES_LOCK_KEY
from taskroute.storage.blobs import BlobStore, BlobStoreError

log = logging.getLogger(__name__)

# Arbitrary constant naming "the retention job" among advisory locks.
RETENTION_LOCK_KEY = 0x7A5C0019
PROJECTS_PER_ROUND = 20
DELETE_BATCH = 500
# How long the job waits for writers in flight (a blob write takes a chunk's time at most);
# writers that arrive meanwhile queue behind it, so it is never starved.
WRITERS_WAIT = "10s"
ACTOR = "system"


@dataclass(frozen=True)
class Round:
    expired: int  # projects whose payloads stopped being kept
    deleted: int  # blobs deleted from the store
    kept: int  # queued blobs kept: an item whose payload is kept still uses them


async def expire_due(db: Database) -> int:
    """Queue the payloads of projects whose retention ran out (by taskroute_now(), the clock
    tests move); return how many projects."""
    async with db.transaction() as conn:
        if not await conn.fetchval(Q["advisory_xact_try_lock"], RETENTION_LOCK_KEY):
            return 0
        due = await conn.fetch(Q["projects_payloads_due"], PROJECTS_PER_ROUND)
        for p in due:
            r = await conn.fetchrow(Q["project_payloads_expire"], p["id"])
            await accounts.audit(
                conn,
                ACTOR,
                "payloads_expired",
                "project",
                p["id"],
                "payload retention ran out",
                ended_at=p["ended_at"],
                retention_seconds=p["retention_seconds"],
                items=r["items"],
                payload_keys=r["payload_keys"],
                payload_bytes=r["payload_bytes"],
            )
    if due:
        log.info("payload retention expired %d projects", len(due))
    return len(due)


async def delete_queued(db: Database, blobs: BlobStore) -> tuple[int, int]:
    """Delete one batch of queued blobs nobody else uses; return (deleted, kept).
    Raises BlobStoreError (the batch stays queued) or Unavailable."""
    try:
        return await _delete_batch(db, blobs)
    except asyncpg.LockNotAvailableError:
        log.info("payload deletion waits: blob writers were busy for %s", WRITERS_WAIT)
        return 0, 0


async def _delete_batch(db: Database, blobs: BlobStore) -> tuple[int, int]:
    async with db.transaction() as conn:
        if not await conn.fetchval(Q["advisory_xact_try_lock"], RETENTION_LOCK_KEY):
            return 0, 0
        await conn.execute(Q["lock_timeout_local"], WRITERS_WAIT)
        await conn.execute(Q["advisory_xact_lock"], BLOB_WRITES_LOCK_KEY)
        rows = await conn.fetch(Q["blob_deletions_take"], DELETE_BATCH)
        if not rows:
            return 0, 0
        doomed = [r["key"] for r in rows if not r["in_use"]]
        await blobs.delete_many(doomed)
        await conn.execute(Q["blob_deletions_done"], [r["key"] for r in rows])
        payloads = [r for r in rows if r["kind"] == "payload"]
        deleted = Counter(r["project_id"] for r in payloads if not r["in_use"])
        kept = Counter(r["project_id"] for r in payloads if r["in_use"])
        # the texts of stored batch chunks whose worker died before deleting them
        requests = Counter(r["project_id"] for r in rows if r["kind"] == "request")
        for project_id in sorted(deleted.keys() | kept.keys() | requests.keys()):
            details = {"deleted": deleted[project_id], "kept_in_use": kept[project_id]}
            if requests[project_id]:
                details["batch_requests_deleted"] = requests[project_id]
            await accounts.audit(
                conn, ACTOR, "payload_blobs_deleted", "project", project_id, None, **details
            )
    log.info(
        "payload retention deleted %d blobs (%d kept: still in use)",
        len(doomed),
        len(rows) - len(doomed),
    )
    return len(doomed), len(rows) - len(doomed)


async def retention_once(db: Database, blobs: BlobStore) -> Round:
    """One full pass: expire what ran out, then delete queued blobs until the queue is empty
    (or another process holds the job)."""
    expired = 0
    while (n := await expire_due(db)) > 0:
        expired += n
        if n < PROJECTS_PER_ROUND:
            break
    deleted = kept = 0
    while True:
        d, k = await delete_queued(db, blobs)
        deleted, kept = deleted + d, kept + k
        if d + k < DELETE_BATCH:
            break
    return Round(expired, deleted, kept)


async def retention_pass(db: Database, blobs: BlobStore) -> None:
    """One pass for the background jobs (jobs.py); a store that is down waits for the next."""
    try:
        await retention_once(db, blobs)
    except BlobStoreError as exc:  # the store is down: the queue waits for it
        log.warning("payload retention: %s; retrying at the next pass", exc)
