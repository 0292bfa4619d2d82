"""Admission in front of the connection pool: bounded waiting, priorities, early refusal.

Past capacity, a plain pool makes every request wait in one FIFO line for up to the pool
timeout (seconds), so everything gets slow together and clients time out anyway. Here a
request that would only join a long line is refused at once (UNAVAILABLE / 503 with
Retry-After), and a freed connection goes to the most important waiter first:

- PROTECT: heartbeats and submits. They protect work an expert has already done (a lost
  heartbeat can cost a lease, a refused submit an hour's answer), so they go first and are
  refused only when the whole line is full.
- JOB: the background jobs (sweeper, routing, deadline alerts). A handful per process, so
  they are never refused (a skipped sweep would leave expired leases unreturned); they wait
  up to the pool timeout like everything else.
- DEFAULT: everything else (reads, admin, credential look-ups, subscription catch-ups).
- CLAIM: new work. Refusing one costs nothing but a retry, so claims have their own, shorter
  line and are served last.

The gate holds as many slots as the pool has connections, so a request that passes it finds
a connection without waiting in asyncpg's own (unprioritised) queue.
"""

from __future__ import annotations

import asyncio
from collections import deque
from enum import IntEnum

from taskroute.errors import Unavailable
from taskroute.observability import metrics


class Priority(IntEnum):
    PROTECT = 0
    JOB = 1
    DEFAULT = 2
    CLAIM = 3


class Overloaded(Unavailable):
    """Refused without waiting: too many requests are already waiting for a connection."""

    def __init__(self, priority: Priority) -> None:
        super().__init__("the server is at capacity; try again shortly", reason="overloaded")
        self.priority = priority


class Admission:
    """`slots` concurrent holders; at most `max_waiting` waiters in all and at most
    `max_claims_waiting` of them claims. Waiters are served by priority, then first come."""

    def __init__(self, slots: int, max_waiting: int, max_claims_waiting: int) -> None:
        if slots < 1:
            raise ValueError("admission needs at least one slot")
        self.slots = slots
        self.max_waiting = max(0, max_waiting)
        self.max_claims_waiting = max(0, min(max_claims_waiting, self.max_waiting))
        self._free = slots
        self._queues: tuple[deque[asyncio.Future[None]], ...] = tuple(deque() for _ in Priority)
        self._waiting = 0

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def in_use(self) -> int:
        return self.slots - self._free

    def waiting_by_priority(self) -> dict[Priority, int]:
        return {p: sum(not f.done() for f in self._queues[p]) for p in Priority}

    async def acquire(self, priority: Priority, timeout: float) -> None:
        """Take a slot, waiting at most `timeout` seconds (then TimeoutError); raises
        Overloaded at once when this request's line is full."""
        if self._free > 0 and self._waiting == 0:
            self._free -= 1
            return
        queue = self._queues[priority]
        if priority is not Priority.JOB and (
            self._waiting >= self.max_waiting
            or (priority is Priority.CLAIM and len(queue) >= self.max_claims_waiting)
        ):
            metrics.ADMISSION_SHED.labels(priority.name.lower()).inc()
            raise Overloaded(priority)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(fut)
        self._waiting += 1
        try:
            async with asyncio.timeout(timeout):
                await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                # The slot was handed over just as the wait ended: pass it on.
                self.release()
            elif fut in queue:
                queue.remove(fut)
                self._waiting -= 1
            raise

    def release(self) -> None:
        """Hand the slot to the most important waiter, or free it."""
        for queue in self._queues:
            while queue:
                fut = queue.popleft()
                self._waiting -= 1
                if not fut.done():
                    fut.set_result(None)
                    return
        self._free += 1
