"""What a refused GraphQL document costs the server, and whether /healthz stays fast meanwhile.

Starts `taskroute serve` (one process) from `--root` (this tree by default; pass a copy of an
older tree to measure the code before a change), creates an expert, and for each hostile
document (nested fragment fan-out, many aliases, deep nesting, many tiny fragments, a body at
the token limit padded to the body limit) sends it a few times, each with a fresh alias or
name so no document cache can have seen it, and prints the server process's CPU time per
request (psutil, the mean over `--repeat` requests: the clock ticks in 10 ms) and the
answer's status and codes. Then it sends the worst document from a few
concurrent clients for `--seconds` while another client reads /healthz every 50 ms, and prints
/healthz's latency (p50, p99, max).

    PYTHONPATH=. .venv/bin/python bench/graphql_cost.py [--root /work/main] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
ADMIN_DSN = os.environ.get("TASKROUTE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
ADMIN_TOKEN = "bench-admin-token"
# the default TASKROUTE_MAX_BODY_BYTES (config.py): bodies past it are refused unread
BODY_LIMIT = 32 * 1024 * 1024


def fan_out(n: int) -> Callable[[str], str]:
    """n fragments each spreading the next twice: 2**n fields from ~40 bytes per fragment."""

    def doc(tag: str) -> str:
        frags = [f"fragment F{i} on Query {{ ...F{i + 1} ...F{i + 1} }}" for i in range(n)]
        frags.append(f"fragment F{n} on Query {{ {tag}: __typename }}")
        return "query { ...F0 } " + " ".join(frags)

    return doc


def wide_fan_out(tag: str) -> str:
    """Fewer levels, more spreads each: within the 5000-token limit."""
    levels, width = 6, 60
    frags = [f"fragment W{i} on Query {{ " + f"...W{i + 1} " * width + "}" for i in range(levels)]
    frags.append(f"fragment W{levels} on Query {{ {tag}: __typename }}")
    return "query { ...W0 } " + " ".join(frags)


def aliases(n: int) -> Callable[[str], str]:
    return lambda tag: "{ " + " ".join(f"{tag}{i}: me {{ role }}" for i in range(n)) + " }"


def deep(tag: str) -> str:
    # as deep as the parser takes without exhausting its stack
    return f"query {tag} {{ " + "me { " * 300 + "role" + " }" * 301


def tiny_fragments(tag: str) -> str:
    """Many one-field fragments all spread from the operation: many definitions, no fan-out."""
    n = 700
    spreads = " ".join(f"...T{i}" for i in range(n))
    frags = " ".join(f"fragment T{i} on Query {{ {tag}: __typename }}" for i in range(n))
    return f"query {{ {spreads} }} {frags}"


def padded(tag: str) -> str:
    """The fan-out document plus a comment up to the body limit: the lexer reads every byte."""
    head = fan_out(20)(tag) + "\n#"
    return head + "x" * (BODY_LIMIT - len(head) - 200)


DOCUMENTS: list[tuple[str, Callable[[str], str]]] = [
    ("fan-out, 18 fragments x2", fan_out(18)),
    ("fan-out, 20 fragments x2", fan_out(20)),
    ("fan-out, 6 fragments x60", wide_fan_out),
    ("495 aliases of { me { role } }", aliases(495)),
    ("300 levels deep", deep),
    ("700 tiny fragments", tiny_fragments),
    ("fan-out 20 padded to the body limit", padded),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start_server(dsn: str, root: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": dsn, "PYTHONPATH": str(root)}
    env["TASKROUTE_ADMIN_TOKEN"] = ADMIN_TOKEN
    env["TASKROUTE_DATA_DIR"] = f"/tmp/graphql-cost-{port}"
    cmd = [sys.executable, "-m", "taskroute", "serve", "--port", str(port)]
    cmd += ["--workers", "1", "--log-level", "warning"]
    # cwd=root: the tree's own package is imported, not this checkout's editable install
    proc = subprocess.Popen(cmd, env=env, cwd=str(root))
    async with httpx.AsyncClient() as client:
        deadline = time.monotonic() + 300  # migrations on a busy machine
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if (await client.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                    return proc, port
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not become ready")


async def post(client: httpx.AsyncClient, token: str, query: str) -> tuple[int, list[str]]:
    r = await client.post(
        "/graphql",
        json={"query": query},
        headers={"Authorization": f"Bearer {token}"},
        timeout=600,
    )
    body = r.json()
    codes = [e.get("extensions", {}).get("code") for e in body.get("errors", [])]
    if not codes and "error" in body:
        codes = [body["error"].get("code")]
    return r.status_code, codes


async def measure(args: argparse.Namespace) -> None:
    dbname = f"graphql_cost_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(ADMIN_DSN)
    await admin.execute(f'CREATE DATABASE "{dbname}"')
    proc = None
    try:
        proc, port = await start_server(ADMIN_DSN.rsplit("/", 1)[0] + "/" + dbname, args.root)
        server = psutil.Process(proc.pid)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            created = await client.post(
                "/graphql",
                json={
                    "query": 'mutation { createExpert(name: "e", skills: [{skill: "s"}]) '
                    "{ token } }"
                },
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            )
            token = created.json()["data"]["createExpert"]["token"]
            print(f"root: {args.root}")
            print(f"{'document':40} {'bytes':>9} {'CPU ms/request':>15}  answer")
            for n, (label, make) in enumerate(DOCUMENTS):
                if any(part in label for part in args.skip):
                    continue
                cpu = []
                answer: Any = None
                for rep in range(args.repeat):
                    query = make(f"d{n}r{rep}")
                    before = server.cpu_times()
                    status, codes = await post(client, token, query)
                    after = server.cpu_times()
                    cpu.append((after.user + after.system - before.user - before.system) * 1000)
                    answer = (status, sorted(set(codes)))
                print(f"{label:40} {len(query):>9} {statistics.fmean(cpu):>15.1f}  {answer}")
            await healthz_under_load(client, token, args, clients=0)  # the machine's own noise
            await healthz_under_load(client, token, args, clients=args.clients)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        await admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        await admin.close()


async def healthz_under_load(
    client: httpx.AsyncClient, token: str, args: argparse.Namespace, clients: int
) -> None:
    """The worst documents from `clients` clients at once while /healthz is read."""
    stop = time.monotonic() + args.seconds
    sent = 0

    async def attacker(k: int) -> None:
        nonlocal sent
        i = 0
        while time.monotonic() < stop:
            query = fan_out(20)(f"h{k}x{i}") if args.attack == "fan-out" else "{ __typename }"
            await post(client, token, query)
            i += 1
            sent += 1

    latencies: list[float] = []

    async def prober() -> None:
        async with httpx.AsyncClient(base_url=client.base_url) as probe:
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                r = await probe.get("/healthz", timeout=600)
                latencies.append((time.perf_counter() - t0) * 1000)
                assert r.status_code == 200
                await asyncio.sleep(0.05)

    await asyncio.gather(prober(), *(attacker(k) for k in range(clients)))
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"/healthz while {clients} clients send {args.attack} documents for "
        f"{args.seconds:.0f} s ({sent} documents): {len(latencies)} probes, "
        f"p50 {statistics.median(latencies):.1f} ms, p99 {p99:.1f} ms, "
        f"max {latencies[-1]:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the taskroute tree to serve")
    parser.add_argument("--repeat", type=int, default=10, help="requests per document")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--attack",
        choices=("fan-out", "trivial"),
        default="fan-out",
        help="what the clients send while /healthz is read: the 20-fragment fan-out, or"
        " `{ __typename }` (the cheapest request, for comparison)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        help="leave out documents whose label contains this (the code before the cost check"
        " never finished the 6 x 60 fan-out)",
    )
    args = parser.parse_args()
    asyncio.run(measure(args))


if __name__ == "__main__":
    main()
