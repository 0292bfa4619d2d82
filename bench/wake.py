"""Wake-ups per opened task across server processes, wake-up latency, and the memory cost of
idle subscriptions.

Starts `--workers` server processes on one fresh database, opens `--subscribers` idle
`taskAvailable` subscriptions (graphql-transport-ws) spread over them (one expert per 100
subscriptions, as the per-credential budget is 200), then `--rounds` times opens one task in a
transaction of its own (the `insert_tasks` path the API uses, NOTIFY inside the transaction),
times from the moment COMMIT is sent to the first subscriber's event, and has the woken expert
claim, as a worker would. Run twice in one go, with the processes restarted in between: wake
coordination off (every process wakes its own idle subscribers: the baseline) and on (wake
tickets, realtime/tickets.py). Prints wake-ups per task (counted by the servers and seen by
the clients), p50/p99 latency, and the servers' resident memory per idle subscriber.

    PYTHONPATH=. .venv/bin/python bench/wake.py [--subscribers 1000] [--rounds 200]
        [--workers 1] [--coordination both|on|off]
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
from dataclasses import dataclass, field
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
SUBS_PER_EXPERT = 100


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def status(url: str) -> dict:
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.get(
            url + "/v1/realtime/status", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        r.raise_for_status()
        return r.json()


async def wait_ready(url: str, key: str | None = None, value: int | None = None) -> dict:
    async with httpx.AsyncClient(timeout=30) as http:
        for _ in range(3000):
            try:
                r = await http.get(url + "/readyz")
                if r.status_code == 200 and key is None:
                    return r.json()
                if r.status_code == 200:
                    body = await status(url)
                    if body.get(key) == value:
                        return body
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit(f"server at {url} not ready ({key}={value})")


@dataclass
class Phase:
    coordination: bool
    latencies: list[float] = field(default_factory=list)
    commit_ms: list[float] = field(default_factory=list)
    wakeups: int = 0
    events: int = 0
    per_conn: float = 0.0
    per_sub: float = 0.0
    rss_mib: list[float] = field(default_factory=list)


async def run_phase(dsn: str, workers: int, n_subs: int, rounds: int, phase: Phase) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "PYTHONPATH": str(REPO),
        "TASKROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
        "TASKROUTE_WAKE_COORDINATION": "1" if phase.coordination else "0",
    }
    base_port = 18000 + (os.getpid() * 7) % 900
    urls = [f"http://127.0.0.1:{base_port + i}" for i in range(workers)]
    procs: list[subprocess.Popen[bytes]] = []
    subs: list[WsClient] = []
    readers: list[asyncio.Task[None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for i in range(workers):
                cmd = [sys.executable, "-m", "taskroute", "serve", "--port", str(base_port + i)]
                proc_env = {**env, "TASKROUTE_BLOB_URL": f"file://{tmp}/blobs"}
                procs.append(
                    subprocess.Popen([*cmd, "--log-level", "warning"], env=proc_env, cwd=tmp)
                )
            for url in urls:
                await wait_ready(url)
            servers = [psutil.Process(p.pid) for p in procs]
            async with Api(urls[0]) as api:
                customer = await api.create_customer()
                n_experts = max(1, -(-n_subs // SUBS_PER_EXPERT))
                experts = [await api.create_expert(["bench"], f"x{i}") for i in range(n_experts)]
                project = await api.create_project(customer["token"], [], name="bench")
            project_id = uuid.UUID(project["project"]["id"])
            token_of = [experts[i % n_experts]["token"] for i in range(n_subs)]
            url_of = [urls[i % workers] for i in range(n_subs)]
            per_server = [sum(1 for u in url_of if u == url) for url in urls]

            # One subscription per server first, so one-time costs are not charged to each.
            # Offering permessage-deflate, as browsers and the websockets client do by default.
            subs = [
                WsClient(url_of[i], token_of[i], timeout=120, compression="deflate")
                for i in range(n_subs)
            ]
            for sub in subs[:workers]:
                await sub.open()
                await sub.subscribe(TASK_AVAILABLE, {"s": ["bench"]})
            for url in urls:
                await wait_ready(url, "task_waiters", 1)
            await asyncio.sleep(1)
            rss_before = [s.memory_info().rss for s in servers]
            # The authenticated connections, then a subscription on each: the two costs apart.
            rest = subs[workers:]
            for i in range(0, len(rest), 100):
                await asyncio.gather(*(s.open() for s in rest[i : i + 100]))
            await asyncio.sleep(1)
            rss_connected = [s.memory_info().rss for s in servers]
            # In batches, each started before the next (every start reads the database twice;
            # ten thousand at once would be shed by admission control).
            started = [1] * workers
            for i in range(0, len(rest), 50):
                batch = range(workers + i, workers + min(i + 50, len(rest)))
                await asyncio.gather(
                    *(subs[j].subscribe(TASK_AVAILABLE, {"s": ["bench"]}) for j in batch)
                )
                for j in batch:
                    started[j % workers] += 1
                for w, url in enumerate(urls):
                    await wait_ready(url, "task_waiters", started[w])
            assert started == per_server
            await asyncio.sleep(1)
            rss_after = [s.memory_info().rss for s in servers]
            measured = max(1, len(rest))
            phase.per_conn = (sum(rss_connected) - sum(rss_before)) / measured
            phase.per_sub = (sum(rss_after) - sum(rss_connected)) / measured
            phase.rss_mib = [r / 2**20 for r in rss_after]

            events: asyncio.Queue[tuple[float, int]] = asyncio.Queue()

            async def reader(i: int, sub: WsClient) -> None:
                while True:
                    await sub.next(timeout=3600)
                    events.put_nowait((time.perf_counter(), i))

            readers = [asyncio.create_task(reader(i, s)) for i, s in enumerate(subs)]
            pool = await create_pool(dsn, 1, 2)
            db = Database(pool, 5)
            spec = [task_spec({"skill": "bench", "payload": {"n": 1}}, 0, 1 << 20)]
            before = [await status(u) for u in urls]
            apis = {u: Api(u) for u in urls}
            try:
                for _ in range(rounds):
                    async with db.connection() as conn:
                        tx = conn.transaction()
                        await tx.start()
                        await insert_tasks(conn, project_id, spec, "open")
                        t0 = time.perf_counter()
                        await tx.commit()
                        phase.commit_ms.append((time.perf_counter() - t0) * 1000)
                    got, who = await asyncio.wait_for(events.get(), 30)
                    phase.latencies.append((got - t0) * 1000)
                    phase.events += 1
                    # the woken expert claims, as a worker does (and so is seen)
                    await apis[url_of[who]].claim(token_of[who], ["bench"])
                    await asyncio.sleep(0.02)
                    while not events.empty():  # more than one subscriber woken for this task
                        events.get_nowait()
                        phase.events += 1
            finally:
                for a in apis.values():
                    await a.__aexit__()
                await pool.close()
            after = [await status(u) for u in urls]
            pairs = zip(after, before, strict=True)
            phase.wakeups = sum(a["wakeups"] - b["wakeups"] for a, b in pairs)
        finally:
            for t in readers:
                t.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            await asyncio.gather(*(s.close() for s in subs), return_exceptions=True)
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=30)


async def run(n_subs: int, rounds: int, workers: int, coordination: str) -> None:
    modes = {"both": [False, True], "on": [True], "off": [False]}[coordination]
    phases = [Phase(m) for m in modes]
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        for phase in phases:
            dbname = f"taskroute_bench_{os.getpid()}_{int(phase.coordination)}"
            await admin.execute(f'CREATE DATABASE "{dbname}"')
            dsn = ADMIN_DSN.rsplit("/", 1)[0] + "/" + dbname
            try:
                await migrate_url(dsn)
                await run_phase(dsn, workers, n_subs, rounds, phase)
            finally:
                await admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    finally:
        await admin.close()

    names = ["uncoordinated" if not p.coordination else "coordinated" for p in phases]
    print(f"server processes:            {workers}")
    print(f"idle subscribers:            {n_subs} ({n_subs // workers} per process)")
    print(f"tasks opened (one per tx):   {rounds}")
    print(f"{'':42}" + "".join(f"{n:>16}" for n in names))

    def row(label: str, values: list[str]) -> None:
        print(f"{label:42}" + "".join(f"{v:>16}" for v in values))

    row("wake-ups per task (servers)", [f"{p.wakeups / rounds:.2f}" for p in phases])
    row("events per task (clients)", [f"{p.events / rounds:.2f}" for p in phases])
    row("commit -> first event p50 (ms)", [f"{statistics.median(p.latencies):.2f}" for p in phases])
    row("commit -> first event p99 (ms)", [f"{pct(p.latencies, 0.99):.2f}" for p in phases])
    row("commit -> first event max (ms)", [f"{max(p.latencies):.2f}" for p in phases])
    row("COMMIT round trip p50 (ms)", [f"{statistics.median(p.commit_ms):.2f}" for p in phases])
    row("memory per idle connection (KiB, RSS)", [f"{p.per_conn / 1024:.1f}" for p in phases])
    row("memory per idle subscription (KiB, RSS)", [f"{p.per_sub / 1024:.1f}" for p in phases])
    row(
        "memory per idle subscriber (KiB, RSS)",
        [f"{(p.per_conn + p.per_sub) / 1024:.1f}" for p in phases],
    )
    row("largest server RSS, subscribed (MiB)", [f"{max(p.rss_mib):.1f}" for p in phases])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument("--coordination", choices=["both", "on", "off"], default="both")
    args = parser.parse_args()
    if args.subscribers < args.workers:
        parser.error("--subscribers must be at least --workers")
    asyncio.run(run(args.subscribers, args.rounds, args.workers, args.coordination))


if __name__ == "__main__":
    main()
