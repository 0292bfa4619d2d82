"""Project instructions: Markdown the customer writes for experts, versioned.

`set_instructions` adds a version (old ones are kept); the claim records the version current
at claim on the assignment and returns its number (functions/claims.sql), and the text is
read here only when asked for: versions never change, so a per-process cache keyed by
(project, version) answers repeated claims without a statement.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database, Reader
from taskroute.db.queries import Q
from taskroute.errors import BadInput
from taskroute.resolvers import projects
from taskroute.resolvers.accounts.credentials import Viewer

MAX_INSTRUCTIONS_BYTES = 64 * 1024
MAX_HISTORY = 100
# At most this many versions cached per process (64 KiB each at most: a few MiB).
CACHE_SIZE = 128


@dataclass(frozen=True)
class Instructions:
    project_id: UUID
    version: int
    markdown: str
    allow_remote_images: bool
    created_at: datetime

    @classmethod
    def of(cls, r: asyncpg.Record) -> Instructions:
        return cls(
            r["project_id"], r["version"], r["markdown"], r["allow_remote_images"], r["created_at"]
        )


_cache: OrderedDict[tuple[UUID, int], Instructions] = OrderedDict()


def _remember(found: Instructions) -> Instructions:
    key = (found.project_id, found.version)
    _cache[key] = found
    _cache.move_to_end(key)
    while len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)
    return found


def checked_markdown(markdown: Any) -> str:
    if not isinstance(markdown, str):
        raise BadInput("markdown must be a string", field="markdown")
    size = len(markdown.encode("utf-8", "surrogatepass"))
    if size > MAX_INSTRUCTIONS_BYTES:
        raise BadInput(
            f"markdown is {size} bytes; at most {MAX_INSTRUCTIONS_BYTES} are allowed",
            field="markdown",
        )
    if "\x00" in markdown or any(0xD800 <= ord(c) <= 0xDFFF for c in markdown):
        raise BadInput("markdown must be text (no NUL, no lone surrogates)", field="markdown")
    return markdown


async def set_instructions(
    db: Database, viewer: Viewer, project_id: UUID, markdown: Any, allow_remote_images: Any
) -> Instructions:
    """A new version of the project's instructions (its customer, or an admin)."""
    text = checked_markdown(markdown)
    if not isinstance(allow_remote_images, bool):
        raise BadInput("allow_remote_images must be a boolean", field="allow_remote_images")
    await projects.visible_project(db, viewer, project_id)
    row = await db.fetchrow(Q["instructions_set"], project_id, text, allow_remote_images)
    assert row is not None
    return _remember(Instructions.of(row))


async def get(db: Reader, project_id: UUID, version: int | None) -> Instructions | None:
    """One version (None: the project has none), from the cache when seen before."""
    if version is None:
        return None
    found = _cache.get((project_id, version))
    if found is not None:
        return found
    row = await db.fetchrow(Q["instructions_get"], project_id, version)
    return None if row is None else _remember(Instructions.of(row))


async def current(db: Reader, project_id: UUID) -> Instructions | None:
    version = await db.fetchval(Q["project_instructions_version"], project_id)
    return await get(db, project_id, version)


async def history(db: Reader, project_id: UUID, first: int) -> list[Instructions]:
    if not 1 <= first <= MAX_HISTORY:
        raise BadInput(f"first must be between 1 and {MAX_HISTORY}", field="first")
    rows = await db.fetch(Q["instructions_history"], project_id, first)
    return [_remember(Instructions.of(r)) for r in rows]
