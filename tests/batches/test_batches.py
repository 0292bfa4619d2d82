"""Batches over both payload stores (a folder; S3 through moto's HTTP server): sync below 100
tasks, background ingest from 100, payload delivery by the lease, audit, limits."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import Any

import asyncpg
import httpx
import pytest

from taskroute.resolvers import ingest as ingest_module
from taskroute.resolvers import payloads as payloads_module
from taskroute.storage import payload_links

from ..clock import DbClock
from ..helpers import ADMIN_TOKEN, CLAIM, GraphQLError, wait_for
from .stores import SUITE_SETTINGS, Serve, StoreHandle, assert_open_tasks_have_payloads

BIG = "x" * 500  # over the suite's 200-byte inline threshold: delivered by URL

PROJECT_STATUS = """query($p: ID!) { project(id: $p) { status
  progress { total open claimed done failed }
  ingest { state tasksStored tasksTotal error } } }"""

ADD_TASKS = """mutation($p: ID!, $t: [TaskInput!]!) { addTasks(projectId: $p, tasks: $t) {
  accepted added project { id status } ingest { state tasksStored tasksTotal error } } }"""


AUDIT = """query($p: ID, $e: ID, $a: String, $l: Int!) {
  auditLog(projectId: $p, expertId: $e, after: $a, limit: $l) {
    nextCursor entries { cursor expertId customerId projectId taskId action at } } }"""


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def key_of(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def big_tasks(n: int, skill: str = "grading", start: int = 0, **extra: Any) -> list[dict]:
    return [
        {"skill": skill, "payload": {"text": BIG, "n": i}, **extra} for i in range(start, start + n)
    ]


def small_tasks(n: int, skill: str = "grading", start: int = 0, **extra: Any) -> list[dict]:
    return [{"skill": skill, "payload": {"n": i}, **extra} for i in range(start, start + n)]


async def fetch_payload(server_url: str, url: str, token: str | None) -> httpx.Response:
    """GET a payload URL like a client: the server's answer, or (S3) the presigned object."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        r = await http.get(url, headers=headers)
        if r.status_code == 307:
            # the presigned S3 URL carries its own signature: no bearer token to S3
            r = await http.get(r.headers["location"])
    return r


async def test_small_batch_is_stored_before_the_answer(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection
) -> None:
    srv, api = await serve()
    customer = await api.create_customer()
    tasks = [
        {"skill": "grading", "payload": {"n": 1}, "gold": {"grade": 3}, "externalId": "a"},
        {"skill": "grading", "payload": {"text": BIG}, "externalId": "b"},
    ]
    created = await api.create_project(customer["token"], tasks)
    assert created["accepted"] is False
    assert created["project"]["status"] == "active"
    # REST: 201 and the same storage rules.
    r = await api.rest(
        "POST",
        "/v1/projects",
        customer["token"],
        json={"name": "rest", "tasks": [{"skill": "grading", "payload": {"n": 2}}]},
    )
    assert r.status_code == 201, r.text

    rows = await db.fetch(
        "SELECT i.external_id, i.payload, i.payload_key, i.payload_bytes, t.status"
        " FROM items i LEFT JOIN tasks t ON t.item_id = i.id ORDER BY i.external_id NULLS LAST"
    )
    # A gold item gets no claimable slot of its own: the quality rules serve it from the pool.
    assert [r["status"] for r in rows] == [None, "open", "open"]
    small, big, rest = rows
    # Every payload is in the store under its content address, exactly its canonical JSON,
    # without the gold answer; small ones also stay inline, large ones only by key.
    assert small["payload_key"] == key_of({"n": 1})
    assert store.read(small["payload_key"]) == canonical({"n": 1})
    assert json.loads(small["payload"]) == {"n": 1}
    assert big["payload"] is None
    assert store.read(big["payload_key"]) == canonical({"text": BIG})
    assert big["payload_bytes"] == len(canonical({"text": BIG}))
    assert rest["payload_key"] == key_of({"n": 2})
    assert b"grade" not in store.read(small["payload_key"])
    await assert_open_tasks_have_payloads(db, store)


class LinkClock:
    """Payload links are signed and checked on the server's wall clock (`payload_links.time`);
    the in-process server shares this module, so a test moves that clock instead of sleeping."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset = 0.0
        clock = self

        class _Time:
            @staticmethod
            def time() -> float:
                return time.time() + clock.offset

        monkeypatch.setattr(payload_links, "time", _Time)

    def advance(self, seconds: float) -> None:
        self.offset += seconds


async def test_claim_delivers_inline_or_by_url_only_to_the_lease_holder(
    serve: Serve,
    store: StoreHandle,
    db: asyncpg.Connection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    links = LinkClock(monkeypatch)
    srv, api = await serve()
    customer = await api.create_customer()
    ada = await api.create_expert(["small"], name="ada")
    bob = await api.create_expert(["big"], name="bob")
    eve = await api.create_expert(["big"], name="eve")
    await api.create_project(
        customer["token"],
        [
            {"skill": "small", "payload": {"n": 1}},
            {"skill": "big", "payload": {"text": BIG, "n": 1}},
            {"skill": "big", "payload": {"text": BIG, "n": 2}},
        ],
    )

    small = (await api.gql(CLAIM, token=ada["token"]))["claimNextTask"]
    assert small["task"]["payload"] == {"n": 1}  # inline
    assert small["task"]["payloadUrl"] is None

    big = (await api.gql(CLAIM, token=bob["token"]))["claimNextTask"]
    assert big["task"]["payload"] is None
    url = big["task"]["payloadUrl"]
    assert url.startswith(f"/v1/payloads/{big['assignmentId']}?")

    r = await fetch_payload(srv.url, url, bob["token"])
    assert r.status_code == 200, r.text
    assert json.loads(r.content)["text"] == BIG
    # REST shows the same claim (the held one) with a URL too.
    r = await api.rest("POST", "/v1/tasks/next", bob["token"])
    assert r.status_code == 200 and r.json()["task"]["payload_url"].startswith("/v1/payloads/")

    # Another expert (holding a claim of their own) cannot use bob's URL ...
    other = (await api.gql(CLAIM, token=eve["token"]))["claimNextTask"]
    assert other["task"]["id"] != big["task"]["id"]
    r = await fetch_payload(srv.url, url, eve["token"])
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
    # ... nor anyone without a token, nor a customer; a forged signature is not found.
    assert (await fetch_payload(srv.url, url, None)).status_code == 401
    assert (await fetch_payload(srv.url, url, customer["token"])).status_code == 404
    forged = url.replace("sig=", "sig=A")
    assert (await fetch_payload(srv.url, forged, bob["token"])).status_code == 404
    other_task = other["task"]["payloadUrl"].split("?")[0] + "?" + url.split("?")[1]
    assert (await fetch_payload(srv.url, other_task, eve["token"])).status_code == 404

    # After the submit the lease is gone: the URL no longer works.
    await api.submit(bob["token"], big["assignmentId"], {"ok": True})
    r = await fetch_payload(srv.url, url, bob["token"])
    assert r.status_code == 409 and r.json()["error"]["code"] == "LEASE_EXPIRED"

    # A URL past its expiry (payload_url_ttl) is refused even with a live lease.
    eve_url = other["task"]["payloadUrl"]
    assert (await fetch_payload(srv.url, eve_url, eve["token"])).status_code == 200
    links.advance(SUITE_SETTINGS["payload_url_ttl"] + 1)
    await api.heartbeat(eve["token"], other["assignmentId"])
    r = await fetch_payload(srv.url, eve_url, eve["token"])
    assert r.status_code == 410 and r.json()["error"]["code"] == "LINK_EXPIRED"
    # Claiming again returns the held claim with a fresh URL that works.
    again = (await api.gql(CLAIM, token=eve["token"]))["claimNextTask"]
    assert again["assignmentId"] == other["assignmentId"]
    assert (await fetch_payload(srv.url, again["task"]["payloadUrl"], eve["token"])).is_success

    # Audit: every payload an expert received has an entry (claims and URL fetches).
    audit = await db.fetch("SELECT expert_id::text, task_id::text, action FROM audit_log")
    got = [(r["expert_id"], r["task_id"], r["action"]) for r in audit]
    assert got.count((ada["id"], small["task"]["id"], "claim")) == 1
    assert got.count((bob["id"], big["task"]["id"], "claim")) == 2  # GraphQL + REST re-delivery
    assert got.count((bob["id"], big["task"]["id"], "payload_fetch")) == 1
    assert got.count((eve["id"], other["task"]["id"], "claim")) == 2
    assert got.count((eve["id"], other["task"]["id"], "payload_fetch")) == 2
    assert len(got) == 8  # refused fetches left no entry


async def test_payload_url_dies_with_the_lease(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection, clock: DbClock
) -> None:
    srv, api = await serve()
    customer = await api.create_customer()
    expert = await api.create_expert(["big"])
    await api.create_project(customer["token"], big_tasks(1, "big"), leaseSeconds=60)
    claim = (await api.gql(CLAIM, token=expert["token"]))["claimNextTask"]
    await clock.advance(61)
    r = await fetch_payload(srv.url, claim["task"]["payloadUrl"], expert["token"])
    assert r.status_code == 409 and r.json()["error"]["code"] == "LEASE_EXPIRED"
    assert await db.fetchval("SELECT count(*) FROM audit_log WHERE action = 'payload_fetch'") == 0


async def test_large_batch_is_accepted_at_once_and_ingested(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection
) -> None:
    srv, api = await serve()
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    tasks = big_tasks(120) + small_tasks(130, start=120)
    r = await api.rest(
        "POST", "/v1/projects", customer["token"], json={"name": "big", "tasks": tasks}
    )
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status_url"] == f"/v1/projects/{body['project_id']}"

    async def done() -> dict | None:
        got = await api.rest("GET", body["status_url"], customer["token"])
        assert got.status_code == 200
        status = got.json()
        return status if status["ingest"]["state"] == "done" else None

    status = await wait_for(done)
    assert status["status"] == "active"
    assert status["ingest"] == {
        "state": "done",
        "tasks_stored": 250,
        "tasks_total": 250,
        "error": None,
        "jobs": 1,
    }
    assert status["progress"]["open"] == 250
    data = await api.gql(PROJECT_STATUS, {"p": body["project_id"]}, customer["token"])
    assert data["project"]["ingest"] == {
        "state": "done",
        "tasksStored": 250,
        "tasksTotal": 250,
        "error": None,
    }
    claim = (await api.gql(CLAIM, token=expert["token"]))["claimNextTask"]
    assert claim["task"]["projectId"] == body["project_id"]

    assert await db.fetchval("SELECT count(*) FROM items") == 250
    assert await db.fetchval("SELECT count(*) FROM tasks") == 250
    assert await db.fetchval("SELECT count(*) FROM ingest_chunks") == 0
    assert await assert_open_tasks_have_payloads(db, store) == 250
    # The stored request went with its chunks: the store holds the payloads, nothing else.
    assert store.keys() == {key_of(t["payload"]) for t in tasks}
    assert await db.fetchval("SELECT count(*) FROM blob_deletions") == 0


async def test_a_queued_request_waits_in_the_blob_store(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection
) -> None:
    """The 202 comes once the request is durable in the blob store (a blob per chunk), not in
    Postgres; the worker reads it from there and deletes it once its tasks committed."""
    srv, api = await serve(ingest_chunk_tasks=100)
    tasks = big_tasks(250)
    # Payload writers wait for this lock (the retention job's): the worker claims a chunk,
    # then waits before writing its payloads, so the request stays queued meanwhile.
    tx = db.transaction()
    await tx.start()
    await db.execute("SELECT pg_advisory_xact_lock($1)", payloads_module.BLOB_WRITES_LOCK_KEY)
    customer = await api.create_customer()
    r = await api.rest(
        "POST", "/v1/projects", customer["token"], json={"name": "q", "tasks": tasks}
    )
    assert r.status_code == 202, r.text
    pid = r.json()["project_id"]
    chunks = await db.fetch(
        "SELECT chunk_no, body, body_key, payload_keys FROM ingest_chunks ORDER BY 1"
    )
    assert [c["chunk_no"] for c in chunks] == [0, 1, 2]
    assert all(c["body"] is None for c in chunks), "the request is not in Postgres"
    payload_keys = [key_of(t["payload"]) for t in tasks]
    assert [k for c in chunks for k in c["payload_keys"]] == payload_keys
    request_keys = {c["body_key"] for c in chunks}
    assert store.keys() == request_keys, "only the request is stored yet: no payloads"
    for c, first in zip(chunks, (0, 100, 200), strict=True):
        lines = store.read(c["body_key"]).decode().split("\n")
        assert [line.split("\t")[1].encode() for line in lines] == [
            canonical(t["payload"]) for t in tasks[first : first + 100]
        ]
    await tx.rollback()  # the worker goes on

    async def done() -> bool:
        got = (await api.rest("GET", f"/v1/projects/{pid}", customer["token"])).json()
        return got["ingest"]["state"] == "done"

    await wait_for(done)
    assert await db.fetchval("SELECT count(*) FROM tasks") == 250
    assert store.keys() == set(payload_keys), "each chunk's text went once its tasks committed"
    assert await db.fetchval("SELECT count(*) FROM blob_deletions") == 0


async def test_graphql_large_batch_and_add_tasks_are_idempotent_by_external_id(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection
) -> None:
    srv, api = await serve()
    customer = await api.create_customer()
    created = await api.create_project(
        customer["token"],
        [dict(t, externalId=f"e{i}") for i, t in enumerate(big_tasks(150))],
        wait=False,
    )
    assert created["accepted"] is True
    assert created["project"]["status"] == "ingesting"
    pid = created["project"]["id"]

    async def ingested() -> bool:
        d = await api.gql(PROJECT_STATUS, {"p": pid}, customer["token"])
        return d["project"]["ingest"]["state"] == "done"

    await wait_for(ingested)

    # Sync addTasks: 10 new, then the same 10 again (nothing new).
    ten = [dict(t, externalId=f"f{i}") for i, t in enumerate(small_tasks(10))]
    first = (await api.gql(ADD_TASKS, {"p": pid, "t": ten}, customer["token"]))["addTasks"]
    assert (first["accepted"], first["added"]) == (False, 10)
    again = (await api.gql(ADD_TASKS, {"p": pid, "t": ten}, customer["token"]))["addTasks"]
    assert (again["accepted"], again["added"]) == (False, 0)
    # Re-sending the whole first batch (async) and 50 more through REST: only 50 are new.
    resend = [dict(t, external_id=f"e{i}") for i, t in enumerate(big_tasks(200))]
    r = await api.rest(
        "POST", f"/v1/projects/{pid}/tasks", customer["token"], json={"tasks": resend}
    )
    assert r.status_code == 202, r.text
    assert r.json()["job_id"]

    async def all_done() -> bool:
        d = await api.gql(PROJECT_STATUS, {"p": pid}, customer["token"])
        ing = d["project"]["ingest"]
        return ing["state"] == "done" and ing["tasksStored"] == 350

    await wait_for(all_done)
    progress = await api.progress(customer["token"], pid)
    assert progress["total"] == 210

    assert await db.fetchval("SELECT count(*) FROM items") == 210
    assert await db.fetchval("SELECT count(DISTINCT external_id) FROM items") == 210
    await assert_open_tasks_have_payloads(db, store)


async def test_object_store_down(serve: Serve, store: StoreHandle, db: asyncpg.Connection) -> None:
    srv, api = await serve(ingest_chunk_tasks=50)
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    pid = (await api.create_project(customer["token"], small_tasks(3)))["project"]["id"]
    store.break_()

    # Synchronous path: refused with UNAVAILABLE, and nothing at all was written.
    with pytest.raises(GraphQLError) as err:
        await api.create_project(customer["token"], small_tasks(5), name="during outage")
    assert err.value.code == "UNAVAILABLE"
    r = await api.rest(
        "POST", f"/v1/projects/{pid}/tasks", customer["token"], json={"tasks": small_tasks(2)}
    )
    assert r.status_code == 503 and r.json()["error"]["code"] == "UNAVAILABLE"
    assert await db.fetchval("SELECT count(*) FROM projects") == 1
    assert await db.fetchval("SELECT count(*) FROM tasks") == 3
    store.repair()

    # Background path: the store stops mid-ingest (after a few 50-task chunks).
    r = await api.rest(
        "POST",
        f"/v1/projects/{pid}/tasks",
        customer["token"],
        json={"tasks": small_tasks(1000, start=10)},
    )
    assert r.status_code == 202, r.text
    await wait_for(lambda: db.fetchval("SELECT tasks_stored >= 100 FROM ingest_jobs"), every=0.005)
    store.break_()

    async def retrying() -> dict | None:
        d = await api.gql(PROJECT_STATUS, {"p": pid}, customer["token"])
        ing = d["project"]["ingest"]
        return ing if ing["state"] == "retrying" and ing["error"] else None

    ingest = await wait_for(retrying)
    # A reason a customer can act on; no server paths, errno or exception text.
    assert ingest["error"] == ingest_module.STORE_DOWN
    seen = ingest["tasksStored"]
    assert 100 <= seen < 1000, "the store must stop mid-ingest for this test to mean much"
    # It retries with back-off; meanwhile no task appears without its payload. Another ingest
    # loop may still commit the chunk whose payloads it wrote before the store broke, so the
    # tasks and the progress are read in one snapshot (they commit together).
    await wait_for(lambda: db.fetchval("SELECT attempts >= 3 FROM ingest_jobs"))
    stored, tasks = await db.fetchrow(
        "SELECT tasks_stored, (SELECT count(*) FROM tasks) FROM ingest_jobs"
    )
    assert seen <= stored < 1000
    assert tasks == 3 + stored
    during = {
        r["payload_key"]
        for r in await db.fetch(
            "SELECT i.payload_key FROM tasks t JOIN items i ON i.id = t.item_id"
        )
    }
    # What is stored stays claimable (its payloads are durable); nothing else exists.
    claim = (await api.gql(CLAIM, token=expert["token"]))["claimNextTask"]
    assert claim is not None and claim["task"]["payload"] is not None

    store.repair()
    # (The store cannot be listed while down.) Payloads are distinct per task and only
    # chunks not yet stored are written again, so the tasks that existed during the
    # outage had their payloads stored before it.
    assert None not in during and during <= store.keys()

    async def done() -> dict | None:
        d = await api.gql(PROJECT_STATUS, {"p": pid}, customer["token"])
        ing = d["project"]["ingest"]
        return ing if ing["state"] == "done" else None

    # the rest of the batch: hundreds of PUTs, which moto serves slowly on a busy machine
    ingest = await wait_for(done, timeout=120)
    assert ingest == {"state": "done", "tasksStored": 1000, "tasksTotal": 1000, "error": None}
    assert await db.fetchval("SELECT count(*) FROM tasks") == 1003
    assert await db.fetchval("SELECT count(DISTINCT item_id) FROM tasks") == 1003
    await assert_open_tasks_have_payloads(db, store)


async def test_limits_reject_bad_input_and_write_nothing(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection
) -> None:
    srv, api = await serve(max_tasks_per_request=150, max_body_bytes=256 * 1024)
    customer = await api.create_customer()
    token = customer["token"]

    async def rejected(tasks: Any, field_part: str) -> None:
        r = await api.rest("POST", "/v1/projects", token, json={"name": "x", "tasks": tasks})
        assert r.status_code == 422, r.text
        assert field_part in r.json()["error"]["message"]
        gql_tasks = [
            {("externalId" if k == "external_id" else k): val for k, val in t.items()}
            for t in tasks
        ]
        with pytest.raises(GraphQLError) as err:
            await api.create_project(token, gql_tasks)
        assert err.value.code == "BAD_INPUT"

    await rejected(small_tasks(151), "at most 150 tasks")
    await rejected([{"skill": "bad skill!", "payload": {}}], "tasks[0].skill")
    await rejected([{"skill": "a", "payload": {}, "priority": 1001}], "between -1000")
    await rejected([{"skill": "a", "payload": {"t": "y" * 70 * 1024}}], "larger than 65536 bytes")
    await rejected(small_tasks(1) + [{"skill": "a", "payload": {"t": "\u0000"}}], "NUL")
    await rejected([{"skill": "a", "payload": {}, "gold": {"t": "\u0000"}}], "tasks[0].gold")
    await rejected([{"skill": "a"}], "tasks[0].payload is required")
    await rejected([{"skill": "a", "payload": {}, "external_id": "x"}] * 2, "appears twice")
    # NaN cannot be expressed in standard JSON, but Python's parser accepts it.
    r = await api.rest(
        "POST",
        "/v1/projects",
        token,
        content=b'{"name": "x", "tasks": [{"skill": "a", "payload": {"v": NaN}}]}',
    )
    assert r.status_code == 422 and "NaN" in r.json()["error"]["message"]

    # The body limit refuses a declared length at once, and a streamed (chunked) body as
    # soon as it passes the limit, without reading the rest.
    big_body = json.dumps({"name": "x", "tasks": big_tasks(600)}).encode()
    assert len(big_body) > 256 * 1024
    r = await api.rest("POST", "/v1/projects", token, content=big_body)
    assert r.status_code == 413 and r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"

    async def stream() -> Any:
        for i in range(0, 2 * len(big_body), 16 * 1024):
            yield big_body[i : i + 16 * 1024] or b" " * 16 * 1024

    for path in ("/v1/projects", "/graphql"):
        r = await api.rest(
            "POST",
            path,
            token,
            content=stream(),
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 413, r.text
        assert r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
    r = await api.rest(
        "POST",
        "/graphql",
        token,
        json={
            "query": "mutation($i: CreateProjectInput!) { createProject(input: $i) { id } }",
            "variables": {"i": {"name": "x", "tasks": big_tasks(600)}},
        },
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"

    # addTasks: an unknown project, another customer's project, an empty list.
    other = await api.create_customer("other")
    pid = (await api.create_project(token, small_tasks(1)))["project"]["id"]
    for bad_pid, tok in [("nope", token), (pid, other["token"])]:
        with pytest.raises(GraphQLError) as err:
            await api.gql(ADD_TASKS, {"p": bad_pid, "t": small_tasks(1)}, tok)
        assert err.value.code == "NOT_FOUND"
    r = await api.rest("POST", f"/v1/projects/{pid}/tasks", token, json={"tasks": []})
    assert r.status_code == 422
    await api.gql("mutation($p: ID!) { cancelProject(id: $p) { status } }", {"p": pid}, token)
    with pytest.raises(GraphQLError) as err:
        await api.gql(ADD_TASKS, {"p": pid, "t": small_tasks(1)}, token)
    assert err.value.code == "PROJECT_CANCELED"

    assert await db.fetchval("SELECT count(*) FROM projects") == 1
    assert await db.fetchval("SELECT count(*) FROM items") == 1
    assert await db.fetchval("SELECT count(*) FROM ingest_jobs") == 0


async def test_audit_log_is_scoped_and_paginated(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection
) -> None:
    srv, api = await serve()
    acme = await api.create_customer("acme")
    globex = await api.create_customer("globex")
    experts = [await api.create_expert(["s"], name=f"x{i}") for i in range(3)]
    p1 = (await api.create_project(acme["token"], small_tasks(3, "s")))["project"]["id"]
    p2 = (await api.create_project(globex["token"], small_tasks(3, "s"), priority=5))["project"][
        "id"
    ]
    for e in experts:  # each claims the best (globex) task, submits, claims an acme one
        c = await api.claim(e["token"])
        await api.submit(e["token"], c["assignmentId"], {"ok": 1})
    for e in experts:
        c = await api.claim(e["token"])
        assert c["task"]["projectId"] == p1

    async def page(token: str, **v: Any) -> dict:
        args = {"l": v.pop("limit", 100), **v}
        return (await api.gql(AUDIT, args, token))["auditLog"]

    acme_all = await page(acme["token"])
    assert {e["projectId"] for e in acme_all["entries"]} == {p1}
    assert len(acme_all["entries"]) == 3 and acme_all["nextCursor"] is None
    assert {e["customerId"] for e in acme_all["entries"]} == {acme["id"]}
    admin_all = await page(ADMIN_TOKEN)
    assert len(admin_all["entries"]) == 6
    # Pages of 2 walk the whole log once, in order.
    seen, after = [], None
    while True:
        got = await page(ADMIN_TOKEN, limit=2, a=after)
        seen += got["entries"]
        after = got["nextCursor"]
        if after is None:
            break
    assert [e["cursor"] for e in seen] == [e["cursor"] for e in admin_all["entries"]]
    by_expert = await page(ADMIN_TOKEN, e=experts[0]["id"], p=p2)
    assert [(e["expertId"], e["projectId"]) for e in by_expert["entries"]] == [
        (experts[0]["id"], p2)
    ]
    # Another customer's project is not found; experts cannot read the log.
    for token, code in [(acme["token"], "NOT_FOUND"), (experts[0]["token"], "NOT_FOUND")]:
        with pytest.raises(GraphQLError) as err:
            await page(token, p=p2)
        assert err.value.code == code
    with pytest.raises(GraphQLError) as err:
        await page(acme["token"], a="not-a-cursor")
    assert err.value.code == "BAD_INPUT"
    r = await api.rest("GET", f"/v1/audit-log?project_id={p1}&limit=2", acme["token"])
    assert r.status_code == 200 and len(r.json()["entries"]) == 2
    assert r.json()["next_cursor"] == r.json()["entries"][1]["cursor"]
    assert await db.fetchval("SELECT count(*) FROM audit_log") == 6


async def test_cancel_stops_a_background_ingest(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection
) -> None:
    srv, api = await serve()
    customer = await api.create_customer()
    store.break_()  # holds the job in 'retrying' until the cancel
    created = await api.create_project(customer["token"], big_tasks(250), wait=False)
    assert created["accepted"] is True
    pid = created["project"]["id"]
    # The store refused the request itself: it was kept in Postgres instead.
    assert await db.fetchval("SELECT bool_and(body IS NOT NULL) FROM ingest_chunks")

    async def state() -> str:
        d = await api.gql(PROJECT_STATUS, {"p": pid}, customer["token"])
        return d["project"]["ingest"]["state"]

    await wait_for(lambda: _equals(state(), "retrying"))
    canceled = await api.gql(
        "mutation($p: ID!) { cancelProject(id: $p) { status } }", {"p": pid}, customer["token"]
    )
    assert canceled["cancelProject"]["status"] == "canceled"
    store.repair()
    await wait_for(lambda: _equals(state(), "canceled"))
    # Every chunk is dropped (one a worker held during the cancel, by the idle sweep).
    await wait_for(lambda: _equals(db.fetchval("SELECT count(*) FROM ingest_chunks"), 0))
    assert await db.fetchval("SELECT count(*) FROM tasks") == 0
    assert await db.fetchval("SELECT count(*) FROM items") == 0


async def _equals(value: Any, expected: Any) -> bool:
    return (await value) == expected


async def test_concurrent_resends_store_each_external_id_once(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection
) -> None:
    srv, api = await serve()
    customer = await api.create_customer()
    pid = (await api.create_project(customer["token"], small_tasks(1)))["project"]["id"]
    batch = [dict(t, external_id=f"x{i}") for i, t in enumerate(small_tasks(60))]

    async def send() -> int:
        r = await api.rest(
            "POST", f"/v1/projects/{pid}/tasks", customer["token"], json={"tasks": batch}
        )
        assert r.status_code == 201, r.text
        return r.json()["added"]

    added = await asyncio.gather(*(send() for _ in range(6)))
    assert sum(added) == 60  # each task was new for exactly one of the racing requests
    assert await db.fetchval("SELECT count(*) FROM items WHERE external_id IS NOT NULL") == 60
    assert await db.fetchval("SELECT count(*) FROM tasks") == 61
    await assert_open_tasks_have_payloads(db, store)


async def test_tasks_claimed_during_ingest_always_have_their_payload(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection
) -> None:
    """Experts claim, fetch and submit while a batch is ingested chunk by chunk: every task
    they can claim already has its payload in the store."""
    srv, api = await serve(ingest_chunk_tasks=10)
    customer = await api.create_customer()
    experts = [await api.create_expert(["grading"], name=f"w{i}") for i in range(3)]
    pid = (await api.create_project(customer["token"], big_tasks(1)))["project"]["id"]
    r = await api.rest(
        "POST",
        f"/v1/projects/{pid}/tasks",
        customer["token"],
        json={"tasks": big_tasks(100, start=1)},
    )
    assert r.status_code == 202, r.text
    seen: list[int] = []

    async def work(expert: dict[str, str]) -> None:
        idle_since = None
        while True:
            claim = (await api.gql(CLAIM, token=expert["token"]))["claimNextTask"]
            if claim is None:
                d = await api.gql(PROJECT_STATUS, {"p": pid}, customer["token"])
                if d["project"]["ingest"]["state"] == "done":
                    idle_since = idle_since or asyncio.get_running_loop().time()
                    if asyncio.get_running_loop().time() - idle_since > 0.5:
                        return
                await asyncio.sleep(0.02)
                continue
            got = await fetch_payload(srv.url, claim["task"]["payloadUrl"], expert["token"])
            assert got.status_code == 200, got.text
            payload = json.loads(got.content)
            assert payload["text"] == BIG
            seen.append(payload["n"])
            await api.submit(expert["token"], claim["assignmentId"], {"ok": True})

    await asyncio.wait_for(asyncio.gather(*(work(e) for e in experts)), timeout=120)
    assert sorted(seen) == list(range(101))
    assert await db.fetchval("SELECT count(*) FROM tasks WHERE status = 'done'") == 101
    assert await db.fetchval("SELECT count(*) FROM audit_log WHERE action = 'payload_fetch'") == 101
