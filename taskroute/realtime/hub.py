"""The per-process fan-out from NOTIFY channels to subscriptions.

It reads events from a broadcaster `BroadcastBackend` (ours: `PostgresNotifyBackend`; Redis or
Kafka would do) and hands them to waiters without ever awaiting a waiter, so one slow WebSocket
cannot hold up the others. Each waiter's mailbox coalesces: a `taskAvailable` waiter keeps at
most one pending hint per skill it listens to, a `projectProgress` watcher only the latest
counts. Memory per subscription is therefore bounded, however slow its consumer.

Task hints wake roughly as many idle waiters as tasks opened (not every idle expert of the
skill), taking them in a rotation per skill so that the same expert is not always first. With
`tickets` (realtime/tickets.py) that holds across processes: each hint is a ticket whose units
the processes take through Postgres, so one opened task wakes about one expert in all.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from broadcaster import Event
from broadcaster._backends.base import BroadcastBackend

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.observability import metrics

from .backend import RESYNC_CHANNEL
from .channels import PROGRESS_CHANNEL, parse, skill_channel
from .tickets import Ticket, WakeTickets

log = logging.getLogger(__name__)

_ids = itertools.count(1)


@dataclass(frozen=True)
class Hint:
    skill: str
    # None: a re-check of everything (after the listener reconnected)
    project_id: str | None


class TaskWaiter:
    """One `taskAvailable` subscription: at most one pending hint per skill.

    Slots and a future created only while waiting (not an asyncio.Event, whose waiter deque
    alone is ~700 bytes): ten thousand idle subscribers on one process must stay cheap."""

    __slots__ = ("id", "expert_id", "skills", "quality", "reserved", "closed", "started",
                 "held", "_pending", "_sending", "_wakeup")  # fmt: skip

    def __init__(
        self, expert_id: UUID, skills: Sequence[str], quality: dict[str, float] | None = None
    ) -> None:
        self.id = next(_ids)
        self.expert_id = expert_id
        self.skills = tuple(skills)
        # the expert's quality per skill when subscribing (tasks may require a minimum)
        self.quality = quality or {}
        self.reserved = False  # a candidate in a wake-ticket take that is running
        self.closed = False
        self.started = False  # registered and caught up (counted in task_waiters)
        # its expert's status changed (deactivated, until the database says otherwise): never
        # a candidate, so a wake-up goes to someone who can claim, not into an ack window
        self.held = False
        # skill -> (project id or None for a re-check, wake delivery id or None)
        self._pending: dict[str, tuple[str | None, int | None]] = {}
        self._sending: int | None = None  # delivery of the hint being sent
        self._wakeup: asyncio.Future[None] | None = None

    @property
    def idle(self) -> bool:
        """Not holding an undelivered hint (a waiter already woken is not woken again)."""
        return not self._pending

    def offer(self, skill: str, project_id: str | None, delivery: int | None = None) -> None:
        held = self._pending.get(skill)
        if held is not None and held[0] is None:
            return  # a pending re-check of this skill already covers any project
        if held is not None and delivery is None:
            delivery = held[1]  # keep track of the delivery this hint still carries
        self._pending[skill] = (project_id, delivery)
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    async def next(self) -> Hint:
        # The subscription asks for the next hint only once the previous one was sent.
        self._sending = None
        while not self._pending:
            self._wakeup = asyncio.get_running_loop().create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None
        skill = next(iter(self._pending))
        project_id, self._sending = self._pending.pop(skill)
        return Hint(skill, project_id)

    def drop_pending(self) -> list[int]:
        """Forget the hints not yet sent; returns their wake deliveries (to hand back)."""
        held = [d for _, d in self._pending.values() if d is not None]
        self._pending.clear()
        return held

    def undelivered(self) -> list[int]:
        """Wake deliveries whose hint has not reached the subscriber (it is leaving)."""
        held = [d for _, d in self._pending.values() if d is not None]
        return held + [self._sending] if self._sending is not None else held


@dataclass(eq=False)  # identity semantics: watches live in sets
class ProgressWatch:
    """One `projectProgress` subscription: only the latest counts are kept."""

    project_id: str
    latest: dict[str, Any] | None = None
    # what this watcher was last given, so an unchanged recount is not pushed again
    offered: dict[str, Any] | None = None
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def offer(self, counts: dict[str, Any]) -> None:
        if counts == self.offered:
            return
        self.offered = counts
        self.latest = counts
        self.event.set()

    async def next(self) -> dict[str, Any]:
        while self.latest is None:
            self.event.clear()
            await self.event.wait()
        counts, self.latest = self.latest, None
        return counts


# What a projectProgress update carries: the status and the counts.
_ZERO: dict[str, Any] = {
    "status": "active",
    "completed_at": None,
    "total": 0,
    "open": 0,
    "claimed": 0,
    "done": 0,
    "failed": 0,
    "canceled": 0,
}


class Hub:
    def __init__(
        self,
        backend: BroadcastBackend,
        db: Database,
        progress_interval: float = 0.3,
        tickets: WakeTickets | None = None,
    ) -> None:
        self.backend = backend
        self.db = db
        self.progress_interval = progress_interval
        # None: every process wakes its own waiters for every hint (a single process, tests)
        self.tickets = tickets
        if tickets is not None:
            tickets.waiters = self
        # skill -> waiters in wake order (front: next to wake)
        self._rotation: dict[str, OrderedDict[int, TaskWaiter]] = {}
        self._channel_skill: dict[str, str] = {}
        self._listens: dict[str, asyncio.Future[None]] = {}  # channel -> its LISTEN
        self._watches: dict[str, set[ProgressWatch]] = {}
        self._dirty: set[str] = set()
        self._dirty_event = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # channels other components listen to through the hub (see `listen`)
        self._handlers: dict[str, list[Callable[[str], None]]] = {}
        self._resync_hooks: list[Callable[[], None]] = []
        self._held_checks: set[asyncio.Task[None]] = set()
        self._started_waiters = 0
        self.wakeups = 0  # hints handed to waiters (tests and the bench read it)
        self.events = 0

    @property
    def healthy(self) -> bool:
        return bool(getattr(self.backend, "healthy", True))

    @property
    def listener_generation(self) -> int:
        """Changes whenever the LISTEN connection is replaced: NOTIFYs sent in between may
        have been lost (each replacement is also announced by a RESYNC event)."""
        return int(getattr(self.backend, "reconnects", 0))

    @property
    def listener_live(self) -> bool:
        """Up, and not overdue on its health probe: NOTIFYs are being heard now. A probe
        that has not answered for longer than it may take means the connection could be
        silently dead (no RST): until it answers, treat it as down."""
        if not self.healthy:
            return False
        last_ok: float | None = getattr(self.backend, "last_ok", None)
        if not last_ok:
            return True
        overdue: float = getattr(self.backend, "probe_interval", 5.0) + getattr(
            self.backend, "probe_timeout", 5.0
        )
        return time.monotonic() - last_ok <= overdue

    async def listen(
        self,
        channel: str,
        on_event: Callable[[str], None],
        on_resync: Callable[[], None] | None = None,
    ) -> None:
        """Hand each event of `channel` (its payload) to `on_event`, and call `on_resync`
        whenever events may have been lost (after a reconnect or a queue overflow), for as
        long as the hub runs. Both run on the dispatch task: they must be quick and must not
        block. Returns once the channel is LISTENed to, or will be on the next connect."""
        self._handlers.setdefault(channel, []).append(on_event)
        if on_resync is not None:
            self._resync_hooks.append(on_resync)
        await self.backend.subscribe(channel)

    async def ready(self) -> bool:
        """A readiness check: is the LISTEN connection up?"""
        return self.healthy

    def health(self) -> dict[str, Any]:
        last_ok = getattr(self.backend, "last_ok", 0.0)
        return {
            "listener": "ok" if self.healthy else "down",
            "reconnects": getattr(self.backend, "reconnects", 0),
            "seconds_since_probe": round(time.monotonic() - last_ok, 1) if last_ok else None,
            # fully started subscriptions (listening, initial check done)
            "task_waiters": self._started_waiters,
            "wakeups": self.wakeups,
            "events": self.events,
            "wake_tickets": self.tickets.stats() if self.tickets is not None else None,
            "progress_watchers": sum(len(w) for w in self._watches.values()),
        }

    async def start(self) -> None:
        await self.backend.connect()
        self._tasks = [
            asyncio.create_task(self._dispatch(), name="hub-dispatch"),
            asyncio.create_task(self._refresh_progress(), name="hub-progress"),
        ]
        if self.tickets is not None:
            self._tasks += [
                asyncio.create_task(self.tickets.run(), name="hub-wake-tickets"),
                asyncio.create_task(self.tickets.reap_forever(), name="hub-wake-reaper"),
            ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.backend.disconnect()

    # --- taskAvailable ----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def task_waiter(
        self, expert_id: UUID, skills: list[str] | None
    ) -> AsyncIterator[TaskWaiter | None]:
        """Register a waiter for the expert's active skills (restricted to `skills`).

        Yields None if the expert holds none of them. Tasks already open when it registers
        produce a hint at once, so a task opened between an empty claim and the subscription
        is not missed.
        """
        waiter = await self.open_waiter(expert_id, skills)
        try:
            yield waiter
        finally:
            if waiter is not None:
                await self.close_waiter(waiter)

    async def open_waiter(self, expert_id: UUID, skills: list[str] | None) -> TaskWaiter | None:
        """`task_waiter` without a context manager (idle subscribers keep one frame fewer):
        the caller must `close_waiter` what this returns, whatever happens."""
        rows = await self.db.fetch(Q["expert_skills_available"], expert_id, skills)
        if not rows:
            return None
        waiter = TaskWaiter(
            expert_id, [r["skill"] for r in rows], {r["skill"]: r["quality"] for r in rows}
        )
        for skill in waiter.skills:
            self._rotation.setdefault(skill, OrderedDict())[waiter.id] = waiter
        try:
            for skill in waiter.skills:
                await self._listening(skill)
            # Re-read after LISTEN: anything that opened before is visible now.
            rows = await self.db.fetch(Q["expert_skills_available"], expert_id, skills)
            if not rows:
                # deactivated meanwhile (its status notice may have come before we registered)
                await self.close_waiter(waiter)
                return None
            for r in rows:
                if r["project_id"] is not None and r["skill"] in waiter.skills:
                    waiter.offer(r["skill"], str(r["project_id"]))
        except BaseException:
            await self.close_waiter(waiter)
            raise
        waiter.started = True
        self._started_waiters += 1
        return waiter

    async def close_waiter(self, waiter: TaskWaiter) -> None:
        waiter.closed = True
        if waiter.started:
            waiter.started = False
            self._started_waiters -= 1
        undelivered = waiter.undelivered()
        if undelivered and self.tickets is not None:
            self.tickets.hand_back(undelivered)
        for skill in waiter.skills:
            rotation = self._rotation.get(skill)
            if rotation is None:
                continue
            rotation.pop(waiter.id, None)
            if not rotation:
                del self._rotation[skill]
                channel = skill_channel(skill)
                self._channel_skill.pop(channel, None)
                self._listens.pop(channel, None)
                with contextlib.suppress(Exception):
                    await self.backend.unsubscribe(channel)

    async def _listening(self, skill: str) -> None:
        """Return once the skill's channel is LISTENed to. The first waiter of a skill sends
        the LISTEN; later ones wait for the same one, so none re-reads the database before
        notifications can reach it."""
        channel = skill_channel(skill)
        listen = self._listens.get(channel)
        if listen is None:
            self._channel_skill[channel] = skill
            listen = asyncio.ensure_future(self.backend.subscribe(channel))
            self._listens[channel] = listen
        await asyncio.shield(listen)

    def _wake(
        self,
        skill: str,
        project_id: str,
        count: int,
        min_quality: float = 0.0,
        skip: frozenset[str] = frozenset(),
    ) -> None:
        """Wake up to `count` of this process's idle waiters, uncoordinated."""
        ticket = Ticket("", skill, project_id, count, min_quality, skip=skip)
        for waiter in self.candidates(ticket, count):
            self.deliver(waiter, skill, project_id, None)

    # --- what the wake-ticket taker asks of the hub (tickets.Waiters) -------------------

    def candidates(self, ticket: Ticket, limit: int) -> list[TaskWaiter]:
        """Up to `limit` idle waiters that may take the ticket's tasks, in rotation order."""
        rotation = self._rotation.get(ticket.skill)
        found: list[TaskWaiter] = []
        if not rotation or limit <= 0:
            return found
        # float32 in Postgres: compare with a little slack, as a hint may be generous
        least = ticket.min_quality - 1e-6
        for waiter in rotation.values():
            if (
                waiter.idle
                and not waiter.reserved
                and not waiter.held
                and waiter.quality.get(ticket.skill, 1.0) >= least
                and not (ticket.skip and str(waiter.expert_id) in ticket.skip)
            ):
                found.append(waiter)
                if len(found) >= limit:
                    break
        return found

    def deliverable(self, waiter: TaskWaiter) -> bool:
        return not waiter.closed and not waiter.held and waiter.idle

    def deliver(
        self, waiter: TaskWaiter, skill: str, project_id: str, delivery: int | None
    ) -> None:
        waiter.offer(skill, project_id, delivery)
        rotation = self._rotation.get(skill)
        if rotation is not None and waiter.id in rotation:
            rotation.move_to_end(waiter.id)  # fairness: the next task goes to someone else
        self.wakeups += 1
        metrics.WAKEUPS.inc()

    def expert_status_changed(self, payload: str) -> None:
        """A `taskroute_credentials` notice (0007): for an expert id, its status changed. Its
        waiters stop being candidates at once, before any later hint is handled; the
        database then says whether it is active (they are woken again) or not (their unsent
        hints are handed back for someone else; their streams are being ended meanwhile)."""
        try:
            expert_id = UUID(payload.strip())
        except ValueError:
            return  # a token hash or '*': not an expert's status
        waiters = {
            w.id: w for r in self._rotation.values() for w in r.values() if w.expert_id == expert_id
        }
        if not waiters:
            return
        for waiter in waiters.values():
            waiter.held = True
        task = asyncio.get_running_loop().create_task(
            self._settle_held(expert_id, list(waiters.values()))
        )
        self._held_checks.add(task)
        task.add_done_callback(self._held_checks.discard)

    async def _settle_held(self, expert_id: UUID, waiters: list[TaskWaiter]) -> None:
        try:
            row = await self.db.fetchrow(Q["expert_get"], expert_id)
        except Exception:
            # Held they stay: their streams end, or a new subscription registers anew.
            log.warning("could not read expert %s's status", expert_id, exc_info=True)
            row = None
        if row is not None and row["status"] == "active":
            for waiter in waiters:
                waiter.held = False
            return
        returned = [d for waiter in waiters for d in waiter.drop_pending()]
        if returned and self.tickets is not None:
            self.tickets.hand_back(returned)

    def _resync_all(self) -> None:
        seen: set[int] = set()
        for rotation in self._rotation.values():
            for waiter in rotation.values():
                if waiter.id not in seen:
                    seen.add(waiter.id)
                    for skill in waiter.skills:
                        waiter.offer(skill, None)
        self.wakeups += len(seen)
        metrics.WAKEUPS.inc(len(seen))
        self._mark_dirty(list(self._watches))

    # --- projectProgress --------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def progress_watch(self, project_id: UUID) -> AsyncIterator[ProgressWatch]:
        key = str(project_id)
        watch = ProgressWatch(key)
        watchers = self._watches.setdefault(key, set())
        first_overall = not any(self._watches.values())
        watchers.add(watch)
        try:
            if first_overall:
                await self.backend.subscribe(PROGRESS_CHANNEL)
            # The current state first, read after LISTEN so no change falls in between.
            counts = await self._count([key])
            watch.offer(counts.get(key, dict(_ZERO)))
            yield watch
        finally:
            watchers.discard(watch)
            if not watchers:
                self._watches.pop(key, None)
            if not self._watches:
                with contextlib.suppress(Exception):
                    await self.backend.unsubscribe(PROGRESS_CHANNEL)

    def _mark_dirty(self, project_ids: list[str]) -> None:
        hit = [p for p in project_ids if p in self._watches]
        if hit:
            self._dirty.update(hit)
            self._dirty_event.set()

    async def _count(self, project_ids: list[str]) -> dict[str, dict[str, Any]]:
        rows = await self.db.fetch(Q["projects_progress_many"], project_ids)
        counts = {p: dict(_ZERO) for p in project_ids}
        for r in rows:
            counts[str(r["project_id"])] = {k: r[k] for k in _ZERO}
        return counts

    async def _refresh_progress(self) -> None:
        """Recount dirty projects at most every `progress_interval` (coalescing bursts)."""
        while True:
            await self._dirty_event.wait()
            self._dirty_event.clear()
            dirty, self._dirty = list(self._dirty), set()
            try:
                counts = await self._count(dirty)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("progress recount failed; retrying")
                self._dirty.update(dirty)
                self._dirty_event.set()
                counts = {}
            for project, c in counts.items():
                for watch in list(self._watches.get(project, ())):
                    watch.offer(c)
            await asyncio.sleep(self.progress_interval)

    # --- dispatch ---------------------------------------------------------------------

    async def _dispatch(self) -> None:
        while True:
            event = await self.backend.next_published()
            self.events += 1
            try:
                self._handle(event)
            except Exception:  # one malformed event must not stop the hub
                log.exception("could not dispatch %r", event)

    def _handle(self, event: Event) -> None:
        if event.channel == RESYNC_CHANNEL:
            # First the hooks (the credential cache: a security matter), each on its own so
            # that one failing cannot keep the others or the waiters from re-checking.
            for hook in self._resync_hooks:
                try:
                    hook()
                except Exception:
                    log.exception("resync hook %r failed", hook)
            self._resync_all()
            return
        handlers = self._handlers.get(event.channel)
        if handlers is not None:
            for handler in handlers:
                try:
                    handler(str(event.message))
                except Exception:  # one failing must not keep the others from hearing it
                    log.exception("handler %r of %s failed", handler, event.channel)
            return
        data = parse(event.message)
        if event.channel == PROGRESS_CHANNEL:
            ids = data.get("p")
            if isinstance(ids, list):
                self._mark_dirty([p for p in ids if isinstance(p, str)])
            return
        skill = self._channel_skill.get(event.channel)
        projects = data.get("p")
        if skill is None or not isinstance(projects, dict):
            return
        raw_quality = data.get("q")
        quality: dict[str, Any] = raw_quality if isinstance(raw_quality, dict) else {}
        nonce = data.get("x")
        attempt = data.get("a", 1)
        skip = data.get("s")
        passed_over = (
            frozenset(e for e in skip if isinstance(e, str))
            if isinstance(skip, list)
            else frozenset()
        )
        for project_id, count in projects.items():
            q = quality.get(project_id, 0.0)
            if not (isinstance(count, int) and count > 0 and isinstance(q, int | float)):
                continue
            if self.tickets is None or not isinstance(nonce, str) or not isinstance(attempt, int):
                # uncoordinated, or a hint from a sender that names no announcement
                self._wake(skill, str(project_id), count, float(q), passed_over)
                continue
            self.tickets.offer(
                Ticket(f"{nonce}:{project_id}", skill, str(project_id), count, float(q),
                       attempt, passed_over)
            )  # fmt: skip
