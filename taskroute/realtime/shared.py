"""One evaluation shared by every subscriber that asks the same question at the same moment.

`forecastUpdated` subscribers of one project all want the project's forecast after the same
change (or after the same quiet interval): the first one to ask starts the evaluation, the
others await the same result. So N dashboards on a project cost one evaluation per change,
not N polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any


class SharedEvaluations:
    def __init__(self, keep: float = 60.0) -> None:
        # results older than this are dropped (keys carry their own time bucket)
        self.keep = keep
        self._entries: dict[Hashable, tuple[float, asyncio.Future[Any]]] = {}
        self.evaluations = 0  # how many were really computed (tests and operators read it)

    async def get(self, key: Hashable, compute: Callable[[], Awaitable[Any]]) -> Any:
        now = time.monotonic()
        self._prune(now)
        entry = self._entries.get(key)
        if entry is None:
            future: asyncio.Future[Any] = asyncio.ensure_future(compute())
            self.evaluations += 1
            self._entries[key] = (now, future)
            # a failed evaluation is not shared: the next subscriber tries again
            future.add_done_callback(
                lambda f: f.cancelled() or f.exception() is None or self._entries.pop(key, None)
            )
        else:
            future = entry[1]
        # shield: one subscriber going away must not cancel the others' evaluation
        return await asyncio.shield(future)

    def _prune(self, now: float) -> None:
        stale = [k for k, (at, f) in self._entries.items() if f.done() and now - at > self.keep]
        for key in stale:
            del self._entries[key]
