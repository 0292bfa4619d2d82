"""Webhooks: events delivered per second to a local receiver, and what the outbox adds to the
claim+submit cycle.

Run by hand (never part of the test suite's pass/fail); prints figures:

    PYTHONPATH=. .venv/bin/python bench/webhooks.py [--experts 8] [--seconds 10] [--pg DSN]

In a temporary database on the Postgres at --pg (dropped at the end):
1. Two customers, each with a project of open tasks; customer B has an endpoint subscribed to
   every event type, A none. N experts run claim+submit cycles with the domain's own calls
   (`claims.claim_next`, `claims.submit`, as bench/claim.py's floor), alternating between A's
   and B's project in rounds of --seconds / 4, so both see the same machine state: every submit
   in B resolves an item, so its transaction also writes the event and the delivery row.
   Printed: cycles/s and p50/p99 per side, and the difference.
2. The deliveries queued by step 1 are then sent by one `WebhookSender` (the server's job) to
   an HTTP receiver on 127.0.0.1 that answers 200: events delivered per second, and per
   attempt latency p50/p99 from the delivery log.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from uuid import UUID

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from taskroute.config import Settings  # noqa: E402
from taskroute.db.migrate import migrate_url  # noqa: E402
from taskroute.db.pool import Database, create_pool  # noqa: E402
from taskroute.resolvers import claims, projects  # noqa: E402
from taskroute.resolvers.accounts import rules  # noqa: E402
from taskroute.resolvers.jobs.webhooks import WebhookSender  # noqa: E402
from taskroute.resolvers.validation import project_spec  # noqa: E402

ANSWER = {"grade": 4}


class Receiver:
    """A minimal HTTP/1.1 keep-alive receiver counting requests."""

    def __init__(self) -> None:
        self.count = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                self.count += 1
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def setup(db: Database, tasks: int, experts: int, url: str) -> dict[str, Any]:
    from taskroute.resolvers.webhooks import endpoints

    world: dict[str, Any] = {"experts": [], "projects": {}}
    for side in ("A", "B"):
        cust = await rules.create_customer(db, f"customer {side}")
        spec = project_spec(
            {
                "name": side,
                "tasks": [{"skill": "grading", "payload": {"i": i}} for i in range(tasks)],
            },
            tasks,
            1 << 20,
        )
        created = await projects.create_project(db, cust.id, spec)
        world["projects"][side] = created.project["id"]
        if side == "B":
            from taskroute.resolvers.accounts.credentials import Viewer

            viewer = Viewer("customer", cust.id)
            settings = Settings(webhook_allow_private=True)
            await endpoints.create_endpoint(db, settings, viewer, url, list(endpoints.EVENT_TYPES))
    for i in range(experts):
        e = await rules.create_expert(db, f"e{i}", [{"skill": "grading"}])
        world["experts"].append(e.id)
    return world


async def cycles(db: Database, experts: list[UUID], project: UUID, seconds: float) -> list[float]:
    stop = time.perf_counter() + seconds
    times: list[float] = []

    async def one(expert: UUID) -> None:
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            claim = await claims.claim_next(db, expert, None, project)
            if claim is None:
                return
            await claims.submit(db, expert, claim.assignment_id, ANSWER)
            times.append(time.perf_counter() - t0)

    await asyncio.gather(*(one(e) for e in experts))
    return times


def pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--pg",
        default=os.environ.get(
            "TASKROUTE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--tasks", type=int, default=20000)
    args = ap.parse_args()
    name = f"taskroute_bench_wh_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(args.pg)
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = args.pg.rsplit("/", 1)[0] + f"/{name}"
    receiver = Receiver()
    await receiver.start()
    try:
        await migrate_url(dsn)
        pool = await create_pool(dsn, min_size=2, max_size=args.experts + 2)
        db = Database(pool, timeout=30)
        world = await setup(db, args.tasks, args.experts, f"http://127.0.0.1:{receiver.port}/hook")
        print(f"# {platform.node()} {os.cpu_count()} cpus, python {platform.python_version()},"
              f" {args.experts} experts, {args.seconds:.0f}s per side")  # fmt: skip
        got: dict[str, list[float]] = {"A": [], "B": []}
        rounds = 4
        for _ in range(rounds):
            for side in ("A", "B"):
                got[side] += await cycles(
                    db, world["experts"], world["projects"][side], args.seconds / rounds
                )
        rate = {s: len(t) / args.seconds for s, t in got.items()}
        for side, label in (("A", "no endpoint"), ("B", "an endpoint")):
            t = got[side]
            print(f"claim+submit, {label:12}: {rate[side]:8.0f} cycles/s"
                  f"  p50 {pct(t, 0.5):6.2f} ms  p99 {pct(t, 0.99):6.2f} ms")  # fmt: skip
        extra = statistics.median(got["B"]) - statistics.median(got["A"])
        print(
            f"outbox cost: {extra * 1000:+.2f} ms per cycle at p50"
            f" ({(rate['B'] / rate['A'] - 1) * 100:+.1f}% cycles/s)"
        )
        queued = await db.fetchval("SELECT count(*) FROM webhook_deliveries")
        settings = Settings(webhook_allow_private=True, webhook_interval=0.01)
        sender = WebhookSender(db.for_jobs(), settings)
        t0 = time.perf_counter()
        task = asyncio.create_task(sender.run())
        while receiver.count < queued:
            await asyncio.sleep(0.01)
        took = time.perf_counter() - t0
        sender.stop_at_safe_point()
        await task
        lat = [r["latency_ms"] for r in await db.fetch("SELECT latency_ms FROM webhook_attempts")]
        print(
            f"delivery: {queued} events in {took:.2f}s = {queued / took:.0f} events/s"
            f" (in flight {settings.webhook_in_flight}/process,"
            f" {settings.webhook_endpoint_concurrency}/endpoint);"
            f" attempt p50 {statistics.median(lat):.0f} ms"
            f" p99 {sorted(lat)[int(0.99 * (len(lat) - 1))]} ms"
        )
        await pool.close()
    finally:
        if receiver.server is not None:
            receiver.server.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
