"""Ingest throughput (issue 16): a big batch through a real server, next to its floors.

    PYTHONPATH=. .venv/bin/python bench/ingest.py                 # 20k tasks x 2 KB, both stores
    PYTHONPATH=. .venv/bin/python bench/ingest.py --tasks 2000 --per-request 1000   # a quick check

Per store (--stores folder,s3) in a fresh database: starts `taskroute serve` (and for S3 a moto
server process), posts the batch through REST as requests of --per-request tasks (each
answered 202 at once), and waits until every task is open. The service's rate is tasks per
second from the first request sent to the last task open (accepting, storing the request,
writing the payloads, opening the tasks). Then, in the same run and with the server stopped,
the floors:

- COPY: the same rows (items with their inline payload and blob key, one task each) copied
  into the same tables with asyncpg's `copy_records_to_table`, in one transaction; rows built
  beforehand, so only the database's work is timed. Target: service >= 0.5 of it (folder).
- moto PUT (S3 only): the same payload bytes PUT by a plain boto3 client with the store's
  client settings and the same concurrency (TASKROUTE_BLOB_CONCURRENCY, --concurrency) from a
  thread pool. Target: service >= 0.8 of it.

Needs Postgres at 127.0.0.1:5432 (trust auth) or TASKROUTE_TEST_PG.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import boto3
import httpx
from botocore.config import Config

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from taskroute.db.queries import load  # noqa: E402

B = load(Path(__file__).resolve().parent / "sql")
ADMIN = "bench-admin"
PG = os.environ.get("TASKROUTE_TEST_PG") or "postgresql://postgres@127.0.0.1:5432/postgres"
TARGET_RATE = 10_000
TARGET_COPY_SHARE = 0.5
TARGET_PUT_SHARE = 0.8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def payloads(n: int, size: int) -> list[dict]:
    # Distinct random text per task: content addressing would store repeated payloads once,
    # and pglz would squeeze repeated text to nothing, which real payloads never are.
    width = size - 20  # the canonical JSON around the text adds ~20 bytes
    text = base64.b64encode(random.Random(7).randbytes(n * width)).decode()
    return [{"n": i, "text": text[i * width : (i + 1) * width]} for i in range(n)]


def canonical(payload: dict) -> str:
    # what the service stores and hashes (taskroute.resolvers.json_values.canonical_json)
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass
class Service:
    seconds: float
    accept_ms: tuple[float, float]
    accepted_after: float
    state: str
    open_tasks: int


async def through_service(
    http: httpx.AsyncClient, tasks: list[dict], per_request: int
) -> tuple[Service, str]:
    r = await http.post(
        "/graphql",
        headers={"Authorization": f"Bearer {ADMIN}"},
        json={"query": 'mutation { createCustomer(name: "b") { token } }'},
    )
    auth = {"Authorization": f"Bearer {r.json()['data']['createCustomer']['token']}"}
    bodies = [tasks[i : i + per_request] for i in range(0, len(tasks), per_request)]
    # Encoded beforehand: the generator's JSON encoding is not the service's time.
    first = json.dumps({"name": "bench", "tasks": bodies[0]}).encode()
    rest = [json.dumps({"tasks": b}).encode() for b in bodies[1:]]
    headers = {**auth, "Content-Type": "application/json"}
    accept: list[float] = []
    t0 = time.perf_counter()
    r = await http.post("/v1/projects", headers=headers, content=first)
    accept.append(time.perf_counter() - t0)
    assert r.status_code == 202, r.text
    pid = r.json()["project_id"]
    for body in rest:
        t = time.perf_counter()
        r = await http.post(f"/v1/projects/{pid}/tasks", headers=headers, content=body)
        accept.append(time.perf_counter() - t)
        assert r.status_code == 202, r.text
    accepted = time.perf_counter() - t0
    while True:
        ing = (await http.get(f"/v1/projects/{pid}", headers=auth)).json()["ingest"]
        if ing["state"] in ("done", "failed"):
            break
        await asyncio.sleep(0.02)
    total = time.perf_counter() - t0
    found = Service(total, (min(accept) * 1000, max(accept) * 1000), accepted, ing["state"], 0)
    return found, pid


async def copy_floor(dsn: str, texts: list[str]) -> float:
    """Seconds to COPY the same items and tasks rows into the same tables."""
    db = await asyncpg.connect(dsn)
    try:
        p = await db.fetchrow(B["bench_ingest_floor_project"])
        ids = [uuid.uuid4() for _ in texts]
        items = [
            (i, p["id"], "grading", None, t, hashlib.sha256(t.encode()).hexdigest(),
             len(t.encode()), None)
            for i, t in zip(ids, texts, strict=True)
        ]  # fmt: skip
        tasks = [
            (i, p["id"], "grading", 0, p["eff_priority"], p["min_quality"], p["max_retries"],
             "open")
            for i in ids
        ]  # fmt: skip
        t0 = time.perf_counter()
        async with db.transaction():
            await db.copy_records_to_table(
                "items",
                records=items,
                columns=["id", "project_id", "skill", "external_id", "payload", "payload_key",
                         "payload_bytes", "gold_answer"],
            )  # fmt: skip
            await db.copy_records_to_table(
                "tasks",
                records=tasks,
                columns=["item_id", "project_id", "skill", "priority", "eff_priority",
                         "min_quality", "max_retries", "status"],
            )  # fmt: skip
        seconds = time.perf_counter() - t0
        assert await db.fetchval(B["bench_ingest_open_count"], p["id"]) == len(texts)
        return seconds
    finally:
        await db.close()


def put_floor(endpoint: str, bucket: str, texts: list[str], concurrency: int) -> float:
    """Seconds for a plain boto3 client to PUT the same bytes at the same concurrency."""
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        # the store's client settings (taskroute.storage.s3.S3BlobStore)
        config=Config(
            max_pool_connections=concurrency,
            retries={"max_attempts": 2, "mode": "standard"},
            request_checksum_calculation="when_required",
            s3={"addressing_style": "path"},
        ),
    )

    def put(t: str) -> None:
        key = hashlib.sha256(t.encode()).hexdigest()
        client.put_object(
            Bucket=bucket, Key=f"floor/{key[:2]}/{key}.json", Body=t.encode(),
            ContentType="application/json",
        )  # fmt: skip

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(put, texts))
    return time.perf_counter() - t0


async def run(kind: str, args: argparse.Namespace, tmp: Path) -> None:
    dbname = f"taskroute_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = await asyncpg.connect(PG)
    await admin.execute(f'CREATE DATABASE "{dbname}"')
    dsn = PG.rsplit("/", 1)[0] + "/" + dbname
    moto: subprocess.Popen | None = None
    server: subprocess.Popen | None = None
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": dsn,
        "TASKROUTE_ADMIN_TOKEN": ADMIN,
        "TASKROUTE_DATA_DIR": str(tmp / kind),
        "TASKROUTE_MAX_BODY_BYTES": str(256 * 1024 * 1024),
        "TASKROUTE_BLOB_CONCURRENCY": str(args.concurrency),
    }
    endpoint = ""
    tasks = [{"skill": "grading", "payload": p} for p in payloads(args.tasks, args.size)]
    texts = [canonical(t["payload"]) for t in tasks]
    try:
        if kind == "s3":
            mport = free_port()
            moto = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(mport)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            endpoint = f"http://127.0.0.1:{mport}"
            wait_http(endpoint + "/moto-api/")
            env.update(
                AWS_ENDPOINT_URL=endpoint,
                AWS_ACCESS_KEY_ID="bench",
                AWS_SECRET_ACCESS_KEY="bench",
                AWS_DEFAULT_REGION="us-east-1",
                TASKROUTE_BLOB_URL="s3://bench/payloads",
            )
            boto3.client(
                "s3",
                endpoint_url=endpoint,
                region_name="us-east-1",
                aws_access_key_id="bench",
                aws_secret_access_key="bench",
            ).create_bucket(Bucket="bench")
        else:
            env["TASKROUTE_BLOB_URL"] = (tmp / kind / "blobs").as_uri()
        port = free_port()
        cmd = [sys.executable, "-m", "taskroute", "serve", "--port", str(port)]
        cmd += ["--workers", str(args.workers), "--log-level", "warning"]
        server = subprocess.Popen(cmd, env=env, cwd=tmp)
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/healthz")
        async with httpx.AsyncClient(base_url=base, timeout=300) as http:
            svc, pid = await through_service(http, tasks, args.per_request)
        db = await asyncpg.connect(dsn)
        svc.open_tasks = await db.fetchval(B["bench_ingest_open_count"], uuid.UUID(pid))
        await db.close()
        server.terminate()
        server.wait(30)
        server = None
        # The floors, with the server stopped (it would only compete for the CPU).
        copy_s = await copy_floor(dsn, texts)
        put_s = put_floor(endpoint, "bench", texts, args.concurrency) if kind == "s3" else None
    finally:
        for p in (server, moto):
            if p is None:
                continue
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:  # moto ignores SIGTERM while busy
                p.kill()
                p.wait()
        await admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        await admin.close()

    n = args.tasks
    rate = n / svc.seconds
    copy_rate = n / copy_s
    print(
        f"{kind:6} service  {rate:9,.0f} tasks/s  ({n} tasks in {svc.seconds:.2f} s; accepted"
        f" after {svc.accepted_after:.2f} s, {svc.accept_ms[0]:.0f}-{svc.accept_ms[1]:.0f} ms"
        f" per request; state {svc.state}, open {svc.open_tasks})"
    )
    verdict = ""
    if kind == "folder":
        met = rate >= TARGET_RATE and rate >= TARGET_COPY_SHARE * copy_rate
        verdict = (
            f"   target >= {TARGET_RATE:,} tasks/s and >= {TARGET_COPY_SHARE} of COPY:"
            f" {'met' if met else 'NOT met'}"
        )
    print(
        f"{kind:6} COPY     {copy_rate:9,.0f} tasks/s  ({copy_s:.2f} s)"
        f"   service/COPY {rate / copy_rate:.2f}{verdict}"
    )
    if put_s is not None:
        put_rate = n / put_s
        share = rate / put_rate
        print(
            f"{kind:6} moto PUT {put_rate:9,.0f} PUT/s    ({put_s:.2f} s,"
            f" {args.concurrency} threads)   service/PUT {share:.2f}"
            f"   target >= {TARGET_PUT_SHARE}: {'met' if share >= TARGET_PUT_SHARE else 'NOT met'}"
        )
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=2048, help="payload bytes (canonical JSON)")
    ap.add_argument("--per-request", type=int, default=10_000)
    ap.add_argument("--stores", default="folder,s3")
    ap.add_argument("--workers", type=int, default=1, help="server processes")
    ap.add_argument("--concurrency", type=int, default=16, help="TASKROUTE_BLOB_CONCURRENCY")
    args = ap.parse_args()
    print(
        f"# bench/ingest.py: {args.tasks} tasks x {args.size} B, {args.per_request}/request,"
        f" serve --workers {args.workers}, blob concurrency {args.concurrency},"
        f" {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.stores.split(","):
            asyncio.run(run(kind, args, Path(tmp)))


if __name__ == "__main__":
    main()
