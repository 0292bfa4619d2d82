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

Claims also have a wait budget (`claim_wait`, TASKROUTE_ADMISSION_CLAIM_WAIT): a claim is served
within it or refused: past capacity a long claim line, served after every heartbeat and submit,
admits claims too late to be useful. So a claim is refused when its budget runs out while it waits
(heartbeats and submits can hold every slot for a while: strict priority is what protects work in
progress), and, once the claim line has not been empty for a whole budget (saturated, not a burst),
at the door when the line ahead of it already holds what the gate lets claims in within the budget
(claims admitted per second over the last few seconds, times the budget; never fewer than one per
slot), which costs no GraphQL execution. A burst at a quiet server (fifty experts at once) drains in
milliseconds and is not refused; under capacity nothing is.

A refusal says when to come back (`Retry-After`), and that time grows with the overload: a fixed
second sends thousands of refused experts back together every second, each retry costing the server
a request's work, until only refusals are served. The gate measures the claims it admits and refuses
per second (decaying over a few seconds) and asks refused clients to wait demand / capacity seconds,
jittered by +-50% so they do not return in step: at twice the capacity, about 2 s; at ten times,
about 10 s (at most RETRY_AFTER_MAX). Under capacity nothing is refused and nothing changes.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque
from collections.abc import Callable
from enum import IntEnum

from taskroute.errors import Unavailable
from taskroute.observability import metrics


class Priority(IntEnum):
    PROTECT = 0
    JOB = 1
    DEFAULT = 2
    CLAIM = 3


RETRY_AFTER_MAX = 60  # seconds: past this, a client is better off trying another host

# One histogram child per priority, looked up once (labels() costs a dict walk per call).
_WAITED = {p: metrics.ADMISSION_WAIT_SECONDS.labels(p.name.lower()) for p in Priority}
HELD = {p: metrics.ADMISSION_HOLD_SECONDS.labels(p.name.lower()) for p in Priority}


class Overloaded(Unavailable):
    """Refused without waiting: too many requests are already waiting for a connection."""

    def __init__(self, priority: Priority, retry_after: int = 1, waited: bool = False) -> None:
        super().__init__(
            "the server is at capacity; try again shortly",
            retry_after=retry_after,
            reason="overloaded",
        )
        self.priority = priority
        # refused when its wait budget ran out (not at once): the world may have changed
        self.waited = waited


class Rate:
    """Events per second, an exponentially decaying count over `tau` seconds."""

    def __init__(self, tau: float = 3.0) -> None:
        self.tau = tau
        self._count = 0.0
        self._at = time.monotonic()

    def _decayed(self, now: float) -> float:
        return self._count * math.exp(-max(0.0, now - self._at) / self.tau)

    def add(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._count = self._decayed(now) + 1.0
        self._at = now

    def per_second(self, now: float | None = None) -> float:
        return self._decayed(time.monotonic() if now is None else now) / self.tau


class Admission:
    """`slots` concurrent holders; at most `max_waiting` waiters in all and at most
    `max_claims_waiting` of them claims, each served within `claim_wait` seconds or refused.
    Waiters are served by priority, then first come."""

    def __init__(
        self,
        slots: int,
        max_waiting: int,
        max_claims_waiting: int,
        claim_wait: float = math.inf,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if slots < 1:
            raise ValueError("admission needs at least one slot")
        if not claim_wait > 0:
            raise ValueError("the claims' wait budget must be positive")
        self.slots = slots
        self.max_waiting = max(0, max_waiting)
        self.max_claims_waiting = max(0, min(max_claims_waiting, self.max_waiting))
        self.claim_wait = claim_wait
        self.claims_admitted = Rate()
        self.claims_refused = Rate()
        self._clock = clock
        # Since when the claim line has held someone (None: empty): saturated after a budget.
        self._claims_waiting_since: float | None = None
        self._free = slots
        self._queues: tuple[deque[asyncio.Future[None]], ...] = tuple(deque() for _ in Priority)
        self._waiting = 0
        self.admitted = Rate()
        self.refused = Rate()

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def in_use(self) -> int:
        return self.slots - self._free

    def waiting_by_priority(self) -> dict[Priority, int]:
        return {p: sum(not f.done() for f in self._queues[p]) for p in Priority}

    def retry_after(self, now: float | None = None, priority: Priority | None = None) -> int:
        """Seconds a refused client should wait: demand over what is being admitted (see the
        module doc), jittered, at least 1 and at most RETRY_AFTER_MAX. A refused claim gets
        the claims' own ratio: claims are a third of the requests, and the overall ratio
        (heartbeats and submits, which are not refused, in the denominator) sent refused
        claimers back about twice as often as claims were being let in."""
        if priority is Priority.CLAIM:
            at = self._clock() if now is None else now
            admitted = self.claims_admitted.per_second(at)
            refused = self.claims_refused.per_second(at)
        else:
            admitted = self.admitted.per_second(now)
            refused = self.refused.per_second(now)
        overload = (admitted + refused) / max(admitted, 1.0)
        seconds = min(float(RETRY_AFTER_MAX), overload) * random.uniform(0.5, 1.5)
        return max(1, min(RETRY_AFTER_MAX, math.floor(seconds)))

    def would_refuse(self, priority: Priority) -> bool:
        """Whether a request of this priority would be refused now (nothing counted)."""
        if priority is Priority.JOB or (self._free > 0 and self._waiting == 0):
            return False
        if self._waiting >= self.max_waiting:
            return True
        if priority is not Priority.CLAIM:
            return False
        ahead = len(self._queues[priority])
        return ahead >= self.max_claims_waiting or ahead >= self._claims_within_budget()

    def _claims_within_budget(self) -> float:
        """How many waiting claims the gate lets in within the budget at the recent rate, once
        the claim line is saturated (not empty for a whole budget); else no bound but the line's."""
        since = self._claims_waiting_since
        now = self._clock()
        if math.isinf(self.claim_wait) or since is None or now - since < self.claim_wait:
            return math.inf
        return max(float(self.slots), self.claim_wait * self.claims_admitted.per_second(now))

    def refusal(self, priority: Priority) -> Overloaded | None:
        """The refusal a request of this priority gets now (counted as refused), or None when
        it may take a slot or wait for one. The server also asks before executing a claim, so
        a claim that would be refused costs no GraphQL execution (graphql_http.py)."""
        if not self.would_refuse(priority):
            return None
        return self._refused(priority)

    def _refused(self, priority: Priority, waited: bool = False) -> Overloaded:
        """Counts a refusal (metrics, the rates Retry-After is made of) and returns it."""
        metrics.ADMISSION_SHED.labels(priority.name.lower()).inc()
        self.refused.add()
        if priority is Priority.CLAIM:
            self.claims_refused.add(self._clock())
        return Overloaded(priority, self.retry_after(priority=priority), waited)

    async def acquire(self, priority: Priority, timeout: float) -> None:
        """Take a slot, waiting at most `timeout` seconds (then TimeoutError); raises
        Overloaded at once when this request's line is full."""
        claim = priority is Priority.CLAIM
        if self._free > 0 and self._waiting == 0:
            self._free -= 1
            self.admitted.add()
            if claim:
                self.claims_admitted.add(self._clock())
            _WAITED[priority].observe(0.0)
            return
        refusal = self.refusal(priority)
        if refusal is not None:
            raise refusal
        queue = self._queues[priority]
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if claim and not queue:
            self._claims_waiting_since = self._clock()
        queue.append(fut)
        self._waiting += 1
        asked = time.monotonic()
        budget = claim and self.claim_wait < timeout
        try:
            async with asyncio.timeout(self.claim_wait if budget else timeout):
                await fut
            self.admitted.add()
            if claim:
                self.claims_admitted.add(self._clock())
            _WAITED[priority].observe(time.monotonic() - asked)
        except TimeoutError:
            self._give_up(fut, queue)
            if not budget:
                raise
            # Served too late to be useful: refused like at the door, and counted so.
            metrics.ADMISSION_CLAIMS_EXPIRED.inc()
            raise self._refused(priority, waited=True) from None
        except BaseException:
            self._give_up(fut, queue)
            raise

    def _give_up(self, fut: asyncio.Future[None], queue: deque[asyncio.Future[None]]) -> None:
        """A waiter leaves (timeout, cancellation): out of the line, or its slot passed on."""
        if fut.done() and not fut.cancelled():
            # The slot was handed over just as the wait ended: pass it on.
            self.release()
        elif fut in queue:
            queue.remove(fut)
            self._waiting -= 1
            self._note_claims_left()

    def _note_claims_left(self) -> None:
        if not self._queues[Priority.CLAIM]:
            self._claims_waiting_since = None

    def release(self) -> None:
        """Hand the slot to the most important waiter, or free it."""
        for queue in self._queues:
            while queue:
                fut = queue.popleft()
                self._waiting -= 1
                if not fut.done():
                    fut.set_result(None)
                    self._note_claims_left()
                    return
        self._note_claims_left()
        self._free += 1
