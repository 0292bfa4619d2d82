"""Sending realtime hints: call these from any code path that opens work or changes progress.

    await tasks_opened(conn, [(skill, project_id, count), ...])   # INSIDE the transaction
    progress_changed(project_id, ...)                              # AFTER the commit

`tasks_opened` sends its NOTIFY inside the caller's transaction, so subscribers hear of the
tasks only once they are committed (and never if it rolls back).

Why a debouncer: NOTIFY takes a database-wide lock at commit, so every notifying transaction
serialises with every other one. Per skill and per process, at most one NOTIFY goes out inside a
transaction every `min_interval` seconds; tasks opened in between are summed and sent by a
background flusher (one NOTIFY per skill per `flush_delay` at most) once their transaction is
known to have committed (`pg_xact_status`), so a hint still never precedes its commit and a
rollback still sends nothing. The flusher's NOTIFYs run outside any request transaction.

`progress_changed` only marks projects dirty in memory; the flusher sends one NOTIFY for all of
them every `progress_interval` seconds. Callers must call it after commit, so the recount that
the notification triggers sees the change.

Without `NOTIFIER.start(db)` (CLI, scripts) `tasks_opened` always notifies in the transaction
and `progress_changed` does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q

from .channels import PROGRESS_CHANNEL, progress_payloads, skill_channel, tasks_payloads

log = logging.getLogger(__name__)

# (skill, project_id, how many tasks became open[, their min_quality, default 0])
Opened = tuple[str, UUID | str, int] | tuple[str, UUID | str, int, float]


# The pseudo transaction id of hints whose transaction is known to have committed.
_COMMITTED = "committed"


class Notifier:
    def __init__(
        self, min_interval: float = 0.05, progress_interval: float = 0.25, flush_delay: float = 0.05
    ) -> None:
        # per skill: at most one NOTIFY inside a transaction per `min_interval`
        self.min_interval = min_interval
        # at most one progress NOTIFY per `progress_interval`
        self.progress_interval = progress_interval
        # the flusher's cadence: deferred hints go out at most this long after their commit
        # is seen, so per skill at most one deferred NOTIFY per `flush_delay` as well
        self.flush_delay = flush_delay
        self.db: Database | None = None
        self._last_sent: dict[str, float] = {}
        # skill -> xid -> project -> [count, min_quality]: opened in transactions not yet
        # known to have committed
        self._deferred: dict[str, dict[str, dict[str, list[float]]]] = {}
        self._dirty_projects: set[str] = set()
        self._progress_sent_at = 0.0
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        # counters of task hints (tests and operators read them)
        self.sent_in_transaction = 0
        self.sent_deferred = 0
        self.dropped_aborted = 0

    @property
    def deferred_pending(self) -> int:
        """Task hints held for the flusher: their transaction is not known to have committed."""
        return sum(
            len(by_project) for by_xid in self._deferred.values() for by_project in by_xid.values()
        )

    def start(self, db: Database) -> None:
        self.db = db
        self._wake = asyncio.Event()  # bound to the running loop
        self._task = asyncio.create_task(self._run(), name="notify-flusher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(Exception):
            await self._flush(final=True)
        # Nothing carries over to a later start (possibly on another database).
        self.db = None
        self._deferred.clear()
        self._dirty_projects.clear()
        self._last_sent.clear()

    # --- called by resolvers ------------------------------------------------------------

    async def tasks_opened(self, conn: asyncpg.Connection, opened: Iterable[Opened]) -> None:
        by_skill: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        quality: dict[str, float] = {}
        for skill, project_id, count, *rest in opened:
            if count > 0:
                project = str(project_id)
                by_skill[skill][project] += count
                # the least demanding of a project's tasks decides who may be woken
                q = float(rest[0]) if rest else 0.0
                quality[project] = min(q, quality.get(project, q))
        if not by_skill:
            return
        now = time.monotonic()
        channels: list[str] = []
        payloads: list[str] = []
        deferred: list[str] = []
        for skill, counts in by_skill.items():
            if self.db is None or now - self._last_sent.get(skill, -1e9) >= self.min_interval:
                self._last_sent[skill] = now
                for payload in tasks_payloads(counts, quality):
                    channels.append(skill_channel(skill))
                    payloads.append(payload)
            else:
                deferred.append(skill)
        if channels:
            await conn.fetchval(Q["notify_many"], channels, payloads)
            self.sent_in_transaction += len(channels)
        if deferred:
            xid = await conn.fetchval(Q["xact_id_current"])
            for skill in deferred:
                per_project = self._deferred.setdefault(skill, {}).setdefault(xid, {})
                for project, n in by_skill[skill].items():
                    entry = per_project.setdefault(project, [0, quality[project]])
                    entry[0] += n
                    entry[1] = min(entry[1], quality[project])
            self._wake.set()

    def committed(self, opened: Iterable[Opened]) -> None:
        """Hints for tasks whose transaction already committed (a database function's own
        transaction): the flusher sends them with the next batch, no commit check needed."""
        pending = False
        for skill, project_id, count, *rest in opened:
            if count <= 0:
                continue
            q = float(rest[0]) if rest else 0.0
            per_project = self._deferred.setdefault(skill, {}).setdefault(_COMMITTED, {})
            entry = per_project.setdefault(str(project_id), [0, q])
            entry[0] += count
            entry[1] = min(entry[1], q)
            pending = True
        if pending:
            self._wake.set()

    def progress_changed(self, *project_ids: UUID | str) -> None:
        if self.db is None or not project_ids:
            return
        self._dirty_projects.update(str(p) for p in project_ids)
        self._wake.set()

    # --- the flusher ----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            # Wait a little so that many changes fold into one NOTIFY.
            await asyncio.sleep(self.flush_delay)
            try:
                more = await self._flush()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database may be briefly away: try again later
                log.exception("notify flush failed")
                more = True
                await asyncio.sleep(self.progress_interval)
            if more:
                self._wake.set()
            # bound the per-skill bookkeeping to skills seen recently
            horizon = time.monotonic() - 10 * self.min_interval
            for skill in [s for s, t in self._last_sent.items() if t < horizon]:
                del self._last_sent[skill]

    async def _flush(self, final: bool = False) -> bool:
        """Send what is due; return True if something is still waiting (uncommitted hints,
        or progress marks that must wait for `progress_interval` since the last send)."""
        db = self.db
        if db is None:
            return False
        channels: list[str] = []
        payloads: list[str] = []
        waiting = False
        if self._dirty_projects:
            if final or time.monotonic() - self._progress_sent_at >= self.progress_interval:
                self._progress_sent_at = time.monotonic()
                dirty, self._dirty_projects = self._dirty_projects, set()
                for payload in progress_payloads(dirty):
                    channels.append(PROGRESS_CHANNEL)
                    payloads.append(payload)
            else:
                waiting = True
        if self._deferred:
            seen = {x for per_xid in self._deferred.values() for x in per_xid}
            xids = sorted(seen - {_COMMITTED})
            status = {r["xid"]: r["status"] for r in await db.fetch(Q["xact_status_many"], xids)}
            status[_COMMITTED] = "committed"
            now = time.monotonic()
            for skill in list(self._deferred):
                per_xid = self._deferred[skill]
                counts: dict[str, int] = defaultdict(int)
                quality: dict[str, float] = {}
                for xid in list(per_xid):
                    state = status.get(xid)
                    if state == "in progress" and not final:
                        waiting = True
                        continue
                    projects = per_xid.pop(xid)
                    if state == "aborted":
                        self.dropped_aborted += 1
                        continue
                    for project, (n, q) in projects.items():  # committed, or too old to know
                        counts[project] += int(n)
                        quality[project] = min(q, quality.get(project, q))
                if not per_xid:
                    del self._deferred[skill]
                if counts:
                    self._last_sent[skill] = now
                    for payload in tasks_payloads(counts, quality):
                        channels.append(skill_channel(skill))
                        payloads.append(payload)
                        self.sent_deferred += 1
        if channels:
            await db.fetchval(Q["notify_many"], channels, payloads)
        return waiting


# The process's notifier; the app's lifespan starts and stops it.
NOTIFIER = Notifier()


async def tasks_opened(conn: asyncpg.Connection, opened: Iterable[Opened]) -> None:
    """Tell subscribers that tasks became claimable. Call inside the opening transaction.

    `opened` lists `(skill, project_id, count)` or `(skill, project_id, count, min_quality)`;
    repeated pairs are summed. Wakes roughly `count` idle experts of `skill` per server
    process, among those whose quality in `skill` is at least `min_quality` (default 0).
    """
    await NOTIFIER.tasks_opened(conn, opened)


async def leases_released(conn: asyncpg.Connection, released: Iterable[Any]) -> None:
    """Inside the transaction that ran `leases_release_expired`: hints for the rows it
    reopened (status 'open'), each with its task's minimum quality."""
    reopened = [r for r in released if r["status"] == "open"]
    await tasks_opened(conn, [(r["skill"], r["project_id"], 1, r["min_quality"]) for r in reopened])


def tasks_opened_committed(opened: Iterable[Opened]) -> None:
    """Tell subscribers that tasks became claimable in a transaction that has committed
    (a one-round-trip database function that opened them). Without a started notifier (CLI,
    scripts) nothing is sent: nobody there has subscribers."""
    if NOTIFIER.db is not None:
        NOTIFIER.committed(opened)


def progress_changed(*project_ids: UUID | str) -> None:
    """Tell `projectProgress` subscribers to recount. Call after the change committed."""
    NOTIFIER.progress_changed(*project_ids)
