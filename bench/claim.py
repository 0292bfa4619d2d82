"""Claim+submit throughput: the seed's bare cycle, the domain floor, and the full service.

Run by hand (never part of the test suite's pass/fail); prints figures:

    PYTHONPATH=. .venv/bin/python bench/claim.py                 # everything, ~5-10 minutes
    PYTHONPATH=. .venv/bin/python bench/claim.py --no-million    # skip the 1M-open-tasks probe
    PYTHONPATH=. .venv/bin/python bench/claim.py --profile /tmp/prof  # + py-spy of the server
    PYTHONPATH=. .venv/bin/python bench/claim.py --profile-sql --n 16 --no-million  # SQL per cycle

What it does, in its own temporary databases on the Postgres at --pg (dropped at the end):
1. Seeds 50k open tasks over 200 skills with Zipf-distributed sizes and a few thousand experts
   (each holding 3 Zipf-drawn skills, so most hold a big skill and a few hold rare ones), runs
   --history claim+submit cycles (5,000) over every expert and analyzes, so the tables a cycle
   writes have a past and statistics to match (analyzed empty, their cached plans scan them
   whole), plus `bare_tasks`: the open tasks in the seed's one-table shape (bench/bench.sql).
2. Bare: what pgbench would measure for the seed's design. N experts on min(N, --pool-max)
   connections run the seed's two statements (claim: one UPDATE .. SKIP LOCKED; submit: one
   UPDATE), autocommit, one round trip each, on `bare_tasks`. Through pgbench (labels
   `pgbench`, and `pgbench1` claiming from each expert's first skill only), and `mission1`:
   pgbench1 plus what the mission writes per cycle and no implementation can skip (a claim
   record, one live claim per expert, the audit line, the ledger line, the item's result;
   bench.sql `bench_mission_schema`), the bound on what the service's own SQL can reach.
3. Floor: the service's own domain calls without HTTP: per request `auth.authenticate`, then
   `claims.claim_next` and `claims.submit` on a `Database` over min(N, --pool-max) connections.
   They are called, never re-implemented, so the floor cannot drift from the service.
4. Service: `taskroute serve` (uvloop + httptools) as a subprocess; N simulated experts, each on
   its own keep-alive HTTP/1.1 connection (a minimal client, so the load generator costs little
   CPU), run claim+submit cycles through GraphQL, then through REST.
5. Claim latency (`claims.claim_next`, rolled back) with 10k and with 1M open tasks.
With --profile-sql, every phase at N = --profile-n also prints Postgres' work per cycle
(bench/sql_profile.py): each statement, nested ones (function bodies, triggers) included,
with calls, time, shared buffers hit/read/dirtied/written and WAL (pg_stat_statements, track =
all); trigger functions' calls and times (pg_stat_user_functions); WAL bytes, records and
full-page images (pg_stat_wal); tuples inserted/updated/HOT-updated per table; then one line
per phase against the seed's pgbench cycle. If the --pg cluster does not preload
pg_stat_statements, the whole run (every phase, so the ratios stay within one server) goes to
a throwaway cluster started with initdb/pg_ctl from /usr/lib/postgresql/*/bin.
Every measurement runs on a fresh copy of the seeded database, so each starts from the same
world. Cycles/s, p50/p99 cycle latency and the ratios service/bare and service/floor are
printed per N.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sql_profile  # noqa: E402  (bench/, next to this script)

from taskroute.config import Settings  # noqa: E402
from taskroute.db.admission import Priority  # noqa: E402
from taskroute.db.migrate import migrate_url  # noqa: E402
from taskroute.db.pool import Database, create_pool  # noqa: E402
from taskroute.db.queries import load  # noqa: E402
from taskroute.errors import TaskrouteError  # noqa: E402
from taskroute.resolvers import claims  # noqa: E402
from taskroute.resolvers.accounts.authentication import authenticate  # noqa: E402
from taskroute.resolvers.accounts.credentials import hash_token  # noqa: E402
from taskroute.storage.payload_links import PayloadUrls  # noqa: E402

HERE = Path(__file__).resolve().parent
B = load(HERE)  # bench-only statements (bench/bench.sql)
# The server's TASKROUTE_POOL_TIMEOUT and the floor's Database timeout: the same wait policy.
POOL_TIMEOUT = 30.0
# One admin token for the server and the floor, so `authenticate` takes the same path in both
# (a configured admin token is compared before the credential lookup).
ADMIN_TOKEN = f"bench-admin-{secrets.token_hex(16)}"
ANSWER = {"grade": 4}

Cycle = Callable[[], Awaitable[str]]
MakeWorker = Callable[[int], Awaitable[Cycle]]


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
        # Kept per expert: the bare cycle claims with the same skill sets the service routes by.
        skills_of = [draw_skills(skills, weights, rng) for _ in ids]
        pair_e = [eid for eid, held in zip(ids, skills_of, strict=True) for _ in held]
        pair_s = [s for held in skills_of for s in held]
        await conn.execute(B["bench_expert_skills"], pair_e, pair_s)
        await conn.execute(B["bench_credentials"], ids, [hash_token(t) for t in tokens])
        await conn.execute("ANALYZE")
        return {
            "project": project,
            "experts": ids,
            "tokens": tokens,
            "skills": skills,
            "skills_of": skills_of,
        }
    finally:
        await conn.close()


def draw_skills(skills: list[str], weights: list[float], rng: random.Random) -> list[str]:
    held: set[str] = set()
    while len(held) < 3:
        held.add(rng.choices(skills, weights)[0])
    return sorted(held)


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


async def seed_bare(dsn: str) -> None:
    """`bare_tasks`: the service world's tasks in the seed's one-table shape."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(B["bench_bare_schema"])
        await conn.execute(B["bench_mission_schema"])
        await conn.execute(B["bench_bare_fill"])
        # Hint bits, visibility map and statistics settled once, in the template every
        # measurement copies.
        await conn.execute("VACUUM ANALYZE")
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
    note: str = ""  # printed under the line (the server's profile)

    # set when the cycles are counted elsewhere (pgbench): no per-cycle latencies then
    cycles: int | None = None
    # clients left with nothing to claim before the end: cycles/s is then a lower bound
    drained: int = 0

    @property
    def rate(self) -> float:
        return (self.cycles if self.cycles is not None else len(self.latencies)) / self.seconds

    def pct(self, p: float) -> float:
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000

    def line(self) -> str:
        return (
            f"{self.label:<8} N={self.n:<3} {self.rate:8.1f} cycles/s   p50 {self.pct(0.5):7.2f} ms"
            f"   p99 {self.pct(0.99):7.2f} ms   empty {self.empty}  errors {self.errors}"
            + (f"   DRAINED ({self.drained} clients): a lower bound" if self.drained else "")
        )


async def drive(label: str, n: int, seconds: float, make_worker: MakeWorker) -> Run:
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


async def _json_codecs(conn: asyncpg.Connection) -> None:
    # jsonb in and out as Python objects; the stdlib codec: the payloads here are tiny.
    for typename in ("json", "jsonb"):
        await conn.set_type_codec(
            typename, encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )


async def _keep_session(conn: asyncpg.Connection) -> None:
    """No reset query on release: a pgbench client keeps its session, so each statement stays
    one round trip (asyncpg's default reset would add one per release)."""


async def bare_run(dsn: str, world: dict[str, Any], n: int, seconds: float, conns: int) -> Run:
    """The seed's cycle: two autocommit statements on `bare_tasks`, one round trip each."""
    size = min(n, conns)
    pool = await asyncpg.create_pool(
        dsn, min_size=size, max_size=size, init=_json_codecs, reset=_keep_session
    )
    assert pool is not None

    async def make_worker(i: int) -> Cycle:
        eid, skills = world["experts"][i], world["skills_of"][i]

        async def cycle() -> str:
            row = await pool.fetchrow(B["bench_bare_claim"], eid, skills)
            if row is None:
                return "empty"
            done = await pool.execute(B["bench_bare_submit"], row["id"], ANSWER, eid)
            return "ok" if done == "UPDATE 1" else "error"

        return cycle

    try:
        return await drive("bare", n, seconds, make_worker)
    finally:
        await pool.close()


async def pgbench_run(
    dsn: str, world: dict[str, Any], n: int, seconds: float, script: str, label: str
) -> Run:
    """The seed's cycle driven by pgbench (a C client: what the issue's 5,250 cycles/s
    baseline was measured with), on the same `bare_tasks`. Cycles are counted in the table
    (tasks done), since empty claims also count as pgbench transactions."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(B["bench_bare_experts"])
        clients = list(range(n))
        await conn.execute(
            B["bench_bare_experts_fill"],
            clients,
            [world["experts"][i] for i in clients],
            [",".join(world["skills_of"][i]) for i in clients],
        )
        before = await conn.fetchval(B["bench_bare_done"])
        url = urlparse(dsn)
        cmd = [
            "pgbench", "-n", "-M", "prepared", "-c", str(n), "-j", str(min(n, 2)),
            "-T", str(max(1, round(seconds))), "-f", str(HERE / script),
            "-h", url.hostname or "127.0.0.1", "-p", str(url.port or 5432),
            "-U", url.username or "postgres", url.path.lstrip("/"),
        ]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await proc.communicate()
        text = out.decode(errors="replace")
        if proc.returncode != 0:
            raise RuntimeError(f"pgbench failed ({proc.returncode}): {text[-3000:]}")
        done = await conn.fetchval(B["bench_bare_done"]) - before
        one_skill = script != PGBENCH_SCRIPTS["pgbench"]
        drained = await conn.fetchval(B["bench_bare_drained"], one_skill)
    finally:
        await conn.close()
    run = Run(label, n, max(1, round(seconds)), cycles=done, drained=drained)
    latency = re.search(r"latency average = ([0-9.]+) ms", text)
    run.note = f"  pgbench: latency average {latency.group(1) if latency else '?'} ms per cycle"
    return run


def payload_urls() -> PayloadUrls:
    """What the server's lifespan builds before the first claim. The bench's payloads are small
    and travel inline, so `payloads.deliver` never signs a URL for them; passed anyway so that
    larger bench payloads would be delivered (as URLs) instead of failing as Unavailable.
    The secret only has to exist: nothing in this process checks the URLs."""
    return PayloadUrls(secrets.token_bytes(32), Settings().payload_url_ttl)


async def floor_run(dsn: str, world: dict[str, Any], n: int, seconds: float, conns: int) -> Run:
    """The service minus HTTP/GraphQL: per request the credential lookup, then the domain
    calls the resolvers make, on the server's connection budget (min(N, pool_max))."""
    pool = await create_pool(dsn, min(n, conns), min(n, conns))
    db = Database(pool, POOL_TIMEOUT)
    urls = payload_urls()

    async def make_worker(i: int) -> Cycle:
        header = f"Bearer {world['tokens'][i]}"

        async def cycle() -> str:
            try:
                # Two requests, each authenticated on its own, as over HTTP. No `skills`: the
                # service's requests send no skill filter either.
                expert_id = (await authenticate(db, ADMIN_TOKEN, header)).require_expert()
                claim = await claims.claim_next(db, expert_id, None, None, urls)
                if claim is None:
                    return "empty"
                expert_id = (await authenticate(db, ADMIN_TOKEN, header)).require_expert()
                await claims.submit(db, expert_id, claim.assignment_id, ANSWER)
            except TaskrouteError:
                return "error"  # what the service would answer with an error response
            return "ok"

        return cycle

    try:
        return await drive("floor", n, seconds, make_worker)
    finally:
        await pool.close()


async def history(dsn: str, world: dict[str, Any], cycles: int, workers: int = 16) -> None:
    """A running service's past: `cycles` claim+submit cycles spread over every expert, so that
    the measurements start from history tables of some size, analyzed at that size (as
    autovacuum, or the server's table hygiene, keeps them). Without it the tables the cycle
    writes were analyzed empty, and plans cached on "empty" scan them whole for one row."""
    pool = await create_pool(dsn, workers, workers)
    db = Database(pool, POOL_TIMEOUT)
    urls = payload_urls()
    turns = iter(range(cycles))

    async def worker() -> None:
        for k in turns:
            expert_id = world["experts"][k % len(world["experts"])]
            claim = await claims.claim_next(db, expert_id, None, None, urls)
            if claim is not None:
                await claims.submit(db, expert_id, claim.assignment_id, ANSWER)

    try:
        await asyncio.gather(*(worker() for _ in range(workers)))
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
            # asyncio and uvloop already set TCP_NODELAY on TCP transports; explicit, so that a
            # request (written below in one write) never waits for the ACK of the previous one
            # (Nagle + delayed ACK: ~40 ms per request on Linux) whatever the event loop.
            sock = self.writer.get_extra_info("socket")
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        assert self.reader is not None
        raw = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {token}\r\nContent-Length: {len(raw)}\r\n\r\n"
        ).encode()
        self.writer.write(head + raw)  # one write: the request leaves in one send
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
    async def make_worker(i: int) -> Cycle:
        token = world["tokens"][i]
        http = MiniHttp(port)

        async def gql_cycle() -> str:
            status, body = await http.post("/graphql", {"query": CLAIM_Q}, token)
            if status != 200 or body.get("errors"):
                return "error"
            claim = body["data"]["claimNextTask"]
            if claim is None:
                return "empty"
            variables = {"a": claim["assignmentId"], "x": ANSWER}
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
            status, _ = await http.post(path, {"answer": ANSWER}, token)
            return "ok" if status == 200 else "error"

        return gql_cycle if api == "graphql" else rest_cycle

    return await drive(api, n, seconds, make_worker)


def py_spy() -> str:
    spy = Path(sys.executable).parent / "py-spy"
    found = str(spy) if spy.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("--profile needs py-spy (pip install py-spy)")
    return found


def start_profiler(pid: int, out: str, seconds: float) -> subprocess.Popen:
    """py-spy (sampling, from outside) on the server for the measured window."""
    cmd = [py_spy(), "record", "-p", str(pid), "-r", "250"]
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
        "TASKROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
        "TASKROUTE_POOL_MAX": str(pool_max),
        "TASKROUTE_POOL_MIN": str(min(pool_max, 4)),
        "TASKROUTE_POOL_TIMEOUT": str(POOL_TIMEOUT),
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


async def service_phase(
    dsn: str, world: dict[str, Any], n: int, api: str, args: argparse.Namespace
) -> Run:
    """One server per measurement: it serves that measurement's fresh database copy."""
    proc, port = await start_server(dsn, args.workers, args.pool_max)
    try:
        prof = None
        if args.profile and n == 16:
            prof = start_profiler(proc.pid, f"{args.profile}.{api}.txt", args.seconds)
        run = await service_run(port, world, n, args.seconds, api)
        if prof is not None:
            prof.wait(timeout=120)
            run.note = summarize_profile(Path(f"{args.profile}.{api}.txt"))
        return run
    finally:
        proc.terminate()
        proc.wait(timeout=20)


class OneConnection(Database):
    """A Database that always hands out one connection, which the probe keeps inside an open
    transaction: the claim's own transaction becomes a savepoint, and rolling the outer one
    back leaves the open tasks and the expert as they were."""

    def __init__(self, pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
        super().__init__(pool, POOL_TIMEOUT)
        self.conn = conn

    @asynccontextmanager
    async def connection(
        self, priority: Priority | None = None
    ) -> AsyncIterator[asyncpg.Connection]:
        yield self.conn


async def claim_latency(dsn: str, world: dict[str, Any], samples: int) -> tuple[float, float]:
    """p50/p99 ms of one `claims.claim_next` (rolled back: the open count stays put)."""
    pool = await create_pool(dsn, 1, 1)
    urls = payload_urls()
    times = []
    try:
        async with pool.acquire() as conn:
            db = OneConnection(pool, conn)
            for k in range(samples):
                tx = conn.transaction()
                await tx.start()
                t0 = time.perf_counter()
                claim = await claims.claim_next(db, world["experts"][k % 50], None, None, urls)
                times.append(time.perf_counter() - t0)
                await tx.rollback()
                assert claim is not None
    finally:
        await pool.close()
    times.sort()
    return times[len(times) // 2] * 1000, times[int(len(times) * 0.99)] * 1000


# --- databases -----------------------------------------------------------------------------


def dsn_of(admin: str, name: str) -> str:
    return admin.rsplit("/", 1)[0] + "/" + name


async def temp_db(admin: str, tag: str) -> tuple[str, str]:
    name = f"taskroute_bench_{tag}_{os.getpid()}"
    conn = await asyncpg.connect(admin)
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    dsn = dsn_of(admin, name)
    try:
        await migrate_url(dsn)
    except BaseException:
        await drop_db(admin, name)  # not yet in the caller's list of databases to drop
        raise
    return name, dsn


async def drop_db(admin: str, name: str) -> None:
    conn = await asyncpg.connect(admin)
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()


@asynccontextmanager
async def fresh_copy(admin: str, template: str) -> AsyncIterator[str]:
    """A copy of the seeded database for one measurement, dropped after it.

    Why not reopen the tasks in place: the answered assignments stay, so in the next phase
    each expert's claim walks past every open task of its skills it has already answered
    (one 3 s floor run at N=1 took expert 0's claim from 1.6 ms to 12.6 ms, 67 to 967
    buffers). Phases that ran later were measured on a harder world than earlier ones."""
    name = f"{template}_run"
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await conn.close()
    try:
        yield dsn_of(admin, name)
    finally:
        await drop_db(admin, name)


# --- main ----------------------------------------------------------------------------------

# Cycles done so far, for the SQL profile: the seed's table (pgbench, bare) or the service's.
CYCLES_DONE = {
    True: "SELECT count(*) FROM bare_tasks WHERE status = 'done'",
    False: "SELECT count(*) FROM tasks WHERE status = 'done'",
}
LABELS = ("pgbench", "pgbench1", "mission1", "bare", "floor", "graphql", "rest")
PGBENCH_SCRIPTS = {
    "pgbench": "bare_cycle.pgbench",
    "pgbench1": "bare_cycle_one_skill.pgbench",
    "mission1": "mission_cycle_one_skill.pgbench",
}


async def measure(
    label: str,
    dsn: str,
    world: dict[str, Any],
    n: int,
    args: argparse.Namespace,
    seconds: float,
) -> Run:
    if label in PGBENCH_SCRIPTS:
        return await pgbench_run(dsn, world, n, seconds, PGBENCH_SCRIPTS[label], label)
    if label == "bare":
        return await bare_run(dsn, world, n, seconds, args.pool_max)
    if label == "floor":
        return await floor_run(dsn, world, n, seconds, args.pool_max)
    return await service_phase(dsn, world, n, label, args)


def print_ratios(results: dict[tuple[str, int], Run], ns: list[int]) -> None:
    print("\n# ratios (cycles/s): service/pgbench, service/bare, service/floor, floor/bare")
    for n in ns:
        rate = {label: run.rate for (label, at), run in results.items() if at == n}
        pairs = [("graphql", "pgbench"), ("rest", "pgbench"), ("graphql", "bare"), ("rest", "bare")]
        pairs += [("graphql", "floor"), ("rest", "floor"), ("floor", "bare"), ("bare", "pgbench")]
        pairs += [("graphql", "pgbench1"), ("rest", "pgbench1"), ("floor", "pgbench")]
        pairs += [("floor", "pgbench1"), ("mission1", "pgbench1"), ("floor", "mission1")]
        pairs += [("graphql", "mission1"), ("rest", "mission1")]
        cells = [
            f"{a}/{b} {rate[a] / rate[b] if rate[b] else float('nan'):.2f}"
            for a, b in pairs
            if a in rate and b in rate
        ]
        print(f"N={n:<3} " + "  ".join(cells))


async def latency_section(args: argparse.Namespace, rng: random.Random, names: list[str]) -> None:
    """The claim latency probe on its own small world (its database is added to `names`)."""
    print("\n# claim latency (one claims.claim_next, single connection, rolled back)")
    small_name, small = await temp_db(args.pg, "small")
    names.append(small_name)
    small_world = await seed(small, 10_000, args.skills, 200, rng)
    p50, p99 = await claim_latency(small, small_world, args.samples)
    print(f"open tasks {10_000:>9}:  p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
    if args.million:
        t0 = time.perf_counter()
        conn = await asyncpg.connect(small)
        weights = zipf_weights(args.skills, 1.1)
        await add_tasks(conn, small_world["project"], 990_000, small_world["skills"], weights, rng)
        await conn.execute("VACUUM ANALYZE")
        await conn.close()
        print(f"# grew to 1M open tasks in {time.perf_counter() - t0:.0f}s")
        p50, p99 = await claim_latency(small, small_world, args.samples)
        print(f"open tasks {1_000_000:>9}:  p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")


def print_header() -> None:
    print(f"# taskroute bench/claim.py  {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print(
        f"# machine: {platform.machine()} {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.platform()}"
    )
    print("# load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


async def main(args: argparse.Namespace) -> None:
    cluster = None
    if args.profile_sql and not await sql_profile.has_statements(args.pg):
        # Every phase runs on the throwaway cluster, so the ratios stay within one server.
        cluster = sql_profile.PrivateCluster()
        cluster.start()
        args.pg = cluster.dsn
        print(f"# --profile-sql: a throwaway cluster with pg_stat_statements at {cluster.dsn}")
    try:
        await run_all(args)
    finally:
        if cluster is not None:
            cluster.destroy()


async def run_all(args: argparse.Namespace) -> None:
    rng = random.Random(8)
    ns = [int(x) for x in args.n.split(",")]
    if args.profile:
        py_spy()  # missing: fail now, not after the seeding and the first phases
    print_header()
    names: list[str] = []
    try:
        template, dsn = await temp_db(args.pg, "main")
        names.append(template)
        conn = await asyncpg.connect(dsn)
        print(f"# Postgres {await conn.fetchval('SHOW server_version')}")
        await conn.close()
        t0 = time.perf_counter()
        world = await seed(dsn, args.tasks + args.history, args.skills, args.experts, rng)
        await history(dsn, world, args.history)
        await seed_bare(dsn)
        print(
            f"# seeded {args.tasks} open tasks over {args.skills} Zipf(1.1) skills, "
            f"{args.experts} experts x 3 skills, and {args.history} cycles of history, in "
            f"{time.perf_counter() - t0:.1f}s"
        )
        print(
            f"# {args.seconds:.0f}s per measurement after 1s warm-up, each on a fresh copy of "
            f"the seeded database; server workers {args.workers}, pool max {args.pool_max}"
        )
        results: dict[tuple[str, int], Run] = {}
        profiles: dict[str, dict[str, float]] = {}
        for label in filter(None, args.labels.split(",")):
            for n in ns:
                profiled = args.profile_sql and n == args.profile_n
                seconds = args.seconds
                while True:
                    async with fresh_copy(args.pg, template) as copy:
                        if profiled:
                            done = CYCLES_DONE[label in PGBENCH_SCRIPTS or label == "bare"]
                            before = await sql_profile.snapshot(copy, done)
                        run = await measure(label, copy, world, n, args, seconds)
                        if profiled:
                            after = await sql_profile.snapshot(copy, done)
                    # A client whose skills ran dry spins through empty claims for the rest of
                    # the window (the one-skill cycle empties skill-000 in ~6 s at N=16).
                    if not run.drained or seconds <= 2:
                        break
                    print(f"{run.line()}: measured again, for half as long", flush=True)
                    seconds /= 2
                results[(label, n)] = run
                print(run.line(), flush=True)
                if run.note:
                    print(run.note, flush=True)
                if profiled:
                    profiles[label] = sql_profile.report(label, n, before, after, args.profile_top)
                    print(flush=True)
        print("# load average now: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        if results:
            print_ratios(results, ns)
        sql_profile.print_comparison(profiles)
        await latency_section(args, rng, names)
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
    p.add_argument(
        "--history",
        type=int,
        default=5000,
        help="claim+submit cycles run before the measurements (their tasks are added to --tasks)",
    )
    p.add_argument("--n", default="1,16,64", help="concurrency levels")
    p.add_argument("--labels", default=",".join(LABELS), help="phases to run, in this order")
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
    p.add_argument(
        "--profile-sql",
        action="store_true",
        help="per-statement, per-trigger, WAL and buffer figures per cycle at N=--profile-n\n"
        "(pg_stat_statements, track = all; a throwaway cluster when --pg does not preload it)",
    )
    p.add_argument("--profile-n", type=int, default=16, help="the N --profile-sql profiles")
    p.add_argument("--profile-top", type=int, default=25, help="statements listed per kind")
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the seeded and the latency databases (per-measurement copies are dropped)",
    )
    return p.parse_args()


if __name__ == "__main__":
    args = parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(args))
