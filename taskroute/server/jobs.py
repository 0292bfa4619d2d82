"""A server process's background jobs (sweeper, auto-approval, deadline alerts, routing,
ingest): periodic passes that stop at a safe point.

Every pass does its work in its own transactions. A shutdown (SIGTERM, see drain.py) lets a
running pass finish and ends each job at its next wait, so a restart never leaves a batch half
done and never cuts a COMMIT off mid-way (whose outcome the job could then not know). A job
still inside its pass after `grace` seconds is cancelled: its open transaction rolls back and
another process (or the next start) does the work again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from taskroute.errors import Unavailable
from taskroute.observability.metrics import JOB_PASS_SECONDS

log = logging.getLogger(__name__)

# One pass of a periodic job; True means "a full batch was done, more is waiting: go again
# at once" (the next pass still checks for a stop first).
Pass = Callable[[], Awaitable[bool | None]]


class Jobs:
    def __init__(self) -> None:
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._on_stop: list[Callable[[], None]] = []

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def every(self, name: str, interval: float, one_pass: Pass) -> None:
        """Run `one_pass` now and then every `interval` seconds until the stop."""
        self.spawn(name, self._periodic(name, interval, one_pass))

    def spawn(
        self,
        name: str,
        job: Coroutine[Any, Any, None],
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        """A job with its own loop; `on_stop` tells it to return at its next safe point."""
        if on_stop is not None:
            self._on_stop.append(on_stop)
        self._tasks.append(asyncio.create_task(job, name=name))

    async def pause(self, seconds: float) -> None:
        """Wait `seconds`, or less if the stop comes first."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    def request_stop(self) -> None:
        """No new pass starts from now on; running passes finish."""
        if self._stop.is_set():
            return
        self._stop.set()
        for callback in self._on_stop:
            callback()

    async def stop(self, grace: float) -> None:
        """Stop, waiting up to `grace` seconds for running passes to finish."""
        self.request_stop()
        if not self._tasks:
            return
        _, late = await asyncio.wait(self._tasks, timeout=grace)
        for task in late:
            log.warning(
                "%s still busy %.0fs after the stop: cancelled (its transaction rolls back)",
                task.get_name(),
                grace,
            )
            task.cancel()
        results = await asyncio.gather(*self._tasks, return_exceptions=True)
        for task, result in zip(self._tasks, results, strict=True):
            if isinstance(result, Exception):
                log.error("%s ended with %r", task.get_name(), result)
        self._tasks.clear()

    async def _periodic(self, name: str, interval: float, one_pass: Pass) -> None:
        passes = JOB_PASS_SECONDS.labels(name)
        while not self._stop.is_set():
            more = False
            started = time.monotonic()
            try:
                more = bool(await one_pass())
            except Unavailable as exc:  # the database is restarting or busy: expected
                log.warning("%s skipped: %s; retrying in %.1fs", name, exc.message, interval)
            except Exception:  # keep going through transient database trouble
                log.exception("%s failed; retrying in %.1fs", name, interval)
            passes.observe(time.monotonic() - started)
            if not more:
                await self.pause(interval)
