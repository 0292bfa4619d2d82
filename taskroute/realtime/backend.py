"""A Postgres LISTEN/NOTIFY backend behind broadcaster's `BroadcastBackend` interface.

broadcaster's own Postgres backend holds one connection with no health check or reconnect
(a lost connection leaves `next_published` hanging forever) and queues without bound. This one:

- owns one dedicated asyncpg connection, outside the pool (a pooled connection could be reset
  or handed to a request, silently dropping its LISTENs);
- notices a lost connection at once through asyncpg's termination callback, and a silently
  dead one (no RST, e.g. a cut network) through a periodic `SELECT 1` with a timeout, since
  asyncpg alone would only notice at TCP timeout;
- reconnects with capped exponential backoff and jitter, re-LISTENs every channel, then emits
  one synthetic event on `RESYNC_CHANNEL`: NOTIFYs sent while it was down are lost, so every
  waiter must re-check the database;
- keeps at most `max_queue` undelivered events; on overflow it drops them all and emits a
  resync instead (a resync subsumes any number of lost hints).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from typing import Any

import asyncpg
from broadcaster import Event
from broadcaster._backends.base import BroadcastBackend

log = logging.getLogger(__name__)

# Not a Postgres channel: only ever produced locally, after a reconnect or an overflow.
RESYNC_CHANNEL = "taskroute.resync"
LISTENER_APPLICATION_NAME = "taskroute-listener"


class PostgresNotifyBackend(BroadcastBackend):
    def __init__(
        self,
        url: str,
        *,
        probe_interval: float = 5.0,
        probe_timeout: float = 5.0,
        probe_attempts: int = 2,
        backoff_initial: float = 0.05,
        backoff_max: float = 5.0,
        max_queue: int = 10_000,
    ) -> None:
        self._url = url
        self.probe_interval = probe_interval
        self.probe_timeout = probe_timeout
        # consecutive timed-out probes before the connection is given up (a busy server or
        # event loop can delay one answer; a reconnect makes every waiter re-check)
        self.probe_attempts = probe_attempts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.max_queue = max_queue
        self._conn: asyncpg.Connection | None = None
        self._channels: set[str] = set()
        self._events: deque[Event] = deque()
        self._ready = asyncio.Event()  # set when `_events` is non-empty
        self._lost = asyncio.Event()  # set when the connection is known to be gone
        self._lock = asyncio.Lock()  # serialises LISTEN/UNLISTEN with reconnects
        self._supervisor: asyncio.Task[None] | None = None
        self.reconnects = 0
        self.last_ok = 0.0  # monotonic time of the last successful probe or connect

    # --- health ---------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        conn = self._conn
        # `_lost`: known gone (or a LISTEN on it failed) though not yet replaced; NOTIFYs
        # may already be missing, which the credential cache must know at once.
        return conn is not None and not conn.is_closed() and not self._lost.is_set()

    @property
    def backend_pid(self) -> int | None:
        """The listener's server process id (tests terminate it to simulate a drop)."""
        return self._conn.get_server_pid() if self.healthy and self._conn else None

    # --- BroadcastBackend -----------------------------------------------------------

    async def connect(self) -> None:
        """Connect now if Postgres is reachable; otherwise keep trying in the background."""
        with contextlib.suppress(OSError, asyncpg.PostgresError, TimeoutError):
            await self._open()
        self._supervisor = asyncio.create_task(self._supervise(), name="notify-supervisor")

    async def disconnect(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                # A LISTEN/UNLISTEN may still be running on it: close only between statements.
                async with asyncio.timeout(2), self._lock:
                    await conn.close()
            except Exception:
                conn.terminate()

    async def subscribe(self, channel: str) -> None:
        async with self._lock:
            self._channels.add(channel)
            conn = self._conn
            if conn is not None and not conn.is_closed():
                try:
                    await conn.add_listener(channel, self._on_notify)
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                    # The reconnect re-LISTENs every channel in `_channels`.
                    self._lost.set()

    async def unsubscribe(self, channel: str) -> None:
        async with self._lock:
            self._channels.discard(channel)
            conn = self._conn
            if conn is not None and not conn.is_closed():
                try:
                    await conn.remove_listener(channel, self._on_notify)
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                    self._lost.set()

    async def publish(self, channel: str, message: Any) -> None:
        # taskroute itself sends NOTIFYs inside its own transactions (see `notify`); this is
        # broadcaster's interface, for tools and tests.
        async with self._lock:
            conn = self._conn
            if conn is None or conn.is_closed():
                raise ConnectionError("the NOTIFY listener connection is down")
            await conn.execute("SELECT pg_notify($1, $2)", channel, str(message))

    async def next_published(self) -> Event:
        while not self._events:
            self._ready.clear()
            await self._ready.wait()
        return self._events.popleft()

    # --- internals --------------------------------------------------------------------

    def _push(self, event: Event) -> None:
        if len(self._events) >= self.max_queue:
            # The consumer fell behind: every queued hint is replaced by one re-check.
            log.warning("notify queue overflow (%d events): resync", len(self._events))
            self._events.clear()
            event = Event(RESYNC_CHANNEL, "overflow")
        self._events.append(event)
        self._ready.set()

    def _on_notify(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        self._push(Event(channel, payload))

    def _on_terminate(self, conn: Any) -> None:
        # Only the current connection matters: the callback of one we replaced can fire late.
        if conn is self._conn:
            self._lost.set()

    async def _open(self) -> None:
        conn = await asyncpg.connect(
            self._url,
            timeout=self.probe_timeout + 5,
            # named so operators (and tests) can find it in pg_stat_activity
            server_settings={"application_name": LISTENER_APPLICATION_NAME},
        )
        try:
            conn.add_termination_listener(self._on_terminate)
            async with self._lock:
                for channel in sorted(self._channels):
                    await conn.add_listener(channel, self._on_notify)
                self._conn = conn
        except BaseException:
            conn.terminate()
            raise
        self._lost.clear()
        self.last_ok = time.monotonic()

    async def _probe(self) -> bool:
        for _ in range(self.probe_attempts):
            outcome = await self._probe_once()
            if outcome is not None:
                return outcome
        return False

    async def _probe_once(self) -> bool | None:
        """True: alive; False: gone; None: no answer within `probe_timeout`."""
        conn = self._conn
        if conn is None or conn.is_closed():
            return False

        async def probe() -> None:
            # Under the lock: one asyncpg connection runs one statement at a time, and a
            # LISTEN hanging on a dead connection must count against the probe's timeout.
            async with self._lock:
                await conn.fetchval("SELECT 1")

        try:
            await asyncio.wait_for(probe(), timeout=self.probe_timeout)
        except TimeoutError:
            log.warning("NOTIFY listener did not answer a probe in %.1fs", self.probe_timeout)
            return None
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            return False
        self.last_ok = time.monotonic()
        return True

    async def _supervise(self) -> None:
        while True:
            if self._conn is not None:
                # Wait for a termination callback or the next probe, whichever comes first.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._lost.wait(), timeout=self.probe_interval)
                if not self._lost.is_set() and await self._probe():
                    continue
                log.warning("NOTIFY listener connection lost; reconnecting")
                conn, self._conn = self._conn, None
                if conn is not None:
                    conn.terminate()
            await self._reconnect()

    async def _reconnect(self) -> None:
        delay = self.backoff_initial
        while True:
            try:
                await self._open()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                log.warning("NOTIFY listener reconnect failed (%s); retry in %.2fs", exc, delay)
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, self.backoff_max)
                continue
            self.reconnects += 1
            log.info("NOTIFY listener reconnected; telling every waiter to re-check")
            self._push(Event(RESYNC_CHANNEL, "reconnect"))
            return
