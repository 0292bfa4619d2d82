"""A project's results and their change feed, page by page, and the cursors of both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput
from taskroute.resolvers import cursors
from taskroute.resolvers import validation as v

MAX_PAGE = 1000


def _page_size(first: int) -> int:
    return v.integer(first, "first", 1, MAX_PAGE)


def parse_result_cursor(after: str | None) -> UUID | None:
    if after is None or after == "":
        return None
    try:
        return UUID(after)
    except ValueError as exc:
        raise BadInput("after must be a cursor returned by results", field="after") from exc


def parse_change_cursor(after: str | None) -> int:
    if after is None or after == "":
        return 0
    return cursors.seq(after)


C = TypeVar("C", str, str | None)


@dataclass(frozen=True)
class Page(Generic[C]):
    rows: list[asyncpg.Record]
    # pass as `after` for the next page (unchanged when this page is empty)
    cursor: C
    # another page follows (one row past the page was read to know)
    has_more: bool


async def results_page(
    db: Database, project_id: UUID, after: str | None, first: int
) -> Page[str | None]:
    first = _page_size(first)
    rows = await db.fetch(Q["results_page"], project_id, parse_result_cursor(after), first + 1)
    rows, more = rows[:first], len(rows) > first
    return Page(rows, str(rows[-1]["item_id"]) if rows else after, more)


async def changes_page(db: Database, project_id: UUID, after: str | None, first: int) -> Page[str]:
    first = _page_size(first)
    start = parse_change_cursor(after)
    rows = await db.fetch(Q["result_changes_page"], project_id, start, first + 1)
    rows, more = rows[:first], len(rows) > first
    return Page(rows, str(rows[-1]["seq"] if rows else start), more)
