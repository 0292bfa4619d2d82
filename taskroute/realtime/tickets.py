"""Wake tickets: about one wake-up per opened task across all server processes.

Every process LISTENs to the skills its subscribers hold, so the NOTIFY of one opened task
reaches all of them; each used to wake one idle subscriber of its own, and N processes woke N
experts for one task. Now an announcement (one NOTIFY payload, per project) is a ticket of
`announced` units, one per task, shared through Postgres (0018_wake_tickets.sql):

- A process hearing it counts its idle subscribers able to take the tasks (skill, quality, not
  passed over) and, if it has any, asks for up to that many units (`wake_take`, one statement
  for every ticket pending in the process). The statement upserts the ticket row, so takers of
  one ticket run one after the other and together never get more than `announced`. Units go to
  subscribers in the hub's rotation; a process with nobody idle sends nothing at all.
- Each unit handed out is a delivery row with a window (`ack_seconds`). When the window has
  passed, a reaper (any process; SKIP LOCKED splits the rows) checks whether the expert was
  seen since (a claim, even an empty one, or a heartbeat). If not, the subscriber has gone
  (closed, crashed, its process died) or ignored the hint, and while the project still has
  open tasks of the skill the unit is announced again (a new ticket) without that expert, at
  most `max_announcements` times in all. A process that dies is covered the same way: its
  deliveries stay in the table and someone else's reaper announces them again.
- A unit that cannot be delivered at all (the subscriber left during the round trip, or before
  its hint was sent) is handed back at once (`wake_hand_back`) and announced again.
- Only the database can say how many units are left: if the take fails (database busy or
  away), the process wakes its candidates locally, as before coordination: a duplicate wake-up
  costs an empty claim, a lost one costs an expert sitting idle next to open work.

Weighed and not chosen (docs/DESIGN.md, realtime): a registry of idle subscribers per process
consulted by the opening transaction (costs the hot write path a read, and is stale by the time
the NOTIFY arrives); a deterministic owner per (task, skill) hashed over live processes with
leases (no round trip, but two processes with different views of "live" both wake or neither
does, and the owner may have nobody idle).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q

from .channels import reannounce_payload, skill_channel

log = logging.getLogger(__name__)
_T = TypeVar("_T")


# A ticket whose units were not all asked for (this process had fewer idle subscribers than
# tasks) is asked for again when a denied take freed some of them, at most this many times.
MAX_RETAKES = 3


@dataclass(slots=True)
class Ticket:
    key: str  # "<payload nonce>:<project id>"
    skill: str
    project_id: str
    announced: int
    min_quality: float
    attempt: int = 1
    skip: frozenset[str] = frozenset()  # expert ids not to wake for it
    retakes: int = 0


class Waiters(Protocol):
    """What the hub offers the ticket taker."""

    def candidates(self, ticket: Ticket, limit: int) -> list[Any]: ...

    def deliverable(self, waiter: Any) -> bool: ...

    def deliver(self, waiter: Any, skill: str, project_id: str, delivery: int | None) -> None: ...


async def _bounded(work: Coroutine[Any, Any, _T], timeout: float) -> _T:
    """`work`, or TimeoutError after `timeout` seconds while it goes on in the background (its
    cleanup, on a hung connection, could hang as long as the statement did)."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.wait_for(asyncio.shield(task), timeout)
    except TimeoutError:
        task.add_done_callback(_forget)
        raise


def _forget(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("a late wake-ticket statement failed: %r", task.exception())


class WakeTickets:
    def __init__(
        self,
        db: Database,
        ack_seconds: float = 10.0,
        max_announcements: int = 3,
        ticket_keep: float = 60.0,
        take_timeout: float = 2.0,
    ) -> None:
        self.db = db
        # A take normally answers within milliseconds. A database that has gone silent (a cut
        # network leaves pooled connections hanging until TCP gives up) must not hold wake-ups
        # longer than this: past it the process wakes locally, and the statement is left to
        # finish or fail on its own.
        self.take_timeout = take_timeout
        self.ack_seconds = ack_seconds
        self.max_announcements = max_announcements
        self.ticket_keep = ticket_keep
        self.waiters: Waiters | None = None
        self._pending: list[Ticket] = []
        self._returns: list[int] = []
        self._event = asyncio.Event()
        self.busy = False  # a round (take, deliveries, hand-backs) is running
        # counters (the realtime status shows them; tests and the bench read them)
        self.tickets_heard = 0
        self.units_taken = 0
        self.units_denied = 0
        self.units_handed_back = 0
        self.units_announced_again = 0
        self.local_fallbacks = 0

    def stats(self) -> dict[str, int | bool]:
        return {
            "heard": self.tickets_heard,
            "taken": self.units_taken,
            "denied": self.units_denied,
            "handed_back": self.units_handed_back,
            "announced_again": self.units_announced_again,
            "local_fallbacks": self.local_fallbacks,
            "settled": self.settled,
        }

    @property
    def settled(self) -> bool:
        """Nothing heard is still waiting for, or in, a round."""
        return not self.busy and not self._pending and not self._returns

    # --- called by the hub (never awaits) ---------------------------------------------------

    def offer(self, ticket: Ticket) -> None:
        self.tickets_heard += 1
        self._pending.append(ticket)
        self._event.set()

    def hand_back(self, deliveries: Iterable[int]) -> None:
        """Deliveries whose hint never reached its subscriber: announce them again."""
        self._returns.extend(deliveries)
        if self._returns:
            self._event.set()

    # --- the taker --------------------------------------------------------------------------

    async def run(self) -> None:
        """Rounds one after another: what arrives during a round waits for the next one, so
        a burst of NOTIFYs costs one statement per round, not one per NOTIFY."""
        while True:
            await self._event.wait()
            self._event.clear()
            self.busy = True
            try:
                await self._round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("wake ticket round failed")
            finally:
                self.busy = False

    async def _round(self) -> None:
        assert self.waiters is not None
        waiters = self.waiters
        batch, self._pending = self._pending, []
        returns, self._returns = self._returns, []
        plan: list[tuple[Ticket, list[Any]]] = []
        short: list[Ticket] = []  # fewer candidates than units: maybe more later
        for ticket in batch:
            found = waiters.candidates(ticket, ticket.announced)
            for waiter in found:
                waiter.reserved = True  # not a candidate of another ticket of this round
            if len(found) < ticket.announced:
                short.append(ticket)
            if found:
                plan.append((ticket, found))
        rows: list[asyncpg.Record] | None = []
        try:
            if plan:
                rows = await _bounded(self._take(plan), self.take_timeout)
        except Exception as exc:
            log.warning("could not take wake tickets (%r); waking locally", exc)
            rows = None
        finally:
            for _, found in plan:
                for waiter in found:
                    waiter.reserved = False
        if rows is None:
            self.local_fallbacks += 1
            for ticket, found in plan:
                for waiter in found:
                    if waiters.deliverable(waiter):
                        waiters.deliver(waiter, ticket.skill, ticket.project_id, None)
        else:
            by_id = {w.id: (t, w) for t, found in plan for w in found}
            granted: Counter[str] = Counter()
            for r in rows:
                ticket, waiter = by_id[r["subscriber"]]
                granted[ticket.key] += 1
                if waiters.deliverable(waiter):
                    waiters.deliver(waiter, ticket.skill, ticket.project_id, r["id"])
                else:  # left while the statement ran
                    returns.append(r["id"])
            self.units_taken += len(rows)
            denied = sum(len(found) for _, found in plan) - len(rows)
            self.units_denied += denied
            if denied:
                # Subscribers reserved for exhausted tickets are free again: ask for the
                # tickets they kept from being asked for in full (unless known exhausted).
                asked = {t.key: len(found) for t, found in plan}
                for ticket in short:
                    if granted[ticket.key] == asked.get(ticket.key, 0) and (
                        ticket.retakes < MAX_RETAKES
                    ):
                        ticket.retakes += 1
                        self._pending.append(ticket)
                        self._event.set()
        if returns:
            try:
                await _bounded(
                    self._announce_again(Q["wake_hand_back"], returns), self.take_timeout
                )
            except Exception as exc:  # the rows stay: the reaper announces them later
                log.warning("could not hand back %d wake-ups (%r)", len(returns), exc)

    async def _take(self, plan: Sequence[tuple[Ticket, list[Any]]]) -> list[asyncpg.Record]:
        keys, announced, wanted = [], [], []
        c_key: list[str] = []
        c_rank: list[int] = []
        c_ref: list[int] = []
        c_expert: list[Any] = []
        c_skill: list[str] = []
        c_project: list[str] = []
        c_quality: list[float] = []
        c_attempt: list[int] = []
        for ticket, found in plan:
            keys.append(ticket.key)
            announced.append(ticket.announced)
            wanted.append(len(found))
            for rank, waiter in enumerate(found, 1):
                c_key.append(ticket.key)
                c_rank.append(rank)
                c_ref.append(waiter.id)
                c_expert.append(waiter.expert_id)
                c_skill.append(ticket.skill)
                c_project.append(ticket.project_id)
                c_quality.append(ticket.min_quality)
                c_attempt.append(ticket.attempt)
        return await self.db.fetch(
            Q["wake_take"], keys, announced, wanted, c_key, c_rank, c_ref, c_expert,
            c_skill, c_project, c_quality, c_attempt, self.ack_seconds,
        )  # fmt: skip

    # --- announcing again ---------------------------------------------------------------------

    async def _announce_again(self, query: str, *args: Any) -> int:
        """Run `query` (wake_hand_back or wake_reap) and NOTIFY what it returns, in one
        transaction: deliveries are forgotten only together with their new announcement."""
        async with self.db.transaction() as conn:
            rows = await conn.fetch(query, *args)
            if query is Q["wake_hand_back"]:
                self.units_handed_back += len(args[0])
            if not rows:
                return 0
            channels = [skill_channel(r["skill"]) for r in rows]
            payloads = [
                reannounce_payload(
                    str(r["project_id"]),
                    r["units"],
                    float(r["min_quality"]),
                    r["attempt"],
                    (str(e) for e in r["skip"]),
                )
                for r in rows
            ]
            await conn.fetchval(Q["notify_many"], channels, payloads)
        units: int = sum(r["units"] for r in rows)
        self.units_announced_again += units
        return units

    async def reap(self) -> int:
        """Announce again the deliveries whose window passed unacknowledged; return the units."""
        return await self._announce_again(Q["wake_reap"], self.max_announcements, self.ticket_keep)

    async def reap_forever(self) -> None:
        # Half the window: a unit is announced again at most 1.5 windows after its wake-up.
        interval = max(0.1, self.ack_seconds / 2)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reap()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database may be briefly away: next time
                log.warning("wake reaper failed (%s); retrying", exc)
