"""The per-process credential cache: token hash -> Viewer, so a request needs no query to
authenticate (issue 11), and a revoked token still stops working within about a second in
every server process.

Coherence comes from Postgres: migration 0007 NOTIFYs `taskroute_credentials` when a
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

Only successful lookups are cached. An unknown or revoked token costs one indexed query every
time, as before: caching misses would let anyone fill the cache with junk (evicting real
entries), and a credential created later would need an INSERT notice to become valid.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Protocol
from uuid import UUID

from taskroute.auth import Viewer

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
            if now - read_at < self.max_age:
                self._entries.move_to_end(token_hash)
                self.hits += 1
                return viewer
            self._drop(token_hash)
        self.misses += 1
        epoch = self._epoch
        viewer = await load()
        # `trusted` again: the listener may have gone down or been replaced meanwhile.
        if viewer is not None and epoch == self._epoch and self.trusted:
            self._store(token_hash, viewer, now)
        return viewer

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
        }
