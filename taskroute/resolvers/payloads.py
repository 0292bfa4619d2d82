"""Task payloads: writing them to the blob store, and delivering them to the claiming expert.

Every payload is written to the blob store under its content address before any task that
needs it is inserted as 'open'. Payloads up to `inline_payload_bytes` also stay inline in the
item row, so the claim carries them without touching the store; larger ones are delivered
through a signed URL (`/v1/payloads/{assignment_id}?exp=..&sig=..`) that expires after
`payload_url_ttl` seconds, works only with the bearer token of the expert holding the live
lease, and records an audit entry per fetch. On S3 the URL answers with a redirect to a
presigned GET that lives at most `PRESIGNED_MAX_SECONDS`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import LeaseExpired, NotFound, PayloadDeleted, Unavailable
from taskroute.resolvers.validation import TaskSpec
from taskroute.storage.blobs import BlobNotFound, BlobStore, BlobStoreError, blob_key
from taskroute.storage.payload_links import PayloadUrls

PRESIGNED_MAX_SECONDS = 60
SECRET_NAME = "payload_urls"


@dataclass(frozen=True)
class PayloadRef:
    """Where one task's payload lives: always in the blob store, sometimes inline too."""

    key: str
    inline: bool


# Arbitrary constant naming "blob writes" among advisory locks: writers hold it shared from
# their blob writes until the items that reference the blobs commit; the retention job
# (retention.py) holds it exclusively while it decides which blobs nobody references and
# deletes them. Content addressing makes that necessary: a writer that finds a blob already
# there writes nothing, and without the lock the job could delete that blob between the
# writer's look and the commit of its items.
BLOB_WRITES_LOCK_KEY = 0x7A5C0018


async def store_payloads(
    conn: asyncpg.Connection,
    blobs: BlobStore,
    specs: Sequence[TaskSpec],
    inline_max: int,
    keys: Sequence[str] | None = None,
) -> list[PayloadRef]:
    """Write every payload (durably) and return its reference; raises BlobStoreError.

    `keys`: the payloads' blob keys if already known (a stored batch chunk keeps them).
    `conn` is in the transaction that will insert the items referencing the payloads: it
    holds the blob-writes lock (shared) until that transaction ends."""
    await conn.execute(Q["advisory_xact_lock_shared"], BLOB_WRITES_LOCK_KEY)
    if keys is None:
        keys = [blob_key(s.payload_json) for s in specs]
    refs: list[PayloadRef] = []
    pending: dict[str, bytes] = {}
    for s, key in zip(specs, keys, strict=True):
        data = s.payload_json.encode()
        pending[key] = data  # identical payloads are written once
        refs.append(PayloadRef(key, len(data) <= inline_max))
    await blobs.put_many(pending.items())
    return refs


async def load_secret(db: Database, configured: str) -> bytes:
    """The configured secret, else the one every process shares through the database."""
    if configured:
        return configured.encode()
    for _ in range(3):  # a racing first start may insert between our insert and select
        secret = await db.fetchval(
            Q["server_secret_get_or_create"], SECRET_NAME, secrets.token_bytes(32)
        )
        if secret is not None:
            return bytes(secret)
    raise RuntimeError("could not load or create the payload URL secret")


def deliver(row: asyncpg.Record, urls: PayloadUrls | None) -> tuple[Any, str | None]:
    """(inline payload, None) for small payloads, (None, signed URL) for large ones."""
    if row["payload"] is not None or row["payload_key"] is None:
        return row["payload"], None
    if urls is None:
        raise Unavailable("payload delivery is not configured in this process")
    return None, urls.url(row["assignment_id"])


@dataclass(frozen=True)
class Fetched:
    """Exactly one is set: the JSON bytes, or a presigned URL to redirect to."""

    data: bytes | None = None
    redirect: str | None = None


async def fetch(
    db: Database,
    blobs: BlobStore,
    urls: PayloadUrls | None,
    expert_id: UUID,
    assignment_id: UUID,
    exp: str | None,
    sig: str | None,
) -> Fetched:
    """The payload behind a signed URL, for the expert holding the live lease; audited."""
    if urls is None:
        raise Unavailable("payload delivery is not configured in this process")
    urls.check(assignment_id, exp, sig)
    async with db.transaction() as conn:
        row = await conn.fetchrow(Q["payload_fetch_check"], assignment_id, expert_id)
        if row is None:
            owner = await conn.fetchrow(Q["assignment_get"], assignment_id)
            if owner is None or owner["expert_id"] != expert_id:
                raise NotFound("no such payload link")
            raise LeaseExpired("the lease expired; claim again")
        if row["payload_deleted_at"] is not None:
            raise PayloadDeleted(
                "this payload was deleted: the project ended and its payload retention ran"
                f" out at {row['payload_deleted_at'].isoformat()}"
            )
        result = await _read(blobs, row)
        # In the same transaction as the check: an entry exists for every payload served.
        await conn.execute(
            Q["audit_insert"],
            expert_id,
            row["customer_id"],
            row["project_id"],
            row["task_id"],
            "payload_fetch",
        )
    return result


async def _read(blobs: BlobStore, row: asyncpg.Record) -> Fetched:
    if row["payload"] is not None:
        return Fetched(data=json.dumps(row["payload"]).encode())
    ttl = max(1, min(PRESIGNED_MAX_SECONDS, int(row["lease_seconds_left"])))
    presigned = blobs.presigned_get_url(row["payload_key"], ttl)
    if presigned is not None:
        return Fetched(redirect=presigned)
    try:
        return Fetched(data=await blobs.get(row["payload_key"]))
    except BlobNotFound as exc:
        raise Unavailable("the payload is missing from the object store") from exc
    except BlobStoreError as exc:
        raise Unavailable("the object store is unavailable; try again shortly") from exc
