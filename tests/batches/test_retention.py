"""Issue 18, customer data lifecycle: the payloads of a canceled project are deleted from the
store (folder and S3) after the retention the project chose, and nothing else is.

The server's own retention job runs hourly here, so it cannot race the test: the test runs
the job itself (`retention_once`) and moves the database's clock (tests/clock.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from taskroute.db.pool import Database, create_pool
from taskroute.resolvers.jobs import ingest, retention
from taskroute.storage import open_blob_store
from taskroute.storage.blobs import BlobStore

from ..clock import DbClock
from ..helpers import ADMIN_TOKEN, Api, GraphQLError, wait_for
from .stores import Serve, StoreHandle
from .test_batches import ADD_TASKS, BIG, CLAIM, big_tasks, canonical, fetch_payload, key_of

DAY = 86400
CANCEL = "mutation($p: ID!) { cancelProject(id: $p) { status } }"
PROJECT = """query($p: ID!) { project(id: $p) { status payloadRetentionSeconds
  payloadsDeletedAt } }"""
ADMIN_AUDIT = """query($s: ID, $a: String) { adminAudit(subjectId: $s, action: $a) {
  edges { node { actor action subjectId reason details } } } }"""


class Job:
    """The retention job as a process runs it: its own pool and its own blob-store client."""

    def __init__(self, db: Database, blobs: BlobStore) -> None:
        self.db = db
        self.blobs = blobs

    async def run(self) -> retention.Round:
        return await retention.retention_once(self.db, self.blobs)


@pytest_asyncio.fixture
async def job(database_url: str, store: StoreHandle, tmp_path: Path) -> AsyncIterator[Job]:
    pool = await create_pool(database_url, min_size=1, max_size=3)
    blobs = open_blob_store(store.url, str(tmp_path / "data"))
    try:
        yield Job(Database(pool, timeout=10), blobs)
    finally:
        await blobs.close()
        await pool.close()


async def _counts(db: asyncpg.Connection) -> dict[str, int]:
    tables = [
        "items",
        "tasks",
        "assignments",
        "payouts",
        "audit_log",
        "item_results",
        "result_changes",
        "gold_pool",
    ]
    return {t: await db.fetchval(f"SELECT count(*) FROM {t}") for t in tables}


async def _audit(api: Api, subject: str, action: str) -> list[dict[str, Any]]:
    data = await api.gql(ADMIN_AUDIT, {"s": subject, "a": action}, ADMIN_TOKEN)
    return [e["node"] for e in data["adminAudit"]["edges"]]


async def test_retention_deletes_payload_blobs_and_nothing_else(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection, job: Job
) -> None:
    srv, api = await serve(retention_interval=3600, payload_url_ttl=600)
    shared_live = {"text": BIG, "shared": "with a live project"}
    shared_canceled = {"text": BIG, "shared": "with a canceled project"}
    acme = await api.create_customer()
    token = acme["token"]
    ada = await api.create_expert(["grading"], name="ada")
    bob = await api.create_expert(["grading"], name="bob")
    tasks = [
        *big_tasks(3),
        {"skill": "grading", "payload": {"n": "small"}},  # inline and in the store
        {"skill": "grading", "payload": shared_live},
        {"skill": "grading", "payload": shared_canceled},
        {"skill": "grading", "payload": {"gold": 1}, "gold": {"grade": 1}},
    ]
    doomed = (
        await api.create_project(
            token,
            tasks,
            payCents=7,
            payloadRetentionSeconds=DAY,
            # bob's lease lives through the day the clock moves
            leaseSeconds=2 * DAY,
            heartbeatTimeoutSeconds=2 * DAY,
        )
    )["project"]["id"]
    # Another customer's live project holds one identical payload (the same blob) ...
    other = await api.create_customer("globex")
    live = await api.create_project(other["token"], [{"skill": "x", "payload": shared_live}])
    # ... and a canceled project with a longer retention another.
    longer = (
        await api.create_project(
            token,
            [{"skill": "x", "payload": shared_canceled}],
            payloadRetentionSeconds=30 * DAY,
        )
    )["project"]["id"]

    # Work happens: ada answers two tasks (results, ledger, audit), bob holds a lease on
    # a large payload when the project is canceled.
    for _ in range(2):
        got = (await api.gql(CLAIM, token=ada["token"]))["claimNextTask"]
        await api.submit(ada["token"], got["assignmentId"], {"grade": 3})
    held = (await api.gql(CLAIM, token=bob["token"]))["claimNextTask"]
    while held["task"]["payloadUrl"] is None:  # a small one: take a large one instead
        await api.submit(bob["token"], held["assignmentId"], {"grade": 3})
        held = (await api.gql(CLAIM, token=bob["token"]))["claimNextTask"]
    assert held["task"]["payloadUrl"], "bob holds a payload delivered by URL"
    before_fetch = await fetch_payload(srv.url, held["task"]["payloadUrl"], bob["token"])
    assert before_fetch.status_code == 200

    for pid in (doomed, longer):
        assert (await api.gql(CANCEL, {"p": pid}, token))["cancelProject"]["status"] == ("canceled")
    clock = DbClock(db)
    keys = {
        r["payload_key"]
        for r in await db.fetch("SELECT payload_key FROM items WHERE project_id = $1", doomed)
    }
    assert len(keys) == 7 and keys <= store.keys()
    # A blob already gone (an operator removed it by hand) is no reason to stop.
    gone_first = key_of({"text": BIG, "n": 0})
    await job.blobs.delete_many([gone_first])
    counts = await _counts(db)

    # Not yet: the retention has a minute to go.
    await clock.advance(DAY - 60)
    assert await job.run() == retention.Round(0, 0, 0)
    assert keys - {gone_first} <= store.keys()

    # The day is over: the project's own blobs go; the two it shares stay.
    await clock.advance(61)
    r = await job.run()
    assert r == retention.Round(expired=1, deleted=5, kept=2)
    shared = {key_of(shared_live), key_of(shared_canceled)}
    assert store.keys() & keys == shared
    assert store.read(key_of(shared_live)) == canonical(shared_live)
    # Nothing else changed: items, tasks, assignments, the ledger, the audit, results.
    assert await _counts(db) == counts
    items = await db.fetch(
        "SELECT payload, payload_key, payload_deleted_at FROM items WHERE project_id = $1",
        doomed,
    )
    assert all(i["payload"] is None for i in items), "inline copies are cleared too"
    assert all(i["payload_deleted_at"] is not None for i in items)
    assert {i["payload_key"] for i in items} == keys, "the fact that they existed stays"
    assert await db.fetchval("SELECT count(*) FROM blob_deletions") == 0
    # Nobody else's inline payload was touched.
    assert (
        await db.fetchval(
            "SELECT count(*) FROM items WHERE project_id = $1 AND payload IS NULL",
            live["project"]["id"],
        )
        == 1
    )  # a large payload: never inline (the suite inlines up to 200 bytes)

    # The customer sees when; the admin audit says what and who.
    seen = (await api.gql(PROJECT, {"p": doomed}, token))["project"]
    assert seen["payloadRetentionSeconds"] == DAY and seen["payloadsDeletedAt"]
    rest = (await api.rest("GET", f"/v1/projects/{doomed}", token)).json()
    assert rest["payload_retention_seconds"] == DAY
    assert rest["payloads_deleted_at"] is not None
    expired = await _audit(api, doomed, "payloads_expired")
    assert len(expired) == 1 and expired[0]["actor"] == "system"
    details = expired[0]["details"]
    assert (details["items"], details["payload_keys"], details["retention_seconds"]) == (
        7,
        7,
        DAY,
    )
    deleted = await _audit(api, doomed, "payload_blobs_deleted")
    assert [(d["details"]["deleted"], d["details"]["kept_in_use"]) for d in deleted] == [(5, 2)]

    # Bob's lease outlived the payload: a clear 410, not a 500 or a 503.
    after = await fetch_payload(srv.url, held["task"]["payloadUrl"], bob["token"])
    assert after.status_code == 410, after.text
    assert after.json()["error"]["code"] == "PAYLOAD_DELETED"
    # His submit still counts and is paid (cancel keeps its promise).
    await api.submit(bob["token"], held["assignmentId"], {"grade": 2})
    assert (
        await db.fetchval(
            "SELECT count(*) FROM payouts WHERE assignment_id = $1", held["assignmentId"]
        )
        == 1
    )

    # Idempotent: nothing more to do.
    assert await job.run() == retention.Round(0, 0, 0)

    # Thirty days on, the longer project's payload goes too (the first project's copy is
    # no longer kept); the live project's stays for as long as it lives.
    await clock.advance(30 * DAY)
    r = await job.run()
    assert r == retention.Round(expired=1, deleted=1, kept=0)
    assert store.keys() & keys == {key_of(shared_live)}


async def test_a_completed_project_keeps_new_work_until_it_completes_again(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection, job: Job
) -> None:
    """Retention counts from completion too; new work makes the project active again, and
    its payloads are kept until the project has been completed for the retention again."""
    srv, api = await serve(retention_interval=3600)
    acme = await api.create_customer()
    token = acme["token"]
    ada = await api.create_expert(["grading"], name="ada")
    pid = (await api.create_project(token, big_tasks(2), payloadRetentionSeconds=DAY))["project"][
        "id"
    ]

    async def work_all() -> None:
        while (got := (await api.gql(CLAIM, token=ada["token"]))["claimNextTask"]) is not None:
            await api.submit(ada["token"], got["assignmentId"], {"grade": 1})

    async def status() -> str:
        return (await api.gql(PROJECT, {"p": pid}, token))["project"]["status"]

    await work_all()
    assert await status() == "completed"
    clock = DbClock(db)
    first = {key_of(t["payload"]) for t in big_tasks(2)}
    await clock.advance(DAY - 60)
    assert await job.run() == retention.Round(0, 0, 0)
    await clock.advance(120)
    assert await job.run() == retention.Round(expired=1, deleted=2, kept=0)
    assert not first & store.keys()

    # More work: active again; the new payload is kept while it is, and after it completes
    # until the retention has passed once more.
    second = big_tasks(1, start=10)
    added = await api.gql(ADD_TASKS, {"p": pid, "t": second}, token)
    assert added["addTasks"]["added"] == 1 and await status() == "active"
    await clock.advance(2 * DAY)
    assert await job.run() == retention.Round(0, 0, 0)
    assert {key_of(second[0]["payload"])} <= store.keys()
    await work_all()
    assert await status() == "completed"
    await clock.advance(DAY - 60)
    assert await job.run() == retention.Round(0, 0, 0)
    await clock.advance(120)
    assert await job.run() == retention.Round(expired=1, deleted=1, kept=0)
    assert not {key_of(second[0]["payload"])} & store.keys()
    expired = await _audit(api, pid, "payloads_expired")
    assert [e["details"]["items"] for e in expired] == [2, 1]
    assert await db.fetchval(
        "SELECT count(*) FROM items WHERE project_id = $1 AND payload_deleted_at IS NOT NULL", pid
    ) == 3  # fmt: skip


async def test_a_canceled_batch_leaves_no_blobs_behind(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection, job: Job
) -> None:
    """Payloads a worker wrote for chunks that a cancel then dropped belong to no item: they
    are deleted (unless another project's item is the same payload), without waiting for the
    retention."""
    srv, api = await serve(retention_interval=3600)
    batch = big_tasks(250)
    acme = await api.create_customer()
    # A live project that happens to hold the same payload as one task of the batch.
    await api.create_project(acme["token"], [batch[7]])
    # An earlier attempt wrote every payload of the batch, then died before its commit.
    await job.blobs.put_many((key_of(t["payload"]), canonical(t["payload"])) for t in batch)
    written = {key_of(t["payload"]) for t in batch}
    assert written <= store.keys()
    store.break_()  # the job now waits in 'retrying'
    created = await api.create_project(acme["token"], batch, wait=False)
    pid = created["project"]["id"]

    async def state() -> Any:
        d = await api.gql(
            "query($p: ID!) { project(id: $p) { ingest { state } } }",
            {"p": pid},
            acme["token"],
        )
        return d["project"]["ingest"]["state"]

    await wait_for(lambda: _is(state(), "retrying"))
    await api.gql(CANCEL, {"p": pid}, acme["token"])
    store.repair()
    await wait_for(lambda: _is(db.fetchval("SELECT count(*) FROM ingest_chunks"), 0))
    assert await db.fetchval("SELECT count(*) FROM items WHERE project_id = $1", pid) == 0
    # Queued at once (the project's retention is for the customer's items; these have none).
    queued = {r["key"] for r in await db.fetch("SELECT key FROM blob_deletions")}
    assert queued == written, "every dropped payload, hashed in SQL like the worker does"
    r = await job.run()
    assert r == retention.Round(expired=0, deleted=249, kept=1)
    assert store.keys() & written == {key_of(batch[7]["payload"])}


async def test_a_stored_request_left_by_a_dead_worker_is_deleted_by_the_job(
    serve: Serve,
    store: StoreHandle,
    db: asyncpg.Connection,
    job: Job,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker that dies between a chunk's commit and deleting the chunk's text from the
    store leaves the text queued; the retention job deletes it (audited apart from payloads)."""
    monkeypatch.setattr(ingest.IngestWorker, "_delete_request", _dies_before_deleting)
    srv, api = await serve(retention_interval=3600)
    batch = big_tasks(250)
    payload_keys = {key_of(t["payload"]) for t in batch}
    acme = await api.create_customer()
    pid = (await api.create_project(acme["token"], batch))["project"]["id"]
    left = store.keys() - payload_keys
    assert len(left) == 3, "the three 100-task chunks' texts are still in the store"
    queued = await db.fetch("SELECT key, kind FROM blob_deletions")
    assert {(r["key"], r["kind"]) for r in queued} == {(k, "request") for k in left}
    assert await job.run() == retention.Round(expired=0, deleted=3, kept=0)
    assert store.keys() == payload_keys, "the project's payloads are kept: it is active"
    assert await db.fetchval("SELECT count(*) FROM blob_deletions") == 0
    deleted = await _audit(api, pid, "payload_blobs_deleted")
    assert [d["details"] for d in deleted] == [
        {"deleted": 0, "kept_in_use": 0, "batch_requests_deleted": 3}
    ]


async def _dies_before_deleting(self: ingest.IngestWorker, conn: Any, key: str) -> None:
    return None


async def test_deletion_waits_for_blob_writers_in_flight(
    serve: Serve,
    store: StoreHandle,
    db: asyncpg.Connection,
    job: Job,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer that found a blob already there wrote nothing; until its items commit, only
    its lock protects that blob. The job does not delete while any writer holds it."""
    srv, api = await serve(retention_interval=3600)
    acme = await api.create_customer()
    pid = (await api.create_project(acme["token"], big_tasks(2), payloadRetentionSeconds=0))[
        "project"
    ]["id"]
    await api.gql(CANCEL, {"p": pid}, acme["token"])
    monkeypatch.setattr(retention, "WRITERS_WAIT", "100ms")
    writer = db  # a writer between its blob writes and the commit of its items
    tx = writer.transaction()
    await tx.start()
    await writer.execute("SELECT pg_advisory_xact_lock_shared($1)", 0x7A5C0018)
    r = await job.run()
    assert r == retention.Round(expired=1, deleted=0, kept=0), "queued, not deleted"
    assert {key_of(t["payload"]) for t in big_tasks(2)} <= store.keys()
    await tx.rollback()
    assert await job.run() == retention.Round(expired=0, deleted=2, kept=0)
    assert not {key_of(t["payload"]) for t in big_tasks(2)} & store.keys()


async def test_retention_is_validated_with_clear_errors(
    serve: Serve, store: StoreHandle, db: asyncpg.Connection
) -> None:
    srv, api = await serve()
    acme = await api.create_customer()
    token = acme["token"]
    for bad in (-1, 3650 * DAY + 1):
        with pytest.raises(GraphQLError) as err:
            await api.create_project(token, big_tasks(1), payloadRetentionSeconds=bad)
        assert err.value.code == "BAD_INPUT"
        assert err.value.errors[0]["extensions"]["field"] == "payload_retention_seconds"
        assert "payload_retention_seconds" in err.value.errors[0]["message"]
    with pytest.raises(GraphQLError) as err:
        await api.create_project(token, big_tasks(1), payloadRetentionSeconds="a week")
    assert err.value.code == "BAD_INPUT"
    for bad_rest in (-5, "30d", 1.5, None):
        r = await api.rest(
            "POST",
            "/v1/projects",
            token,
            json={"name": "r", "tasks": [], "payload_retention_seconds": bad_rest},
        )
        assert r.status_code == 422, (bad_rest, r.text)
        assert r.json()["error"]["code"] == "BAD_INPUT"
        assert "payload_retention_seconds" in r.json()["error"]["message"]
    assert await db.fetchval("SELECT count(*) FROM projects") == 0
    # The default: 30 days; REST takes the field too; 0 is allowed (delete at once).
    pid = (await api.create_project(token, big_tasks(1)))["project"]["id"]
    got = (await api.gql(PROJECT, {"p": pid}, token))["project"]
    assert got == {
        "status": "active",
        "payloadRetentionSeconds": 30 * DAY,
        "payloadsDeletedAt": None,
    }
    r = await api.rest(
        "POST",
        "/v1/projects",
        token,
        json={"name": "r", "tasks": [], "payload_retention_seconds": 0},
    )
    assert r.status_code == 201, r.text
    shown = (await api.rest("GET", r.json()["status_url"], token)).json()
    assert shown["payload_retention_seconds"] == 0 and shown["payloads_deleted_at"] is None
    assert await db.fetchval(
        "SELECT payload_retention FROM projects WHERE id = $1", pid
    ) == timedelta(days=30)


async def _is(value: Any, expected: Any) -> bool:
    return (await value) == expected
