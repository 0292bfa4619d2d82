"""The same probe asked by many requests at once, answered by one statement per batch.

A burst of refusals (a full claim line) asks "does this expert hold a claim?" once per refused
request, and each asked on its own would wait for one of the few probe connections: at 4,000
experts most of them went unanswered waiting for a connection. Batched, the probes that arrive
while a statement is out wait for the next one, which answers all of them by a list of keys.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import asyncpg

# Keys per statement at most: a list of uuids this long is still one small index probe each.
MAX_BATCH = 500

Fetch = Callable[[str, list[Any]], Awaitable[list[asyncpg.Record]]]


class BatchedProbe:
    """`query` takes $1, a list of keys, and returns at most one row per key, naming the key in
    its column `key`; `get(k)` is that row for k, or None. One statement at a time: batches
    follow one another, each taking every key that waits (up to MAX_BATCH)."""

    def __init__(self, fetch: Fetch, query: str, key: str, max_batch: int = MAX_BATCH) -> None:
        self._fetch = fetch
        self._query = query
        self._key = key
        self._max_batch = max_batch
        self._waiting: dict[Hashable, list[asyncio.Future[asyncpg.Record | None]]] = {}
        self._drain: asyncio.Task[None] | None = None

    async def get(self, key: Hashable) -> asyncpg.Record | None:
        future: asyncio.Future[asyncpg.Record | None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(future)
        if self._drain is None:
            self._drain = asyncio.create_task(self._run())
        return await future

    async def _run(self) -> None:
        try:
            while self._waiting:
                keys = list(self._waiting)[: self._max_batch]
                batch = {k: self._waiting.pop(k) for k in keys}
                try:
                    rows = await self._fetch(self._query, keys)
                except Exception as exc:  # every waiter of this batch gets the same failure
                    for futures in batch.values():
                        for f in futures:
                            if not f.done():
                                f.set_exception(_copy(exc))
                    continue
                found = {row[self._key]: row for row in rows}
                for k, futures in batch.items():
                    for f in futures:
                        if not f.done():  # a waiter that gave up (its request went away)
                            f.set_result(found.get(k))
        finally:
            self._drain = None


def _copy(exc: Exception) -> Exception:
    """An exception of its own for each waiter (one instance raised in several tasks would
    collect all their tracebacks), with the same args and attributes (retry_after, details):
    built without calling __init__, whose signature varies by class."""
    fresh: Exception = exc.__class__.__new__(exc.__class__, *exc.args)
    fresh.args = exc.args
    fresh.__dict__.update(exc.__dict__)
    fresh.__cause__ = exc.__cause__
    return fresh
