"""The webhook sender: every server process runs one; together they deliver each due delivery
with one attempt at a time.

A claim (queries/webhooks.sql webhook_claim, one short transaction at a time across
processes) leases due deliveries of enabled endpoints, at most
`TASKROUTE_WEBHOOK_ENDPOINT_CONCURRENCY` in flight per endpoint; the lease outlasts the
attempt's own time bound, so a live attempt is never taken over, and a dead process's
deliveries are due again when their leases end. Each attempt runs in its own task (up to
`TASKROUTE_WEBHOOK_IN_FLIGHT` per process) and records its outcome under its lease token:
delivered, or due again after a back-off, or failed past the give-up window; the endpoint is
disabled once it has failed every attempt for `TASKROUTE_WEBHOOK_DISABLE_AFTER`. Nothing here
runs on a request's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from taskroute.config import Settings
from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.resolvers.webhooks import delivery

log = logging.getLogger(__name__)

LEASE_MARGIN = 30.0  # seconds a lease outlasts the attempt's own bound
PRUNE_EVERY = 600.0  # seconds between two prunings of the delivery log
PRUNE_BATCH = 1000


class WebhookSender:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self._stop = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()
        self._plain = delivery.new_client(settings, keep_alive=True)
        self._tls = delivery.new_client(settings, keep_alive=False)
        self.lease = settings.webhook_connect_timeout + settings.webhook_timeout + LEASE_MARGIN
        self.attempts = 0  # attempts this process made (the bench reads it)

    def stop_at_safe_point(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_prune = loop.time()
        try:
            while not self._stop.is_set():
                free = self.settings.webhook_in_flight - len(self._running)
                claimed = 0
                if free > 0:
                    try:
                        claimed = await self.claim_and_start(free)
                    except Exception:
                        log.exception("webhook claim failed; retrying")
                if loop.time() >= next_prune:
                    next_prune = loop.time() + PRUNE_EVERY
                    await self._prune()
                if claimed and claimed == free:
                    await self._wait_for_a_slot()
                elif not claimed:
                    await self._idle()
        finally:
            if self._running:
                await asyncio.gather(*self._running, return_exceptions=True)
            await self._plain.aclose()
            await self._tls.aclose()

    async def claim_and_start(self, most: int) -> int:
        s = self.settings
        async with self.db.transaction() as conn:
            await conn.execute(Q["webhook_claim_lock"])
            rows = await conn.fetch(
                Q["webhook_claim"], most, s.webhook_endpoint_concurrency, self.lease
            )
        for row in rows:
            task = asyncio.create_task(self._deliver(row))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        return len(rows)

    async def _deliver(self, row: Any) -> None:
        s = self.settings
        body = delivery.body(row["type"], row["event_at"], row["data"], row["change_seq"])
        secrets_ = [row["secret"]] + ([row["previous_secret"]] if row["previous_secret"] else [])
        client = self._tls if row["url"].startswith("https:") else self._plain
        try:
            outcome = await delivery.attempt(client, s, row["url"], secrets_, row["event_id"], body)
        except Exception as exc:  # never leave a lease to run out for a bug's sake
            log.exception("webhook attempt crashed")
            outcome = delivery.Outcome(False, None, f"internal error: {type(exc).__name__}", 0)
        self.attempts += 1
        wait = delivery.backoff(row["attempts"], s)
        try:
            done = await self.db.fetchrow(
                Q["webhook_attempt_done"], row["endpoint_id"], row["event_id"],
                row["lease_token"], outcome.delivered, outcome.status, outcome.error,
                outcome.latency_ms, wait, s.webhook_give_up, s.webhook_disable_after,
            )  # fmt: skip
        except Exception:
            # the lease runs out and the delivery is attempted again: at least once
            log.exception("webhook outcome not recorded for %s", row["event_id"])
            return
        if done is not None and done["endpoint_status"] == "disabled":
            log.warning(
                "webhook endpoint %s disabled: every delivery failed for %.0fs (last: %s)",
                row["endpoint_id"],
                s.webhook_disable_after,
                outcome.error,
            )

    async def _prune(self) -> None:
        try:
            await self.db.execute(Q["webhook_prune"], self.settings.webhook_keep, PRUNE_BATCH)
        except Exception:
            log.exception("webhook log pruning failed")

    async def _idle(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), self.settings.webhook_interval)

    async def _wait_for_a_slot(self) -> None:
        stop = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait(
                {stop, *self._running},
                timeout=self.settings.webhook_interval,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            stop.cancel()
