"""Human-pace load (issue 19): experts with subscriptions, think times, heartbeats, submits.

Run by hand (never part of the test suite); prints a table like the issue's:

    PYTHONPATH=. .venv/bin/python bench/load.py                            # short, ~2 minutes
    PYTHONPATH=. .venv/bin/python bench/load.py --experts 2000 --think 10  # the seed's scale
    PYTHONPATH=. .venv/bin/python bench/load.py --experts 4000 --think 10  # past capacity
    PYTHONPATH=. .venv/bin/python bench/load.py --experts 1000 --think 10 --pgbouncer

--pgbouncer puts the tests' private PgBouncer (transaction mode, Debian's package) between the
request pools and Postgres, the LISTEN connection going direct as in production (docs/
deploy.md), and adds PgBouncer's CPU per request to the report.

What it does, in a fresh database on the Postgres at --pg (dropped at the end):
1. Seeds --tasks open tasks (30,000) over --skills Zipf-distributed skills (50) in --projects
   projects (10), and --experts experts holding 3 Zipf-drawn skills each.
2. Starts `taskroute serve --workers 2` as a subprocess (uvloop + httptools, default pool and
   admission settings unless given).
3. --procs generator processes share the experts; each expert, during the --ramp, opens a
   WebSocket, `connection_init`s and subscribes to `taskAvailable`, then loops: claim (GraphQL);
   when there is nothing, wait for a `taskAvailable` event (at most 5 s); think for an
   exponentially distributed time (mean --think s), heartbeating once midway; submit. A refused
   request (UNAVAILABLE) is retried after its Retry-After; a held claim is always submitted, so
   at the end every claim an expert received must have an acknowledged submit and one payout.
   When the window ends nobody claims again, and each held task is submitted at a random
   moment within one mean think time (the rest of its think time if shorter), not all at once.
4. Over the measured window (--seconds after the ramp) it reports, per request kind, p50/p99 of
   the answered requests and counts of refusals; achieved cycles/s (acknowledged submits)
   against the offered rate (experts / think); refusals (503 / UNAVAILABLE) and errors by
   request kind; CPU of the server processes and of the generator; and Postgres' work per
   request: from pg_stat_statements when the server loads it (execution time per claim,
   heartbeat and submit call, nested statements included), else from /proc (CPU of the
   backends serving the bench database, background jobs' statements included, divided by
   the requests answered). On this machine pg_stat_statements is not in
   shared_preload_libraries, so the /proc counters are used (the run says which).
Each HTTP request uses the expert's own keep-alive connection through a minimal client, so the
generator costs little CPU; its CPU share is printed so a run where it limits shows as such.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import psutil

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from taskroute.db.migrate import migrate_url  # noqa: E402
from taskroute.db.queries import Q, load  # noqa: E402
from taskroute.resolvers.accounts.credentials import hash_token  # noqa: E402
from tests.ws import TASK_AVAILABLE, WsClient  # noqa: E402

# bench-only statements: seeding (bench/bench.sql) and this bench's (bench/sql/load_bench.sql)
B = {**load(HERE), **load(HERE / "sql")}
ADMIN_DSN = os.environ.get("TASKROUTE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
KINDS = ("claim", "heartbeat", "submit")
CLAIM_Q = (
    "mutation { claimNextTask { assignmentId leaseUntil task { id projectId skill payload } } }"
)
HEARTBEAT_Q = (
    "mutation($a: ID!) { heartbeat(assignmentId: $a) { leaseUntil hasHighPriorityTasks } }"
)
SUBMIT_Q = "mutation($a: ID!, $x: JSON!) { submit(assignmentId: $a, answer: $x) { id payCents } }"
ANSWER = {"label": "ok"}
METRICS_TOKEN = "load-bench-metrics"
# Server-side histograms read from /metrics around the window: (name, label or None)
SERVER_WAITS = (
    ("taskroute_admission_wait_seconds", "claim"),
    ("taskroute_admission_wait_seconds", "protect"),
    ("taskroute_admission_hold_seconds", "claim"),
    ("taskroute_admission_hold_seconds", "protect"),
    ("taskroute_event_loop_lag_seconds", None),
)


# --- seeding -------------------------------------------------------------------------------


def zipf_weights(n: int, s: float = 1.1) -> list[float]:
    return [1.0 / (k**s) for k in range(1, n + 1)]


async def seed(dsn: str, args: argparse.Namespace, rng: random.Random) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        skills = [f"skill-{k:02d}" for k in range(args.skills)]
        weights = zipf_weights(args.skills)
        customer = await conn.fetchval(B["bench_customer"])
        projects = [await conn.fetchval(B["bench_project"], customer) for _ in range(args.projects)]
        per_project = args.tasks // args.projects
        for project in projects:
            await conn.execute(
                B["bench_tasks"], project, rng.choices(skills, weights, k=per_project)
            )
        ids = [
            r["id"]
            for r in await conn.fetch(B["bench_experts"], [f"e{i}" for i in range(args.experts)])
        ]
        pair_e: list[uuid.UUID] = []
        pair_s: list[str] = []
        for eid in ids:
            held: set[str] = set()
            while len(held) < 3:
                held.add(rng.choices(skills, weights)[0])
            pair_e += [eid] * len(held)
            pair_s += sorted(held)
        await conn.execute(B["bench_expert_skills"], pair_e, pair_s)
        tokens = [f"load-{i}-{uuid.uuid4().hex}" for i in range(args.experts)]
        await conn.execute(B["bench_credentials"], ids, [hash_token(t) for t in tokens])
        await conn.execute("VACUUM ANALYZE")
        return tokens
    finally:
        await conn.close()


# --- the generator (runs in --procs child processes) ---------------------------------------


class Http:
    """One keep-alive HTTP/1.1 connection per expert; reconnects when the server closed it."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def post(self, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        for attempt in (1, 2):
            if self.writer is None or self.reader is None or self.reader.at_eof():
                await self._connect()
            assert self.reader is not None and self.writer is not None
            raw = json.dumps(body).encode()
            head = (
                "POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {self.token}\r\nContent-Length: {len(raw)}\r\n\r\n"
            ).encode()
            try:
                self.writer.write(head + raw)
                header = await self.reader.readuntil(b"\r\n\r\n")
            except (ConnectionError, asyncio.IncompleteReadError):
                # The server closed an idle connection as we reused it; every request here is
                # safe to repeat (claims return the held claim, submits the stored receipt).
                self.writer = None
                if attempt == 2:
                    raise
                continue
            lines = header.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            headers = {}
            for line in lines[1:]:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            payload = await self.reader.readexactly(length) if length else b""
            return status, headers, json.loads(payload) if payload else None
        raise AssertionError("unreachable")


@dataclass
class Stats:
    lat: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    counts: dict[str, dict[str, int]] = field(default_factory=lambda: {k: {} for k in KINDS})
    ws_connect: list[float] = field(default_factory=list)
    ws_failed: int = 0
    acked_in_window: int = 0
    claimed: int = 0
    acked: int = 0
    abandoned: int = 0  # claims whose submit never got an answer (must stay 0)
    # --tight-loop experts' repeated claims (a double click) while holding one: answered with
    # the held claim / refused (must stay 0) / another claim / nothing / an error (all 0)
    double_held: int = 0
    double_refused: int = 0
    double_other: int = 0
    double_nothing: int = 0
    double_error: int = 0
    # --timeline: (seconds since the window opened, kind, latency) of every answered request
    events: list[tuple[float, str, float]] = field(default_factory=list)

    def count(self, kind: str, outcome: str) -> None:
        self.counts[kind][outcome] = self.counts[kind].get(outcome, 0) + 1


def _outcome(status: int, body: Any) -> tuple[str, Any]:
    """("ok", data) or ("shed" | "unavailable" | "error", None)."""
    errors = (body or {}).get("errors") if isinstance(body, dict) else None
    if status == 200 and not errors:
        return "ok", body["data"]
    ext = (errors or [{}])[0].get("extensions", {}) if errors else {}
    if ext.get("code") == "UNAVAILABLE":
        return ("shed" if ext.get("reason") == "overloaded" else "unavailable"), None
    return "error", None


async def run_expert(
    token: str, port: int, start_at: float, window: tuple[float, float], think: float,
    stats: Stats, stopping: asyncio.Event, rng: random.Random, timeline: bool = False,
    tight: bool = False,
) -> None:  # fmt: skip
    """`tight`: no think time and no heartbeat, and every claim asked again at once on a second
    connection (a double click), whose answer must be the held claim."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start_at - loop.time()))
    http = Http(port, token)
    wake = asyncio.Event()
    t0 = loop.time()
    ws = WsClient(f"http://127.0.0.1:{port}", token, timeout=3600)
    try:
        await ws.open()
        await ws.subscribe(TASK_AVAILABLE)
    except Exception:
        stats.ws_failed += 1
        return
    stats.ws_connect.append(loop.time() - t0)

    async def listen() -> None:
        while True:
            await ws.next()
            wake.set()

    listener = asyncio.create_task(listen())
    again: Http | None = None

    async def call(kind: str, body: dict[str, Any]) -> Any:
        """The request until it is answered (refusals retried after Retry-After)."""
        while True:
            t = loop.time()
            try:
                status, headers, answer = await http.post(body)
            except (OSError, asyncio.IncompleteReadError):
                stats.count(kind, "error")
                await asyncio.sleep(1)
                continue
            outcome, data = _outcome(status, answer)
            label = outcome
            if kind == "claim" and outcome == "ok" and data.get("claimNextTask") is None:
                label = "empty"
            if window[0] <= t < window[1]:
                stats.count(kind, label)
                if outcome == "ok":
                    stats.lat[kind].append(loop.time() - t)
                    if timeline:
                        stats.events.append((t - window[0], kind, loop.time() - t))
            if outcome == "ok":
                return data
            if outcome == "error" or (kind == "claim" and stopping.is_set()):
                return None
            await asyncio.sleep(float(headers.get("retry-after", "1")))

    async def pause(seconds: float) -> None:
        # When the run stops, thinking ends early so that every held task gets submitted, but
        # at a random moment within one mean think time, not at once: every expert submitting
        # in the same instant put ~2,000 submits in front of the window's last requests (the
        # last second's claims waited 2.7-5 s, which alone set the window's p99).
        start = loop.time()
        if not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), seconds)
        left = seconds - (loop.time() - start)
        if stopping.is_set() and left > 0:
            await asyncio.sleep(min(left, rng.uniform(0, think)))

    try:
        if not tight:
            await pause(rng.uniform(0, think))  # experts do not all start a cycle together
        while not stopping.is_set():
            wake.clear()
            data = await call("claim", {"query": CLAIM_Q})
            claim = (data or {}).get("claimNextTask")
            if claim is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), 5)
                continue
            stats.claimed += 1
            a = claim["assignmentId"]
            if tight:
                if again is None:
                    again = Http(port, token)
                try:
                    status, _, answer = await again.post({"query": CLAIM_Q})
                    outcome, data = _outcome(status, answer)
                except (OSError, asyncio.IncompleteReadError):
                    outcome, data = "error", None
                if outcome in ("shed", "unavailable"):
                    stats.double_refused += 1
                elif outcome != "ok":
                    stats.double_error += 1
                elif data.get("claimNextTask") is None:
                    stats.double_nothing += 1
                elif data["claimNextTask"]["assignmentId"] == a:
                    stats.double_held += 1
                else:
                    stats.double_other += 1
            else:
                seconds = rng.expovariate(1 / think)
                await pause(seconds / 2)
                await call("heartbeat", {"query": HEARTBEAT_Q, "variables": {"a": a}})
                await pause(seconds / 2)
            receipt = await call("submit", {"query": SUBMIT_Q, "variables": {"a": a, "x": ANSWER}})
            if receipt is None:
                stats.abandoned += 1
                continue
            stats.acked += 1
            if window[0] <= loop.time() < window[1]:
                stats.acked_in_window += 1
    finally:
        listener.cancel()
        await ws.close()
        for h in (http, again):
            if h is not None and h.writer is not None:
                h.writer.close()


def generator(
    tokens: list[str], port: int, wall_start: float, args_d: dict[str, Any], seed: int, out: Any
) -> None:
    import uvloop

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        base = loop.time() + (wall_start - time.time())
        ramp, seconds, think = args_d["ramp"], args_d["seconds"], args_d["think"]
        total, offset = args_d["experts"], args_d["offset"]
        window = (base + ramp, base + ramp + seconds)
        stats, stopping, rng = Stats(), asyncio.Event(), random.Random(seed)
        experts = [
            run_expert(
                tok, port, base + ramp * (offset + i * args_d["procs"]) / total,
                window, think, stats, stopping, rng, args_d["timeline"],
                offset + i * args_d["procs"] < args_d["tight_loop"],
            )
            for i, tok in enumerate(tokens)
        ]  # fmt: skip
        tasks = [asyncio.create_task(e) for e in experts]
        await asyncio.sleep(max(0.0, window[1] - loop.time()))
        stopping.set()
        await asyncio.wait(tasks, timeout=120)
        return stats.__dict__

    out.put(uvloop.run(main()))


# --- measuring -----------------------------------------------------------------------------


def cpu_seconds(procs: list[psutil.Process]) -> dict[int, float]:
    found = {}
    for p in procs:
        try:
            t = p.cpu_times()
            found[p.pid] = t.user + t.system
        except psutil.Error:
            pass
    return found


def tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


async def backends(dsn: str, dbname: str) -> list[psutil.Process]:
    conn = await asyncpg.connect(dsn)
    try:
        pids = await conn.fetch(B["bench_load_backends"], dbname)
    finally:
        await conn.close()
    return [psutil.Process(r["pid"]) for r in pids if psutil.pid_exists(r["pid"])]


def _norm(sql: str) -> str:
    return " ".join(re.sub(r"--[^\n]*", "", sql).split())


# What each request kind sends (GraphQL resolvers -> resolvers/claims.py -> these blocks).
CALLS = {
    "claim": ("claim_call",),
    "heartbeat": ("heartbeat_call",),
    "submit": ("submit_unless_schema_call", "submit_call"),
}


async def pss_start(dsn: str) -> bool:
    """True when pg_stat_statements works here (its counts reset); False: use /proc."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        await conn.fetchval(B["bench_load_pss_reset"])
        return True
    except asyncpg.PostgresError:  # not in shared_preload_libraries, or not installed
        return False
    finally:
        await conn.close()


async def pss_per_kind(dsn: str) -> dict[str, tuple[int, float]]:
    """(calls, execution ms) per request kind since pss_start."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(B["bench_load_pss_read"])
    finally:
        await conn.close()
    names = {_norm(Q[name]): kind for kind, blocks in CALLS.items() for name in blocks}
    found = {k: (0, 0.0) for k in KINDS}
    for r in rows:
        kind = names.get(_norm(r["query"]))
        if kind is not None:
            calls, ms = found[kind]
            found[kind] = (calls + r["calls"], ms + r["ms"])
    return found


async def metrics_text(port: int) -> str:
    """The server's /metrics page (both workers: PROMETHEUS_MULTIPROC_DIR)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {METRICS_TOKEN}\r\n"
        "Connection: close\r\n\r\n".encode()
    )
    text = (await reader.read()).decode()
    writer.close()
    return text


def histograms(text: str) -> dict[tuple[str, str | None], dict[float, float]]:
    """SERVER_WAITS' cumulative bucket counts from a /metrics page."""
    out: dict[tuple[str, str | None], dict[float, float]] = {}
    for name, label in SERVER_WAITS:
        sel = f'le="([^"]+)",priority="{label}"' if label else 'le="([^"]+)"'
        found = re.findall(rf"^{name}_bucket\{{{sel}\}} (\S+)$", text, re.M)
        out[(name, label)] = {float(le): float(n) for le, n in found}
    return out


def job_passes(text: str) -> dict[str, tuple[float, float]]:
    """Background jobs' passes so far from a /metrics page: job -> (passes, seconds)."""
    found: dict[str, list[float]] = {}
    for part, job, value in re.findall(
        r'^taskroute_job_pass_seconds_(count|sum)\{job="([^"]+)"\} (\S+)$', text, re.M
    ):
        found.setdefault(job, [0.0, 0.0])[part == "sum"] = float(value)
    return {job: (c, t) for job, (c, t) in found.items()}


def bucket_quantile(cumulative: dict[float, float], q: float) -> float:
    """Prometheus' histogram_quantile: linear within the bucket that holds the q-th value."""
    bounds = sorted(cumulative)
    total = cumulative.get(float("inf"), 0.0)
    if total <= 0:
        return float("nan")
    rank, lower, below = q * total, 0.0, 0.0
    for le in bounds:
        n = cumulative[le]
        if n >= rank:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * (rank - below) / max(n - below, 1e-9)
        lower, below = le, n
    return lower


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))] * 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start_server(
    dsn: str, args: argparse.Namespace, direct: str | None = None
) -> tuple[subprocess.Popen, int]:
    """`dsn` for the request pools; `direct` (when they go through PgBouncer) for LISTEN and
    migrations."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": dsn, "PYTHONPATH": str(ROOT)}
    # /metrics adds up both workers (read before and after the window: server-side waits)
    env["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="taskroute-load-metrics-")
    atexit.register(shutil.rmtree, env["PROMETHEUS_MULTIPROC_DIR"], True)
    env["TASKROUTE_METRICS_TOKEN"] = METRICS_TOKEN
    if direct is not None:
        env["TASKROUTE_DIRECT_DATABASE_URL"] = direct
    for name, value in (
        ("TASKROUTE_POOL_MAX", args.pool_max),
        ("TASKROUTE_ADMISSION_QUEUE", args.admission_queue),
        ("TASKROUTE_ADMISSION_CLAIM_QUEUE", args.admission_claim_queue),
        ("TASKROUTE_ADMISSION_CLAIM_WAIT", args.admission_claim_wait),
    ):
        if value is not None:
            env[name] = str(value)
    cmd = [sys.executable, "-m", "taskroute", "serve", "--port", str(port)]
    cmd += ["--workers", str(args.workers), "--log-level", "warning"]
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


def start_pgbouncer(dsn: str, args: argparse.Namespace) -> Any:
    """The tests' private PgBouncer (tests/procs.py) in front of the bench database, with a
    server connection for every pooled one, so it adds its own cost and no queue."""
    from tests.procs import PrivatePgBouncer

    try:
        bouncer = PrivatePgBouncer(dsn, pool_size=args.workers * (args.pool_max or 10))
    except BaseException as exc:  # pytest's Skipped: the binary is missing
        raise SystemExit(f"--pgbouncer: {exc}") from None
    bouncer.start()
    return bouncer


async def measure(args: argparse.Namespace) -> None:
    dbname = f"taskroute_load_{uuid.uuid4().hex[:8]}"
    dsn = ADMIN_DSN.rsplit("/", 1)[0] + "/" + dbname
    admin = await asyncpg.connect(ADMIN_DSN)
    await admin.execute(f'CREATE DATABASE "{dbname}"')
    for setting in args.db_setting:  # e.g. vacuum_cost_delay=2ms: a per-database GUC
        name, _, value = setting.partition("=")
        await admin.execute(f'ALTER DATABASE "{dbname}" SET {name} = {value!r}')
    proc = None
    bouncer = None
    gens: list[mp.Process] = []
    try:
        await migrate_url(dsn)
        t = time.monotonic()
        tokens = await seed(dsn, args, random.Random(args.seed))
        print(f"seeded {args.tasks} tasks, {args.experts} experts in {time.monotonic() - t:.1f}s")
        if args.pgbouncer:
            bouncer = start_pgbouncer(dsn, args)
            proc, port = await start_server(bouncer.url_for(dsn), args, direct=dsn)
        else:
            proc, port = await start_server(dsn, args)
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        wall_start = time.time() + 3 + args.procs  # children need a moment to start
        for k in range(args.procs):
            d = {**vars(args), "offset": k}
            g = ctx.Process(
                target=generator,
                args=(tokens[k :: args.procs], port, wall_start, d, args.seed + k, out),
            )
            g.start()
            gens.append(g)
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, wall_start + args.ramp - time.time()))
        load0 = os.getloadavg()
        server_procs = tree(proc.pid)
        gen_procs = [psutil.Process(g.pid) for g in gens]
        pg_procs = await backends(ADMIN_DSN, dbname)
        bouncer_procs = [psutil.Process(bouncer.proc.pid)] if bouncer and bouncer.proc else []
        pss = await pss_start(dsn)
        groups = (server_procs, pg_procs, gen_procs, bouncer_procs)
        c0 = [cpu_seconds(x) for x in groups]
        m0_text = await metrics_text(port)
        m0 = loop.time()
        samples: list[dict[str, Any]] = []
        if args.timeline:
            samples = await sample_timeline(dbname, port, wall_start + args.ramp, args.seconds)
        else:
            await asyncio.sleep(args.seconds)
        c1 = [cpu_seconds(x) for x in groups]
        elapsed = loop.time() - m0
        m1_text = await metrics_text(port)
        per_kind_pg = await pss_per_kind(dsn) if pss else None
        pg_procs_late = [p for p in await backends(ADMIN_DSN, dbname) if p.pid not in c0[1]]
        late = cpu_seconds(pg_procs_late)  # backends opened during the window (all in it)
        results = [await loop.run_in_executor(None, out.get, True, 300) for _ in gens]
        for g in gens:
            g.join(30)
        check = await admin_check(dsn)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        if bouncer is not None:
            bouncer.stop()
        for g in gens:
            if g.is_alive():
                g.kill()
        await admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        await admin.close()

    def used(i: int) -> float:
        return sum(c1[i].get(pid, 0.0) - c0[i].get(pid, 0.0) for pid in c1[i]) + (
            sum(late.values()) if i == 1 else 0.0
        )

    lat = {k: [x for r in results for x in r["lat"][k]] for k in KINDS}
    counts = {k: {} for k in KINDS}
    for r in results:
        for k in KINDS:
            for o, n in r["counts"][k].items():
                counts[k][o] = counts[k].get(o, 0) + n
    ws = [x for r in results for x in r["ws_connect"]]
    ws_failed = sum(r["ws_failed"] for r in results)
    achieved = sum(r["acked_in_window"] for r in results) / args.seconds
    offered = args.experts / args.think
    answered = sum(counts[k].get("ok", 0) + counts[k].get("empty", 0) for k in KINDS)
    pg, srv, gen = used(1), used(0), used(2)
    per_req = 1000 * pg / answered if answered else float("nan")
    print()
    print(
        f"bench/load.py: {args.experts} experts, mean think {args.think:g} s, {args.tasks} tasks"
        f" / {args.skills} skills / {args.projects} projects, serve --workers {args.workers},"
        f" {args.procs} generator processes, ramp {args.ramp:g} s, window {elapsed:.0f} s"
    )
    print(f"machine: {os.cpu_count()} cores, load average at window start {load0[0]:.2f}")
    print()
    print(
        "| experts, mean think | offered cycles/s | achieved | claim p50 / p99 |"
        " heartbeat p50 / p99 | submit p50 / p99 | WS connect p99 (ramp) |"
        " Postgres CPU | Postgres per request | server CPU | generator CPU |"
        " refused (503) by kind | errors by kind |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def pp(xs: list[float]) -> str:
        return f"{pct(xs, 0.5):.1f} / {pct(xs, 0.99):.1f} ms"

    def by_kind(outcomes: tuple[str, ...], extra: str = "") -> str:
        parts = [f"{k} {sum(counts[k].get(o, 0) for o in outcomes)}" for k in KINDS]
        return ", ".join(parts + ([extra] if extra else []))

    if per_kind_pg is not None:
        # pg_stat_statements: execution time of each kind's one call (nested statements in)
        pg_req = ", ".join(
            f"{k} {ms / calls:.2f} ms" if calls else f"{k} -"
            for k, (calls, ms) in per_kind_pg.items()
        )
    else:
        pg_req = f"{per_req:.2f} ms CPU (all backends / requests answered)"
    print(
        f"| {args.experts:,}, {args.think:g} s | {offered:.0f} | {achieved:.1f} |"
        f" {pp(lat['claim'])} | {pp(lat['heartbeat'])} | {pp(lat['submit'])} |"
        f" {pct(ws, 0.99):.1f} ms |"
        f" {100 * pg / elapsed:.0f}% of a core | {pg_req} |"
        f" {100 * srv / elapsed:.0f}% | {100 * gen / elapsed:.0f}% |"
        f" {by_kind(('shed', 'unavailable'))} |"
        f" {by_kind(('error',), f'websocket {ws_failed}')} |"
    )
    print()
    source = (
        "pg_stat_statements"
        if per_kind_pg is not None
        else "/proc CPU counters of the bench database's backends (pg_stat_statements is"
        " not loaded by this server)"
    )
    print(f"  Postgres per request from {source}")
    if args.pgbouncer:
        pgb = used(3)
        print(
            f"  through PgBouncer (transaction mode, {args.workers * (args.pool_max or 10)} server"
            f" connections; statement cache off): PgBouncer {100 * pgb / elapsed:.0f}% of a core,"
            f" {1000 * pgb / answered:.2f} ms CPU per request answered"
        )
    print(
        f"  CPU per request answered: server {1000 * srv / answered:.2f} ms,"
        f" Postgres {per_req:.2f} ms"
    )
    print(f"  WS connect p50 {pct(ws, 0.5):.1f} ms over {len(ws)} connects during the ramp")
    h0, h1 = histograms(m0_text), histograms(m1_text)
    j0, j1 = job_passes(m0_text), job_passes(m1_text)
    print("  server side over the window (/metrics, both workers; bucket-interpolated):")
    for name, label in SERVER_WAITS:
        key = (name, label)
        diff = {le: h1.get(key, {}).get(le, 0.0) - h0.get(key, {}).get(le, 0.0) for le in
                h1.get(key, {})}  # fmt: skip
        what = f"{name.removeprefix('taskroute_')}{'{' + label + '}' if label else ''}"
        print(
            f"    {what:<40} n {diff.get(float('inf'), 0):>7.0f}"
            f"  p50 {1000 * bucket_quantile(diff, 0.5):7.1f} ms"
            f"  p99 {1000 * bucket_quantile(diff, 0.99):7.1f} ms"
        )
    expired = sum(
        float(v) * sign
        for text, sign in ((m1_text, 1), (m0_text, -1))
        for v in re.findall(r"^taskroute_admission_claims_expired_total (\S+)$", text, re.M)
    )
    print(f"  claims refused after waiting their whole budget (not at the door): {expired:.0f}")
    unanswered = {
        why: sum(
            float(v) * sign
            for text, sign in ((m1_text, 1), (m0_text, -1))
            for v in re.findall(
                rf'^taskroute_probes_unanswered_total{{waited_for="{why}"}} (\S+)$', text, re.M
            )
        )
        for why in ("connection", "answer")
    }
    print(
        "  held-claim probes unanswered (then this process's memory answers, or a refusal):"
        f" {unanswered['connection']:.0f} waiting for a probe connection,"
        f" {unanswered['answer']:.0f} waiting for the answer"
    )
    print("  background jobs over the window (/metrics: passes finished, seconds in them):")
    for job in sorted(j1):
        n, secs = (j1[job][i] - j0.get(job, (0.0, 0.0))[i] for i in range(2))
        print(
            f"    {job:<24} {n:5.0f} passes  {secs:7.2f} s  ({100 * secs / elapsed:5.1f}% of the"
            f" window){f', mean {1000 * secs / n:.1f} ms' if n else ''}"
        )
    for k in KINDS:
        c = counts[k]
        print(f"  {k:<9} " + "  ".join(f"{o} {n}" for o, n in sorted(c.items())))
    claimed = sum(r["claimed"] for r in results)
    acked = sum(r["acked"] for r in results)
    abandoned = sum(r["abandoned"] for r in results)
    print(
        f"  whole run: {claimed} claims received, {acked} submits acknowledged,"
        f" {abandoned} abandoned; database: {check['submitted']} submitted assignments,"
        f" {check['payouts']} payouts, {check['active']} still active"
    )
    doubles = {
        k: sum(r[k] for r in results)
        for k in ("double_held", "double_refused", "double_other", "double_nothing", "double_error")
    }
    if args.tight_loop:
        print(
            f"  tight-loop double claims: {doubles['double_held']} got the held claim,"
            f" {doubles['double_refused']} refused, {doubles['double_other']} another claim,"
            f" {doubles['double_nothing']} nothing, {doubles['double_error']} an error"
        )
    lost = claimed - acked
    ok = lost == 0 and check["payouts"] == check["submitted"] == acked
    print(f"  nothing lost, paid once: {'yes' if ok else 'NO'}")
    if args.timeline:
        print_timeline(results, samples)


async def sample_timeline(
    dbname: str, port: int, start: float, seconds: float
) -> list[dict[str, Any]]:
    """--timeline: Postgres' WAL counters, checkpointer and backends every 0.25 s; the
    background jobs' passes (/metrics) every fourth sample."""
    conn = await asyncpg.connect(ADMIN_DSN)
    out: list[dict[str, Any]] = []
    try:
        while (t := time.time() - start) < seconds:
            row = await conn.fetchrow(B["bench_load_timeline_sample"], dbname)
            assert row is not None
            d = dict(row)
            d["t"], d["waits"], d["slow"] = t, json.loads(d["waits"]), json.loads(d["slow"])
            if len(out) % 4 == 0:
                d["jobs"] = job_passes(await metrics_text(port))
            out.append(d)
            await asyncio.sleep(0.25)
    finally:
        await conn.close()
    return out


def print_timeline(results: list[dict[str, Any]], samples: list[dict[str, Any]]) -> None:
    """Per second of the window: requests and their p99/max, next to what Postgres did."""
    events = [e for r in results for e in r["events"]]
    print()
    print("  timeline (per second of the window; WAL and FPI are per second too):")
    print(
        "   s  claims  p99/max ms   hb p99   sub p99 |   WAL MB  FPI  syncs | checkpointer"
        " | backends' waits (summed over samples) | statements > 50 ms | job passes ended (s)"
    )
    prev = samples[0] if samples else None
    jobs_prev: dict[str, tuple[float, float]] | None = None
    for sec in range(int(max((e[0] for e in events), default=0)) + 1):
        lat = {k: sorted(e[2] for e in events if int(e[0]) == sec and e[1] == k)
               for k in KINDS}  # fmt: skip
        cl = lat["claim"]
        row = [s for s in samples if int(s["t"]) == sec]
        wal = fpi = syncs = 0.0
        waits: dict[str, int] = {}
        slow: list[str] = []
        cp = set()
        for s in row:
            if prev is not None:
                wal += (s["wal_bytes"] - prev["wal_bytes"]) / 1e6
                fpi += s["wal_fpi"] - prev["wal_fpi"]
                syncs += s["wal_sync"] - prev["wal_sync"]
            prev = s
            cp.add(s["checkpointer"])
            for e, n in s["waits"].items():
                waits[e] = waits.get(e, 0) + n
            slow += s["slow"]
        ended: dict[str, float] = {}
        for s in row:
            if "jobs" not in s:
                continue
            if jobs_prev is not None:
                for job, (n, secs) in s["jobs"].items():
                    n0, secs0 = jobs_prev.get(job, (0.0, 0.0))
                    if n > n0 and secs - secs0 >= 0.005:
                        ended[job] = ended.get(job, 0.0) + secs - secs0
            jobs_prev = s["jobs"]
        top = ", ".join(f"{e} {n}" for e, n in sorted(waits.items(), key=lambda x: -x[1])[:4])
        print(
            f"  {sec:>3} {len(cl):>6} {pct(cl, 0.99):>6.0f}/{(1000 * cl[-1] if cl else 0):<5.0f}"
            f" {pct(lat['heartbeat'], 0.99):>7.0f} {pct(lat['submit'], 0.99):>8.0f} |"
            f" {wal:>7.1f} {fpi:>5.0f} {syncs:>5.0f} | {'/'.join(sorted(cp)):<12} | {top} |"
            f" {'; '.join(sorted(set(slow)))[:120]} |"
            f" {', '.join(f'{j} {v:.2f}' for j, v in sorted(ended.items(), key=lambda x: -x[1]))}"
        )


async def admin_check(dsn: str) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(B["bench_load_check"])
        assert row is not None
        return dict(row)
    finally:
        await conn.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--experts", type=int, default=1000)
    p.add_argument("--think", type=float, default=20.0, help="mean think time, seconds")
    p.add_argument("--seconds", type=float, default=60.0, help="measured window after the ramp")
    p.add_argument("--ramp", type=float, default=20.0, help="seconds over which experts connect")
    p.add_argument("--tasks", type=int, default=30_000)
    p.add_argument("--skills", type=int, default=50)
    p.add_argument("--projects", type=int, default=10)
    p.add_argument("--workers", type=int, default=2, help="server processes")
    p.add_argument("--procs", type=int, default=4, help="load generator processes")
    p.add_argument("--pool-max", type=int, default=None, help="TASKROUTE_POOL_MAX")
    p.add_argument("--admission-queue", type=int, default=None)
    p.add_argument("--admission-claim-queue", type=int, default=None)
    p.add_argument(
        "--db-setting", action="append", default=[], metavar="NAME=VALUE",
        help="ALTER DATABASE ... SET for the bench database (repeatable)",
    )  # fmt: skip
    p.add_argument("--admission-claim-wait", type=float, default=None, help="`inf`: no budget")
    p.add_argument(
        "--tight-loop", type=int, default=0, metavar="N",
        help="of the experts, N claim in a tight loop (no think time, no heartbeat) and ask"
        " every claim twice (a double click): the second must get the held claim",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=19)
    p.add_argument(
        "--pgbouncer",
        action="store_true",
        help="request pools through a PgBouncer in transaction mode (LISTEN direct)",
    )
    p.add_argument(
        "--timeline",
        action="store_true",
        help="print per second: request p99s beside WAL volume, checkpoints and backend waits",
    )
    args = p.parse_args()
    needed = args.experts / args.think * (args.ramp + args.seconds + args.think)
    if needed > args.tasks * 0.9:
        print(f"warning: about {needed:.0f} cycles may exhaust {args.tasks} tasks", flush=True)
    asyncio.run(measure(args))


if __name__ == "__main__":
    main()
