"""A project's results (in item-id order) and their change feed (in transaction order up to
the horizon of running transactions: queries/quality.sql result_feed_horizon), page by page.

Both page like every listing (resolvers/paging.py, opaque cursors). The deprecated shapes
(GraphQL `results`/`resultChanges`, REST's `cursor`/`has_more`) hand out the raw item id and the
raw change number as cursors, kept as they were for the scripts written against them; `after`
takes either form everywhere, so a position a client kept carries over to the connections.
"""

from __future__ import annotations

import asyncio
import time
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput
from taskroute.resolvers import cursors, paging
from taskroute.resolvers.paging import Page

RESULT = "result"
CHANGE = "change"
FEED_WAIT = 1.0  # seconds a feed page waits for transactions older than its request
FEED_POLL = 0.005


def result_after(raw: str | None) -> UUID | None:
    """The item id a results page starts after; an empty cursor is the start."""
    if raw is None or raw == "":
        return None
    try:
        return cursors.decode_uuid(raw, RESULT)
    except BadInput:
        pass
    try:
        return UUID(raw)  # the deprecated raw form
    except ValueError as exc:
        raise BadInput("after is not a cursor from this listing", field="after") from exc


def change_after(raw: str | None) -> int:
    """The change number a feed page starts after; an empty cursor is the start."""
    return 0 if raw is None or raw == "" else cursors.decode_seq_or_raw(raw, CHANGE)


async def results_page(
    db: Database, project_id: UUID, after: str | None, first: int
) -> Page[asyncpg.Record]:
    return await paging.read(
        db, "results_page", project_id, result_after(after), first=paging.size(first),
        cursor=lambda r: cursors.encode(RESULT, str(r["item_id"])),
    )  # fmt: skip


async def changes_page(
    db: Database, project_id: UUID, after: str | None, first: int | str, field: str = "first"
) -> Page[asyncpg.Record]:
    return await paging.read(
        db, "result_changes_page", project_id, change_after(after), await horizon(db),
        first=paging.size(first, field), cursor=lambda r: cursors.encode(CHANGE, str(r["seq"])),
    )  # fmt: skip


async def horizon(db: Database) -> int:
    """The feed's horizon (queries/quality.sql result_feed_horizon), read before the page.

    A reader is owed every change committed before it asked (a client reads its own submit
    back), but a transaction that began earlier and is still writing holds the horizon back:
    usually for milliseconds (a job's or another submit's transaction). So the reader waits
    for the transactions running when it asked, up to FEED_WAIT seconds; past that (a long
    writing transaction) it reads up to where the horizon stands, and later pages catch up."""
    row = await db.fetchrow(Q["result_feed_horizon"])
    assert row is not None
    target = row["next"]
    deadline = time.monotonic() + FEED_WAIT
    while row["horizon"] < target and time.monotonic() < deadline:
        await asyncio.sleep(FEED_POLL)
        row = await db.fetchrow(Q["result_feed_horizon"])
        assert row is not None
    return int(row["horizon"])


def item_id_cursor(page: Page[asyncpg.Record], after: str | None) -> str | None:
    """The deprecated page cursor: the last item's id (unchanged when the page is empty)."""
    return str(page.rows[-1]["item_id"]) if page.rows else after


def change_seq_cursor(page: Page[asyncpg.Record], after: str | None) -> str:
    """The deprecated page cursor: the last change's number (where it started when empty)."""
    return str(page.rows[-1]["seq"] if page.rows else change_after(after))
