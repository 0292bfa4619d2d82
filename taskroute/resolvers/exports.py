"""A project's results for a training pipeline, as of one position of its change feed.

Every change row keeps its item's whole exported state at that change (queries/quality.sql
result_change_insert: answer, agreement, method, confidence, and each submitted answer with its
expert and retraction), so "the project as of change N" is, per item, its newest change at or
before N in feed order, read from `result_changes` alone. Positions below the feed's horizon
never gain a change, so the same position always gives the same rows: a training set is
reproducible after later retractions and relabels.

Rows are read in item-id pages, one short query each (no transaction or connection held while
a slow client reads), so an export costs constant memory whatever the project's size.
Gold items never have results, so they are never exported (the quality report covers them).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput, NotFound, PayloadDeleted, Unavailable
from taskroute.resolvers import cursors, payloads, projects
from taskroute.resolvers.accounts.credentials import Viewer
from taskroute.resolvers.payloads import Fetched
from taskroute.resolvers.quality import result_feed
from taskroute.storage.blobs import BlobNotFound, BlobStore, BlobStoreError
from taskroute.storage.payload_links import PayloadUrls

PAGE = 1000  # items per query while streaming
PSEUDONYM_PURPOSE = "expert-pseudonyms"


@dataclass(frozen=True)
class Position:
    """A change-feed position: the change (seq) and its transaction (xact); (0, 0) is before
    the first change."""

    seq: int
    xact: int

    @property
    def cursor(self) -> str:
        return cursors.encode(result_feed.CHANGE, str(self.seq))


async def position(db: Database, project_id: UUID, as_of: str | None) -> Position:
    """The position an export reflects: `as_of` (a cursor of the change feed or of an earlier
    export) if given, else the project's newest change below the feed's horizon."""
    horizon = await result_feed.horizon(db)
    if as_of is None:
        row = await db.fetchrow(Q["export_head"], project_id, horizon)
        return Position(row["seq"], row["xact"]) if row else Position(0, 0)
    seq = cursors.decode_seq_or_raw(as_of, result_feed.CHANGE, "as_of") if as_of else 0
    if seq == 0:
        return Position(0, 0)
    row = await db.fetchrow(Q["export_position"], project_id, seq)
    # A position still above the horizon could yet gain older changes: not reproducible.
    if row is None or row["xact"] >= horizon:
        raise BadInput(
            "as_of is not a position of this project's change feed (take it from an export's"
            " as_of or a result-changes cursor)",
            field="as_of",
        )
    return Position(row["seq"], row["xact"])


class Pseudonyms:
    """Per-project expert pseudonyms: HMAC-SHA256 of (project, expert) under a key derived
    from the server secret. Stable within a project, unlinkable across projects."""

    def __init__(self, key: bytes, project_id: UUID) -> None:
        self._key = key
        self._project = str(project_id)
        self._cache: dict[str, str] = {}  # bounded by the project's experts

    def __call__(self, expert_id: str) -> str:
        got = self._cache.get(expert_id)
        if got is None:
            mac = hmac.new(self._key, f"{self._project}:{expert_id}".encode(), hashlib.sha256)
            got = "x_" + base64.b32encode(mac.digest()[:15]).decode().lower()
            self._cache[expert_id] = got
        return got


def expert_naming(
    urls: PayloadUrls | None, project_id: UUID, real_ids: bool
) -> Callable[[str], str]:
    if real_ids:
        return str
    if urls is None:
        raise Unavailable("exports need the server secret, which this process has not loaded")
    return Pseudonyms(urls.derive(PSEUDONYM_PURPOSE), project_id)


async def pages(
    db: Database, project_id: UUID, at: Position, page: int = PAGE
) -> AsyncIterator[list[asyncpg.Record]]:
    """The export's rows, a page at a time, in item-id order."""
    after: UUID | None = None
    while True:
        rows = await db.fetch(Q["export_page"], project_id, at.xact, at.seq, after, page)
        if rows:
            yield rows
        if len(rows) < page:
            return
        after = rows[-1]["item_id"]


def row(
    r: asyncpg.Record,
    as_of: str,
    name: Callable[[str], str],
    urls: PayloadUrls | None,
    link_ttl: int,
    now: float,
) -> dict[str, Any]:
    """One exported item (docs/api.md, "Exports", names every field)."""
    payload, url = r["payload"], None
    deleted = r["payload_deleted_at"] is not None
    if payload is None and r["payload_key"] is not None and not deleted and urls is not None:
        url = urls.item_url(r["item_id"], link_ttl, now)
    answers = r["answers"]
    return {
        "as_of": as_of,
        "item_id": str(r["item_id"]),
        "external_id": r["external_id"],
        "status": "retracted" if r["change"] == "retracted" else "resolved",
        "answer": r["answer"],
        "confidence": r["confidence"],
        "agreement": r["agreement"],
        "method": r["method"],
        "version": r["version"],
        "changed_at": r["at"].isoformat(),
        "answers": None
        if answers is None
        else [
            {
                "expert": name(a["expert_id"]),
                "answer": a["answer"],
                "kind": a["kind"],
                "retracted": a["retracted"],
            }
            for a in answers
        ],
        "payload": payload,
        "payload_url": url,
        "payload_deleted": deleted,
    }


async def item_payload(
    db: Database,
    blobs: BlobStore,
    urls: PayloadUrls | None,
    viewer: Viewer,
    item_id: UUID,
    exp: str | None,
    sig: str | None,
) -> Fetched:
    """The payload behind an export's signed item link, for a token that sees its project."""
    if urls is None:
        raise Unavailable("payload delivery is not configured in this process")
    urls.check_item(item_id, exp, sig)
    r = await db.fetchrow(Q["item_payload_get"], item_id)
    if r is None:
        raise NotFound("no such payload link")
    try:
        await projects.visible_project(db, viewer, r["project_id"])
    except NotFound as exc:
        raise NotFound("no such payload link") from exc
    if r["payload_deleted_at"] is not None:
        raise PayloadDeleted(
            "this payload was deleted: the project ended and its payload retention ran"
            f" out at {r['payload_deleted_at'].isoformat()}"
        )
    if r["payload"] is not None:
        return Fetched(data=json.dumps(r["payload"]).encode())
    presigned = blobs.presigned_get_url(r["payload_key"], payloads.PRESIGNED_MAX_SECONDS)
    if presigned is not None:
        return Fetched(redirect=presigned)
    try:
        return Fetched(data=await blobs.get(r["payload_key"]))
    except BlobNotFound as exc:
        raise Unavailable("the payload is missing from the object store") from exc
    except BlobStoreError as exc:
        raise Unavailable("the object store is unavailable; try again shortly") from exc
