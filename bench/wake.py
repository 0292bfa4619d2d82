"""Wake-up latency and the memory cost of idle subscriptions.

Starts one server process on a fresh database, opens N idle `taskAvailable` subscriptions
(graphql-transport-ws), then R times opens one task in a transaction of its own (through the
same `insert_tasks` path the API uses, NOTIFY inside the transaction) and times from the
moment COMMIT is sent to the first subscriber's event. Prints p50/p99 latency, wake-ups per
task, and the server's resident memory per idle subscription.

    PYTHONPATH=. .venv/bin/python bench/wake.py [--subscribers 1000] [--rounds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from taskroute.db.migrate import migrate_url  # noqa: E402
from taskroute.db.pool import Database, create_pool  # noqa: E402
from taskroute.resolvers.projects import insert_tasks  # noqa: E402
from taskroute.resolvers.validation import task_spec  # noqa: E402
from tests.helpers import ADMIN_TOKEN, Api  # noqa: E402
from tests.ws import TASK_AVAILABLE, WsClient  # noqa: E402

ADMIN_DSN = os.environ.get("TASKROUTE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def wait_ready(url: str, key: str | None = None, value: int | None = None) -> dict:
    async with httpx.AsyncClient() as http:
        for _ in range(600):
            try:
                r = await http.get(url + "/readyz")
                if key is not None:
                    r = await http.get(
                        url + "/v1/realtime/status",
                        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                    )
                body = r.json()
                if r.status_code == 200 and (key is None or body.get(key) == value):
                    return body
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit(f"server at {url} not ready ({key}={value})")


async def run(n_subs: int, rounds: int) -> None:
    dbname = f"taskroute_bench_{os.getpid()}"
    admin = await asyncpg.connect(ADMIN_DSN)
    await admin.execute(f'CREATE DATABASE "{dbname}"')
    dsn = ADMIN_DSN.rsplit("/", 1)[0] + "/" + dbname
    proc = None
    try:
        await migrate_url(dsn)
        port = 18000 + os.getpid() % 1000
        env = {
            **os.environ,
            "DATABASE_URL": dsn,
            "PYTHONPATH": str(REPO),
            "TASKROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
        }
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "taskroute", "serve", "--port", str(port)]
            proc = subprocess.Popen([*cmd, "--log-level", "warning"], env=env, cwd=tmp)
            url = f"http://127.0.0.1:{port}"
            await wait_ready(url)
            server = psutil.Process(proc.pid)
            async with Api(url) as api:
                customer = await api.create_customer()
                expert = await api.create_expert(["bench"])
                project = await api.create_project(customer["token"], [], name="bench")
                project_id = uuid.UUID(project["project"]["id"])

                # Warm up one subscription so one-time costs are not charged per subscription.
                warm = WsClient(url, expert["token"])
                await warm.open()
                await warm.subscribe(TASK_AVAILABLE, {"s": ["bench"]})
                await wait_ready(url, "task_waiters", 1)
                rss_before = server.memory_info().rss

                # First the authenticated connections, then a subscription on each, so the
                # two costs are reported apart.
                subs: list[WsClient] = []
                for i in range(0, n_subs - 1, 100):
                    batch = [
                        WsClient(url, expert["token"]) for _ in range(min(100, n_subs - 1 - i))
                    ]
                    await asyncio.gather(*(s.open() for s in batch))
                    subs.extend(batch)
                await asyncio.sleep(1)
                rss_connected = server.memory_info().rss
                for i in range(0, len(subs), 50):
                    await asyncio.gather(
                        *(s.subscribe(TASK_AVAILABLE, {"s": ["bench"]}) for s in subs[i : i + 50])
                    )
                    await wait_ready(url, "task_waiters", 1 + min(i + 50, len(subs)))
                subs.append(warm)
                await wait_ready(url, "task_waiters", n_subs)
                await asyncio.sleep(1)
                rss_after = server.memory_info().rss
                per_conn = (rss_connected - rss_before) / (n_subs - 1)
                per_sub = (rss_after - rss_connected) / (n_subs - 1)

                events: asyncio.Queue[float] = asyncio.Queue()

                async def reader(sub: WsClient) -> None:
                    while True:
                        await sub.next(timeout=3600)
                        events.put_nowait(time.perf_counter())

                readers = [asyncio.create_task(reader(s)) for s in subs]
                pool = await create_pool(dsn, 1, 2)
                db = Database(pool, 5)
                spec = [task_spec({"skill": "bench", "payload": {"n": 1}}, 0, 1 << 20)]
                latencies, commit_ms, extra = [], [], 0
                ready0 = await wait_ready(url, "task_waiters", n_subs)
                for _ in range(rounds):
                    async with db.connection() as conn:
                        tx = conn.transaction()
                        await tx.start()
                        await insert_tasks(conn, project_id, spec, "open")
                        t0 = time.perf_counter()
                        await tx.commit()
                        commit_ms.append((time.perf_counter() - t0) * 1000)
                    got = await asyncio.wait_for(events.get(), 10)
                    latencies.append((got - t0) * 1000)
                    await asyncio.sleep(0.02)
                    while not events.empty():  # more than one waiter woken for this task
                        events.get_nowait()
                        extra += 1
                ready1 = await wait_ready(url, "task_waiters", n_subs)
                wakeups = ready1["wakeups"] - ready0["wakeups"]
                for t in readers:
                    t.cancel()
                await asyncio.gather(*readers, return_exceptions=True)
                await asyncio.gather(*(s.close() for s in subs), return_exceptions=True)
                await pool.close()

            print(f"idle subscribers:            {n_subs}")
            print(f"tasks opened (one per tx):   {rounds}")
            print(f"commit -> event p50:         {statistics.median(latencies):.2f} ms")
            print(f"commit -> event p99:         {pct(latencies, 0.99):.2f} ms")
            print(f"commit -> event max:         {max(latencies):.2f} ms")
            print(f"COMMIT round trip p50:       {statistics.median(commit_ms):.2f} ms")
            print(f"wake-ups per task (server):  {wakeups / rounds:.2f}  (extra seen: {extra})")
            mib = " / ".join(f"{x / 2**20:.1f}" for x in (rss_before, rss_connected, rss_after))
            print(f"server RSS before/connected/subscribed: {mib} MiB")
            print(f"memory per idle WebSocket connection:    {per_conn / 1024:.1f} KiB (RSS delta)")
            print(f"memory per idle subscription on it:      {per_sub / 1024:.1f} KiB (RSS delta)")
            print(f"memory per idle subscriber, total:       {(per_conn + per_sub) / 1024:.1f} KiB")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        await admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(run(args.subscribers, args.rounds))


if __name__ == "__main__":
    main()
