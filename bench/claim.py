"""Claim+submit throughput: the raw-SQL floor vs the full service (GraphQL and REST over HTTP).

Run by hand (never part of the test suite's pass/fail); prints figures:

    PYTHONPATH=. .venv/bin/python bench/claim.py                 # everything, ~5-10 minutes
    PYTHONPATH=. .venv/bin/python bench/claim.py --no-million    # skip the 1M-open-tasks probe
    PYTHONPATH=. .venv/bin/python bench/claim.py --profile /tmp/prof  # + py-spy of the server

What it does, in its own temporary databases on the Postgres at --pg (dropped at the end):
1. Seeds 50k open tasks over 200 skills with Zipf-distributed sizes and a few thousand experts
   (each holding 3 Zipf-drawn skills, so most hold a big skill and a few hold rare ones).
2. Floor: N simulated experts on min(N, --pool-max) asyncpg connections (the server's pool
   budget) run, per cycle, exactly the named
   statements the service runs (`Q[...]` from taskroute/db/queries): the credential lookup of
   each request, the claim transaction (expert_touch, assignment_active_for_expert,
   leases_release_expired, gold_claim, task_claim, audit_insert) and the submit transaction
   (assignment_get, task_lock, assignment_lock, assignment_submit, task_done, payout_insert,
   and the quality bookkeeping `quality.after_submit` runs).
3. Service: `taskroute serve` (uvloop + httptools) as a subprocess; N simulated experts, each on
   its own keep-alive HTTP/1.1 connection (a minimal client, so the load generator costs little
   CPU), run claim+submit cycles through GraphQL, then through REST.
4. Claim latency with 10k and with 1M open tasks (single connection, claim transactions rolled
   back so the pool does not shrink while measuring).
Every phase starts with all tasks open again. Cycles/s, p50/p99 cycle latency and the ratio
service/floor are printed per N.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from taskroute.auth import hash_token  # noqa: E402
from taskroute.db.migrate import migrate_url  # noqa: E402
from taskroute.db.pool import create_pool  # noqa: E402
from taskroute.db.queries import Q, load  # noqa: E402
from taskroute.resolvers import quality  # noqa: E402

B = load(Path(__file__).resolve().parent)  # bench-only seeding statements (bench/bench.sql)
SWEEP_BATCH = 1000


# --- seeding -------------------------------------------------------------------------------


def zipf_weights(n: int, s: float) -> list[float]:
    return [1.0 / (k**s) for k in range(1, n + 1)]


def skill_names(n: int) -> list[str]:
    return [f"skill-{k:03d}" for k in range(n)]


async def seed(
    dsn: str, n_tasks: int, n_skills: int, n_experts: int, rng: random.Random
) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        skills = skill_names(n_skills)
        weights = zipf_weights(n_skills, 1.1)
        customer = await conn.fetchval(B["bench_customer"])
        project = await conn.fetchval(B["bench_project"], customer)
        await add_tasks(conn, project, n_tasks, skills, weights, rng)
        tokens = [f"bench-expert-{i}-{uuid.uuid4().hex}" for i in range(n_experts)]
        ids = [
            r["id"]
            for r in await conn.fetch(B["bench_experts"], [f"e{i}" for i in range(n_experts)])
        ]
        pair_e, pair_s = [], []
        for eid in ids:
            held: set[str] = set()
            while len(held) < 3:
                held.add(rng.choices(skills, weights)[0])
            for s in held:
                pair_e.append(eid)
                pair_s.append(s)
        await conn.execute(B["bench_expert_skills"], pair_e, pair_s)
        await conn.execute(B["bench_credentials"], ids, [hash_token(t) for t in tokens])
        await conn.execute("ANALYZE")
        return {"project": project, "experts": ids, "tokens": tokens, "skills": skills}
    finally:
        await conn.close()


async def add_tasks(
    conn: asyncpg.Connection,
    project: uuid.UUID,
    n: int,
    skills: list[str],
    weights: list[float],
    rng: random.Random,
) -> None:
    chunk = 100_000
    for start in range(0, n, chunk):
        picks = rng.choices(skills, weights, k=min(chunk, n - start))
        await conn.execute(B["bench_tasks"], project, picks)


async def reopen(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(B["bench_release_active"])
        await conn.execute(B["bench_reopen"])
        await conn.execute("VACUUM ANALYZE tasks")
        return await conn.fetchval(B["bench_open_count"])
    finally:
        await conn.close()


# --- measuring -----------------------------------------------------------------------------


@dataclass
class Run:
    label: str
    n: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    empty: int = 0
    errors: int = 0

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds

    def pct(self, p: float) -> float:
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000

    def line(self) -> str:
        return (
            f"{self.label:<8} N={self.n:<3} {self.rate:8.1f} cycles/s   p50 {self.pct(0.5):7.2f} ms"
            f"   p99 {self.pct(0.99):7.2f} ms   empty {self.empty}  errors {self.errors}"
        )


async def drive(label: str, n: int, seconds: float, make_worker: Any) -> Run:
    """Run n workers for `seconds` after a 1 s warm-up; each worker returns its cycle times."""
    run = Run(label, n, seconds)
    start_at = time.perf_counter() + 1.0
    stop_at = start_at + seconds

    async def one(i: int) -> None:
        cycle = await make_worker(i)
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at:
                return
            outcome = await cycle()
            t1 = time.perf_counter()
            if t0 < start_at:
                continue
            if outcome == "ok":
                run.latencies.append(t1 - t0)
            elif outcome == "empty":
                run.empty += 1
                await asyncio.sleep(0.05)
            else:
                run.errors += 1

    await asyncio.gather(*(one(i) for i in range(n)))
    return run


async def floor_run(dsn: str, world: dict[str, Any], n: int, seconds: float, conns: int) -> Run:
    # The same connection budget as the server's pool: N experts share min(N, pool_max).
    pool = await create_pool(dsn, min(n, conns), min(n, conns))
    answer = {"grade": 4}

    async def make_worker(i: int) -> Any:
        eid = world["experts"][i]
        token_hash = hash_token(world["tokens"][i])

        async def cycle() -> str:
            async with pool.acquire() as conn:
                await conn.fetchrow(Q["credential_lookup"], token_hash)
                async with conn.transaction():
                    await conn.fetchval(Q["expert_touch"], eid)
                    held = await conn.fetchrow(Q["assignment_active_for_expert"], eid)
                    if held is None:
                        await conn.fetch(Q["leases_release_expired"], SWEEP_BATCH, eid)
                        row = await quality.claim_gold(conn, eid, None)
                        if row is None:
                            row = await conn.fetchrow(Q["task_claim"], eid, None, None)
                        if row is None:
                            return "empty"
                        await conn.execute(
                            Q["audit_insert"],
                            eid,
                            row["customer_id"],
                            row["project_id"],
                            row["task_id"],
                            "claim",
                        )
                    else:
                        row = held
                aid = row["assignment_id"]
                await conn.fetchrow(Q["credential_lookup"], token_hash)
                async with conn.transaction():
                    found = await conn.fetchrow(Q["assignment_get"], aid)
                    await conn.fetchrow(Q["task_lock"], found["task_id"])
                    await conn.fetchrow(Q["assignment_lock"], aid)
                    pay = found["project_pay_cents"]
                    await conn.fetchrow(Q["assignment_submit"], aid, answer, pay)
                    await conn.execute(Q["task_done"], found["task_id"], aid)
                    await conn.execute(Q["payout_insert"], aid, eid, found["project_id"], pay)
                    await quality.after_submit(conn, found, answer)
            return "ok"

        return cycle

    try:
        return await drive("floor", n, seconds, make_worker)
    finally:
        await pool.close()


class MiniHttp:
    """One keep-alive HTTP/1.1 connection; just enough client for uvicorn's responses."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict[str, Any], token: str) -> tuple[int, Any]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        raw = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {token}\r\nContent-Length: {len(raw)}\r\n\r\n"
        ).encode()
        self.writer.write(head + raw)
        header = await self.reader.readuntil(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = 0
        for line in lines[1:]:
            key, _, value = line.partition(":")
            if key.lower() == "content-length":
                length = int(value)
        payload = await self.reader.readexactly(length) if length else b""
        return status, json.loads(payload) if payload else None


CLAIM_Q = (
    "mutation { claimNextTask { assignmentId leaseUntil task { id projectId skill payload } } }"
)
SUBMIT_Q = "mutation($a: ID!, $x: JSON!) { submit(assignmentId: $a, answer: $x) { id payCents } }"


async def service_run(port: int, world: dict[str, Any], n: int, seconds: float, api: str) -> Run:
    async def make_worker(i: int) -> Any:
        token = world["tokens"][i]
        http = MiniHttp(port)

        async def gql_cycle() -> str:
            status, body = await http.post("/graphql", {"query": CLAIM_Q}, token)
            if status != 200 or body.get("errors"):
                return "error"
            claim = body["data"]["claimNextTask"]
            if claim is None:
                return "empty"
            variables = {"a": claim["assignmentId"], "x": {"grade": 4}}
            status, body = await http.post(
                "/graphql", {"query": SUBMIT_Q, "variables": variables}, token
            )
            return "ok" if status == 200 and not body.get("errors") else "error"

        async def rest_cycle() -> str:
            status, body = await http.post("/v1/tasks/next", {}, token)
            if status == 204:
                return "empty"
            if status != 200:
                return "error"
            path = f"/v1/assignments/{body['assignment_id']}/submit"
            status, _ = await http.post(path, {"answer": {"grade": 4}}, token)
            return "ok" if status == 200 else "error"

        return gql_cycle if api == "graphql" else rest_cycle

    return await drive(api, n, seconds, make_worker)


def start_profiler(pid: int, out: str, seconds: float) -> subprocess.Popen:
    """py-spy (sampling, from outside) on the server for the measured window."""
    spy = Path(sys.executable).parent / "py-spy"
    cmd = [str(spy) if spy.exists() else "py-spy", "record", "-p", str(pid), "-r", "250"]
    cmd += ["-d", str(int(seconds) + 1), "-f", "raw", "-o", out, "--nonblocking"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _package(frame: str) -> str:
    """Which package a py-spy frame `func (pkg/module.py:line)` belongs to."""
    path = frame.rsplit("(", 1)[-1].rstrip(")")
    top = path.split("/", 1)[0] if "/" in path else path.split(".", 1)[0]
    if top in ("asyncio", "uvloop", "selectors"):
        return "asyncio/event loop"
    return top if top and not top.startswith("<") else "stdlib/other"


def summarize_profile(path: Path) -> str:
    """CPU samples of the server by the package of the innermost frame (self time), and by
    whether the stack passes through GraphQL machinery at all (inclusive)."""
    own: dict[str, int] = {}
    inclusive = {"graphql-core+strawberry": 0, "asyncpg": 0, "starlette+uvicorn": 0}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        leaf = _package(frames[-1])
        own[leaf] = own.get(leaf, 0) + n
        pkgs = {_package(f) for f in frames}
        if pkgs & {"graphql", "strawberry"}:
            inclusive["graphql-core+strawberry"] += n
        if "asyncpg" in pkgs:
            inclusive["asyncpg"] += n
        if pkgs & {"starlette", "uvicorn", "httptools"}:
            inclusive["starlette+uvicorn"] += n
    if not total:
        return f"  (no samples in {path})"
    lines = [f"  profile ({total} CPU samples at 250 Hz), self time by package:"]
    for pkg, n in sorted(own.items(), key=lambda kv: -kv[1])[:8]:
        lines.append(f"    {pkg:<22} {100 * n / total:5.1f}%")
    lines.append(
        "  inclusive: " + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in inclusive.items())
    )
    return "\n".join(lines)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start_server(dsn: str, workers: int, pool_max: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "PYTHONPATH": str(ROOT),
        "TASKROUTE_POOL_MAX": str(pool_max),
        "TASKROUTE_POOL_MIN": str(min(pool_max, 4)),
        "TASKROUTE_POOL_TIMEOUT": "30",
    }
    cmd = [sys.executable, "-m", "taskroute", "serve", "--port", str(port)]
    cmd += ["--workers", str(workers), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=env, cwd=str(ROOT))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            line = await reader.readline()
            writer.close()
            if b" 200 " in line:
                return proc, port
        except OSError:
            pass
        await asyncio.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not become ready")


async def claim_latency(dsn: str, world: dict[str, Any], samples: int) -> tuple[float, float]:
    """p50/p99 ms of one claim transaction (rolled back: the open count stays put)."""
    conn = await asyncpg.connect(dsn)
    times = []
    try:
        for k in range(samples):
            eid = world["experts"][k % 50]
            tx = conn.transaction()
            await tx.start()
            t0 = time.perf_counter()
            await conn.fetchval(Q["expert_touch"], eid)
            await conn.fetchrow(Q["assignment_active_for_expert"], eid)
            await conn.fetch(Q["leases_release_expired"], SWEEP_BATCH, eid)
            await quality.claim_gold(conn, eid, None)
            row = await conn.fetchrow(Q["task_claim"], eid, None, None)
            times.append(time.perf_counter() - t0)
            assert row is not None
            await tx.rollback()
    finally:
        await conn.close()
    times.sort()
    return times[len(times) // 2] * 1000, times[int(len(times) * 0.99)] * 1000


# --- main ----------------------------------------------------------------------------------


async def temp_db(admin: str, tag: str) -> tuple[str, str]:
    name = f"taskroute_bench_{tag}_{os.getpid()}"
    conn = await asyncpg.connect(admin)
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    dsn = admin.rsplit("/", 1)[0] + "/" + name
    await migrate_url(dsn)
    return name, dsn


async def drop_db(admin: str, name: str) -> None:
    conn = await asyncpg.connect(admin)
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(8)
    ns = [int(x) for x in args.n.split(",")]
    print(f"# taskroute bench/claim.py  {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print(
        f"# machine: {platform.machine()} {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.platform()}"
    )
    print("# load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    names: list[str] = []
    try:
        name, dsn = await temp_db(args.pg, "main")
        names.append(name)
        conn = await asyncpg.connect(dsn)
        print(f"# Postgres {await conn.fetchval('SHOW server_version')}")
        await conn.close()
        t0 = time.perf_counter()
        world = await seed(dsn, args.tasks, args.skills, args.experts, rng)
        print(
            f"# seeded {args.tasks} open tasks over {args.skills} Zipf(1.1) skills, "
            f"{args.experts} experts x 3 skills in {time.perf_counter() - t0:.1f}s"
        )
        print(
            f"# {args.seconds:.0f}s per measurement after 1s warm-up; server workers "
            f"{args.workers}, pool max {args.pool_max}"
        )
        results: dict[tuple[str, int], Run] = {}
        for n in ns:
            await reopen(dsn)
            run = await floor_run(dsn, world, n, args.seconds, args.pool_max)
            results[("floor", n)] = run
            print(run.line(), flush=True)
        proc, port = await start_server(dsn, args.workers, args.pool_max)
        try:
            for api in ("graphql", "rest"):
                for n in ns:
                    await reopen(dsn)
                    prof = None
                    if args.profile and n == 16:
                        prof = start_profiler(proc.pid, f"{args.profile}.{api}.txt", args.seconds)
                    run = await service_run(port, world, n, args.seconds, api)
                    results[(api, n)] = run
                    print(run.line(), flush=True)
                    if prof is not None:
                        prof.wait(timeout=120)
                        print(summarize_profile(Path(f"{args.profile}.{api}.txt")), flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=20)
        print("# load average now: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        print("\n# ratio service/floor (cycles/s)")
        for n in ns:
            floor = results[("floor", n)].rate
            g, r = results[("graphql", n)].rate, results[("rest", n)].rate
            print(f"N={n:<3} graphql {g / floor:5.2f}   rest {r / floor:5.2f}")

        print("\n# claim latency (one claim transaction, single connection, rolled back)")
        await reopen(dsn)
        small_name, small = await temp_db(args.pg, "small")
        names.append(small_name)
        small_world = await seed(small, 10_000, args.skills, 200, rng)
        p50, p99 = await claim_latency(small, small_world, args.samples)
        print(f"open tasks {10_000:>9}:  p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
        if args.million:
            t0 = time.perf_counter()
            conn = await asyncpg.connect(small)
            weights = zipf_weights(args.skills, 1.1)
            await add_tasks(
                conn, small_world["project"], 990_000, small_world["skills"], weights, rng
            )
            await conn.execute("VACUUM ANALYZE")
            await conn.close()
            print(f"# grew to 1M open tasks in {time.perf_counter() - t0:.0f}s")
            p50, p99 = await claim_latency(small, small_world, args.samples)
            print(f"open tasks {1_000_000:>9}:  p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
    finally:
        if not args.keep:
            for name in names:
                await drop_db(args.pg, name)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--pg",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="admin DSN; temporary databases are created next to it",
    )
    p.add_argument("--tasks", type=int, default=50_000)
    p.add_argument("--skills", type=int, default=200)
    p.add_argument("--experts", type=int, default=3000)
    p.add_argument("--n", default="1,16,64", help="concurrency levels")
    p.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    p.add_argument("--workers", type=int, default=1, help="taskroute serve --workers")
    p.add_argument(
        "--pool-max", type=int, default=20, help="connections: TASKROUTE_POOL_MAX and the floor's"
    )
    p.add_argument("--samples", type=int, default=500, help="claims per latency probe")
    p.add_argument(
        "--no-million",
        dest="million",
        action="store_false",
        help="skip growing to 1M open tasks for the latency probe",
    )
    p.add_argument(
        "--profile", default="", help="py-spy the server at N=16 into PREFIX.{graphql,rest}.txt"
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary databases")
    return p.parse_args()


if __name__ == "__main__":
    args = parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(args))
