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

import json
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Reader
from taskroute.db.queries import Q
from taskroute.resolvers.validation import TaskSpec
from taskroute.storage.blobs import BlobStore, BlobStoreError, blob_key

log = logging.getLogger(__name__)

# Batches of this many tasks or more are ingested in the background (202 / accepted: true).
ASYNC_MIN_TASKS = 100
# What a customer is told about a failed attempt (details are for the operators' log).
STORE_DOWN = "the object store is unavailable; the batch is retried automatically"
INTERNAL_FAILURE = "an internal error interrupted this batch; the operators have the details"


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
