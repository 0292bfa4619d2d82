"""The per-process credential cache: token hash -> Viewer, so a request needs no query to
authenticate, and a revoked token still stops working within about a second in
every server process.

Coherence comes from Postgres: a trigger NOTIFYs `taskroute_credentials` when a
credential row changes or goes (payload: its token hash, hex), when an expert's status changes
(payload: the expert id) and on TRUNCATE ('*'). The process's one LISTEN connection (the
realtime `Hub`) hands every such event to `invalidate`. A NOTIFY reaches only connections that
are LISTENing when it is sent, so the cache is trusted only in a state where none can have been
missed since its entries were read:

- while the LISTEN connection is up and its health probe is not overdue (`listener_live`);
- and only for the connection it last synchronised with (`listener_generation` changes on
  every reconnect). A reconnect is followed by a RESYNC event, on which everything is
  dropped (`resync`); until that event is handled the cache stays untrusted.

When untrusted, every lookup goes to the database and nothing is stored. A lookup that raced
an invalidation (began before it, finished after) is not stored either: the row it read may be
the one just revoked. As a last bound, should all of that fail (e.g. a connection that died
silently, before its probe noticed), every entry expires `max_age` seconds after it was read.

Expiry: a cached viewer carries its credential's `expires_at`; a hit past it is
dropped and looked up again (and refused), so an expiring token needs no notice at all.

Last use: a hit records the credential's use in memory (`LastUse`); one batched
statement per `flush_interval` (a minute) writes them, off any request, so the hot path stays
one statement per claim. A miss records it in the lookup statement itself.

Open WebSockets: `watch` registers a connection with its token; an invalidation of
that token (or of its expert, or everything) re-checks it against the database and closes it
(4403) when the token no longer authenticates, and an expiring token's connections are closed
when it expires. So a revocation closes its subscriptions on every process, as it refuses
its requests.

Only successful lookups are cached. An unknown or revoked token costs one indexed query every
time, as before: caching misses would let anyone fill the cache with junk (evicting real
entries), and a credential created later would need an INSERT notice to become valid.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

from taskroute.auth import Viewer
from taskroute.db.pool import Database
from taskroute.db.queries import Q

log = logging.getLogger(__name__)

# Must match the channel name in migrations/0007_credential_invalidation.sql.
CREDENTIALS_CHANNEL = "taskroute_credentials"


class ListenerState(Protocol):
    """What the cache needs to know about the LISTEN connection (the realtime Hub has it)."""

    @property
    def listener_generation(self) -> int: ...

    @property
    def listener_live(self) -> bool: ...


class CredentialCache:
    def __init__(
        self,
        max_entries: int = 100_000,
        max_age: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.max_age = max_age
        self._clock = clock
        # token hash -> (viewer, when its row was read); least recently used first
        self._entries: OrderedDict[bytes, tuple[Viewer, float]] = OrderedDict()
        # expert id -> that expert's cached token hashes (an expert status change drops them)
        self._by_expert: dict[UUID, set[bytes]] = {}
        self._listener: ListenerState | None = None
        # the listener generation this cache was last emptied for; None: never synchronised
        self._synced: int | None = None
        # bumped by every invalidation: a lookup that saw another value when it began is not
        # stored (what it read may predate the change just announced)
        self._epoch = 0
        self.hits = 0
        self.misses = 0  # trusted lookups that went to the database
        self.bypasses = 0  # lookups that went to the database because the cache was untrusted
        self.invalidations = 0
        self.resyncs = 0
        self.usage = LastUse()
        self.sockets = SocketWatch()

    # --- trust ----------------------------------------------------------------------

    def attach(self, listener: ListenerState) -> None:
        """Start trusting the cache; call once `invalidate` and `resync` receive the
        listener's events (the channel is LISTENed to, or will be on the next connect)."""
        self._listener = listener
        self.resync()

    @property
    def trusted(self) -> bool:
        listener = self._listener
        return (
            listener is not None
            and self._synced is not None
            and listener.listener_generation == self._synced
            and listener.listener_live
        )

    # --- lookups --------------------------------------------------------------------

    async def lookup(
        self, token_hash: bytes, load: Callable[[], Awaitable[Viewer | None]]
    ) -> Viewer | None:
        """The viewer of `token_hash`, from the cache if it may be trusted, else `load()`."""
        if not self.trusted:
            self.bypasses += 1
            return await load()
        now = self._clock()
        entry = self._entries.get(token_hash)
        if entry is not None:
            viewer, read_at = entry
            if now - read_at < self.max_age and not viewer.expired():
                self._entries.move_to_end(token_hash)
                self.hits += 1
                return viewer
            self._drop(token_hash)
        self.misses += 1
        epoch = self._epoch
        loaded = await load()
        # `trusted` again: the listener may have gone down or been replaced meanwhile.
        if loaded is not None and epoch == self._epoch and self.trusted:
            self._store(token_hash, loaded, now)
        return loaded

    def _store(self, token_hash: bytes, viewer: Viewer, read_at: float) -> None:
        if self.max_entries <= 0:
            return
        self._drop(token_hash)
        self._entries[token_hash] = (viewer, read_at)
        if viewer.expert_id is not None:
            self._by_expert.setdefault(viewer.expert_id, set()).add(token_hash)
        while len(self._entries) > self.max_entries:
            self._drop(next(iter(self._entries)))

    def _drop(self, token_hash: bytes) -> None:
        entry = self._entries.pop(token_hash, None)
        if entry is None:
            return
        expert_id = entry[0].expert_id
        if expert_id is not None:
            hashes = self._by_expert.get(expert_id)
            if hashes is not None:
                hashes.discard(token_hash)
                if not hashes:
                    del self._by_expert[expert_id]

    # --- invalidation (called on the hub's dispatch task: never blocks) ----------------

    def invalidate(self, payload: str) -> None:
        """One `taskroute_credentials` notice: a token hash (hex), an expert id, or '*'."""
        self._epoch += 1
        self.invalidations += 1
        payload = payload.strip()
        self.sockets.invalidate(payload)
        if len(payload) == 64:
            try:
                self._drop(bytes.fromhex(payload))
                return
            except ValueError:
                pass
        else:
            try:
                expert_id = UUID(payload)
            except ValueError:
                pass
            else:
                for token_hash in list(self._by_expert.get(expert_id, ())):
                    self._drop(token_hash)
                return
        if payload != "*":
            # Unreadable: dropping everything is always safe.
            log.warning("unexpected credential invalidation %r: dropping every entry", payload)
        self.clear()

    def resync(self) -> None:
        """Notices may have been lost (the listener reconnected, or its queue overflowed):
        drop everything, and trust the cache again for the current LISTEN connection."""
        self._synced = None  # untrusted until this is done, should anything below fail
        self.clear()
        self.sockets.invalidate("*")
        self.resyncs += 1
        self._synced = self._listener.listener_generation if self._listener else None

    def clear(self) -> None:
        self._epoch += 1
        self._entries.clear()
        self._by_expert.clear()

    def stats(self) -> dict[str, Any]:
        return {
            "trusted": self.trusted,
            "entries": len(self._entries),
            "hits": self.hits,
            "misses": self.misses,
            "bypasses": self.bypasses,
            "invalidations": self.invalidations,
            "resyncs": self.resyncs,
            "watched_sockets": len(self.sockets),
            "last_use_pending": len(self.usage),
        }


def _background(coro: Awaitable[Any]) -> asyncio.Task[Any]:
    """A task that belongs to no request: an empty context, so no request id (and no
    statement counted against the request that happened to start it)."""
    return asyncio.get_running_loop().create_task(coro, context=contextvars.Context())  # type: ignore[arg-type]


class LastUse:
    """Credential id -> last use seen by this process, written in one batched statement at
    most every `flush_interval` seconds (the first use after a quiet spell starts the wait)."""

    def __init__(self, flush_interval: float = 60.0) -> None:
        self.flush_interval = flush_interval
        self._pending: dict[UUID, datetime] = {}
        self._task: asyncio.Task[None] | None = None
        self.flushes = 0

    def __len__(self) -> int:
        return len(self._pending)

    def note(self, db: Database, credential_id: UUID | None) -> None:
        if credential_id is None:
            return
        self._pending[credential_id] = datetime.now(UTC)
        if self._task is None or self._task.done():
            self._task = _background(self._flush_later(db))

    async def _flush_later(self, db: Database) -> None:
        await asyncio.sleep(self.flush_interval)
        await self.flush(db)

    async def flush(self, db: Database) -> None:
        pending, self._pending = self._pending, {}
        if not pending:
            return
        if db.pool.is_closing():
            return  # the server is shutting down: last use is advisory, not worth a traceback
        try:
            await db.execute(Q["credential_last_use_flush"], list(pending), list(pending.values()))
            self.flushes += 1
        except Exception:
            # Last use is advisory: keep the newest times for the next attempt, never fail.
            log.warning("could not record credentials' last use", exc_info=True)
            for cid, at in pending.items():
                self._pending.setdefault(cid, at)


@dataclass(eq=False)
class _Watched:
    token_hash: bytes
    viewer: Viewer
    recheck: Callable[[], Awaitable[Viewer | None]]
    close: Callable[[str], Awaitable[None]]
    is_open: Callable[[], bool]
    expiry: asyncio.TimerHandle | None = None


class SocketWatch:
    """Open WebSocket connections by token: closed when their token stops authenticating."""

    def __init__(self) -> None:
        self._by_hash: dict[bytes, set[_Watched]] = {}
        self._count = 0
        self._prune_at = 64
        self.closed = 0

    def __len__(self) -> int:
        return self._count

    def watch(
        self,
        token_hash: bytes,
        viewer: Viewer,
        recheck: Callable[[], Awaitable[Viewer | None]],
        close: Callable[[str], Awaitable[None]],
        is_open: Callable[[], bool],
    ) -> None:
        """Call on the event loop once the connection is accepted (authenticated)."""
        if self._count >= self._prune_at:
            self._prune()
        w = _Watched(token_hash, viewer, recheck, close, is_open)
        self._by_hash.setdefault(token_hash, set()).add(w)
        self._count += 1
        if viewer.expires_at is not None:
            delay = (viewer.expires_at - datetime.now(UTC)).total_seconds()
            loop = asyncio.get_running_loop()
            w.expiry = loop.call_later(max(delay, 0.0), lambda: self._check([w]))

    def _prune(self) -> None:
        """Forget connections that ended by themselves (no hook tells us when they do)."""
        for token_hash in list(self._by_hash):
            for w in [w for w in self._by_hash[token_hash] if not w.is_open()]:
                self._forget(w)
        self._prune_at = max(64, 2 * self._count)

    def _forget(self, w: _Watched) -> None:
        ws = self._by_hash.get(w.token_hash)
        if ws is None or w not in ws:
            return
        ws.discard(w)
        self._count -= 1
        if not ws:
            del self._by_hash[w.token_hash]
        if w.expiry is not None:
            w.expiry.cancel()

    def invalidate(self, payload: str) -> None:
        """The same notices as the cache's: re-check the connections they may concern."""
        if not self._by_hash:
            return
        if len(payload) == 64:
            try:
                targets = list(self._by_hash.get(bytes.fromhex(payload), ()))
            except ValueError:
                targets = self._all()
        else:
            try:
                expert_id = UUID(payload)
            except ValueError:
                targets = self._all()
            else:
                targets = [w for w in self._all() if w.viewer.expert_id == expert_id]
        self._check(targets)

    def _all(self) -> list[_Watched]:
        return [w for ws in self._by_hash.values() for w in ws]

    def _check(self, targets: list[_Watched]) -> None:
        for w in targets:
            _background(self._recheck(w))

    async def _recheck(self, w: _Watched) -> None:
        if not w.is_open():
            self._forget(w)
            return
        try:
            viewer = None if w.viewer.expired() else await w.recheck()
        except Exception:
            # The database cannot say now; the connection's next operation authenticates again.
            log.warning("could not re-check a WebSocket's credential", exc_info=True)
            return
        if viewer is not None and not viewer.expired():
            if viewer.expires_at != w.viewer.expires_at:
                # e.g. rotated: the old token now expires after the grace period
                if w.expiry is not None:
                    w.expiry.cancel()
                    w.expiry = None
                if viewer.expires_at is not None:
                    delay = (viewer.expires_at - datetime.now(UTC)).total_seconds()
                    w.expiry = asyncio.get_running_loop().call_later(
                        max(delay, 0.0), lambda: self._check([w])
                    )
            w.viewer = viewer
            return
        self._forget(w)
        self.closed += 1
        try:
            await w.close("credential revoked, expired or disabled")
        except Exception:
            log.debug("closing a WebSocket failed (already gone?)", exc_info=True)
