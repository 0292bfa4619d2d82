"""This process's memory of the claims it handed out, the answer of last resort to a repeated
claim when the gate refuses and the database does not answer the probe in time.

An entry answers only for `window` seconds after the database last confirmed it (a claim or
a probe through this process; not a heartbeat: the claim's signed payload link would outlive
its life), and never past the claim's lease end: with several processes behind a load
balancer another one may have ended the claim, and the window bounds how long a stale claim is
handed out. A stale claim costs no money: its submit gets the stored receipt (or
LEASE_EXPIRED), its heartbeat a refusal.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, Protocol, TypeVar
from uuid import UUID

# Entries at most: a few thousand experts per deployment, and only the last `window` seconds'
# claims are kept, so this bounds memory only when claims come faster than that.
MAX_ENTRIES = 4096


class _Claim(Protocol):
    @property
    def assignment_id(self) -> UUID: ...

    @property
    def lease_until(self) -> datetime: ...


C = TypeVar("C", bound=_Claim)


@dataclass(frozen=True)
class _Entry(Generic[C]):
    claim: C
    confirmed_at: float  # monotonic
    answers_until: float  # monotonic: the window's end, or the lease's if sooner


class HeldClaims(Generic[C]):
    """expert id -> the claim as this process last returned it; `window` 0 keeps nothing."""

    def __init__(
        self,
        window: float,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window = window
        self.max_entries = max_entries
        self._clock = clock
        # oldest confirmation first, so the expired entries are at the front
        self._entries: OrderedDict[UUID, _Entry[C]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def remember(self, expert_id: UUID, claim: C) -> None:
        """The database just confirmed that the expert holds `claim`."""
        if self.window <= 0:
            return
        now = self._clock()
        lease_left = (claim.lease_until - datetime.now(UTC)).total_seconds()
        until = now + min(self.window, lease_left)
        if until <= now:
            self._entries.pop(expert_id, None)
            return
        self._entries[expert_id] = _Entry(claim, now, until)
        self._entries.move_to_end(expert_id)
        self._prune(now)

    def get(self, expert_id: UUID) -> C | None:
        """The expert's claim if confirmed within the window and its lease has not ended."""
        entry = self._entries.get(expert_id)
        if entry is None:
            return None
        if self._clock() >= entry.answers_until:
            del self._entries[expert_id]
            return None
        return entry.claim

    def forget(self, expert_id: UUID, assignment_id: UUID | None = None) -> None:
        """The claim ended (submitted, released, expired), or the database says the expert
        holds none (`assignment_id` None): nothing to answer for this expert."""
        entry = self._entries.get(expert_id)
        if entry is not None and assignment_id in (None, entry.claim.assignment_id):
            del self._entries[expert_id]

    def _prune(self, now: float) -> None:
        while self._entries:
            expert_id, entry = next(iter(self._entries.items()))
            if len(self._entries) <= self.max_entries and now - entry.confirmed_at < self.window:
                return
            del self._entries[expert_id]
