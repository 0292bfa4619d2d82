"""Migrations: ordered, recorded, idempotent, safe when processes start together."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from taskroute.blobs import blob_key
from taskroute.db import migrate as migrate_module
from taskroute.db.migrate import available, migrate_url
from taskroute.db.queries import Q

from ..helpers import Dropper, dsn_for


@pytest_asyncio.fixture
async def empty_database(pg_admin_dsn: str, dropper: Dropper) -> AsyncIterator[str]:
    name = f"taskroute_m_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(pg_admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield dsn_for(pg_admin_dsn, name)
    finally:
        dropper.drop(name)


async def test_concurrent_migrations_apply_each_once(empty_database: str) -> None:
    results = await asyncio.gather(*(migrate_url(empty_database) for _ in range(4)))
    versions = [v for v, _, _ in available()]
    applied = sorted(v for r in results for v in r)
    assert applied == versions  # each version applied by exactly one of the four
    assert await migrate_url(empty_database) == []
    conn = await asyncpg.connect(empty_database)
    try:
        recorded = [
            r["version"]
            for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
        ]
        assert recorded == versions
        # every named query at least prepares against the migrated schema
        for sql in Q.values():
            await conn.prepare(sql)
    finally:
        await conn.close()


async def test_migration_numbers_are_unique_and_ascending() -> None:
    """Numbers are handed out to work done in parallel, so a later number may land before an
    earlier one (a gap for a while); each is recorded once and files apply in number order."""
    versions = [v for v, _, _ in available()]
    assert len(set(versions)) == len(versions)
    assert versions == sorted(versions)


async def migrated_before(
    number: int, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[int, str, Path]]:
    """Apply the migrations numbered below `number` (rows in the old layout can then be
    written); returns all of them, to put back before migrating the rest."""
    every = available()
    monkeypatch.setattr(migrate_module, "available", lambda: [m for m in every if m[0] < number])
    await migrate_url(dsn)
    return every


async def test_chunks_queued_before_the_request_moved_to_the_blob_store_keep_working(
    empty_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 0021: a chunk whose text was stored in Postgres (before 0021) gets its
    payloads' keys, hashed as the worker and the cancel hash them, so either can handle it."""
    every = await migrated_before(21, empty_database, monkeypatch)
    conn = await asyncpg.connect(empty_database)
    try:
        customer = await conn.fetchval("INSERT INTO customers (name) VALUES ('c') RETURNING id")
        project = await conn.fetchval(
            "INSERT INTO projects (customer_id, name, status) VALUES ($1, 'p', 'ingesting')"
            " RETURNING id",
            customer,
        )
        job = await conn.fetchval(
            "INSERT INTO ingest_jobs (project_id, customer_id, kind, tasks_total, chunks_left)"
            " VALUES ($1, $2, 'create', 2, 1) RETURNING id",
            project,
            customer,
        )
        payloads = ['{"text":"é"}', '{"n":2}']
        body = "\n".join(f'["g",0,null,null,[],null]\t{p}' for p in payloads)
        await conn.execute(
            "INSERT INTO ingest_chunks (job_id, chunk_no, first_index, task_count, body)"
            " VALUES ($1, 0, 0, 2, $2)",
            job,
            body,
        )
        monkeypatch.setattr(migrate_module, "available", lambda: every)
        assert 21 in await migrate_url(empty_database)
        row = await conn.fetchrow("SELECT body, body_key, payload_keys FROM ingest_chunks")
        assert row["body"] == body and row["body_key"] is None
        assert row["payload_keys"] == [blob_key(p) for p in payloads]
    finally:
        await conn.close()


async def rare_task_writer(
    conn: asyncpg.Connection,
) -> Callable[..., Awaitable[object]]:
    """Writes one task (task priority 2, skill `rare`) of a new project with this priority and
    bump, at this eff_priority and status, in the layout of migrations 0029-0030; returns its id."""
    customer = await conn.fetchval("INSERT INTO customers (name) VALUES ('c') RETURNING id")

    async def task(priority: int, bumped: bool, eff: int, status: str = "open") -> object:
        project = await conn.fetchval(
            "INSERT INTO projects (customer_id, name, priority, deadline_bumped)"
            " VALUES ($1, 'p', $2, $3) RETURNING id",
            customer,
            priority,
            bumped,
        )
        item = await conn.fetchval(
            "INSERT INTO items (project_id, skill) VALUES ($1, 'rare') RETURNING id", project
        )
        return await conn.fetchval(
            "INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, status)"
            " VALUES ($1, $2, 'rare', 2, $3, $4) RETURNING id",
            item,
            project,
            eff,
            status,
        )

    return task


async def test_tasks_lifted_past_high_work_take_the_new_lift(
    empty_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 0029: a bumped LOW project's tasks lifted the old way (ahead of every row,
    HIGH included) move to the top of NORMAL; a bumped HIGH project's lift, a fairness boost
    and an unbumped project's rows stay as they were."""
    every = await migrated_before(29, empty_database, monkeypatch)
    conn = await asyncpg.connect(empty_database)
    try:
        task = await rare_task_writer(conn)

        old_lift = 2100 * 10000
        low = await task(-120, True, (-20) * 10000 + 2 + old_lift)
        low_done = await task(-120, True, (-20) * 10000 + 2 + old_lift, "done")
        high = await task(120, True, 220 * 10000 + 2 + old_lift)
        boosted = await task(-120, True, 100_000_000 + (-20) * 10000 + 2)
        plain = await task(-120, False, (-120) * 10000 + 2)
        monkeypatch.setattr(migrate_module, "available", lambda: [m for m in every if m[0] <= 29])
        assert 29 in await migrate_url(empty_database)
        eff = dict(await conn.fetch("SELECT id, eff_priority FROM tasks"))
        assert eff[low] == 99 * 10000 + 2
        assert eff[low_done] == (-20) * 10000 + 2 + old_lift
        assert eff[high] == 220 * 10000 + 2 + old_lift
        assert eff[boosted] == 100_000_000 + (-20) * 10000 + 2
        assert eff[plain] == (-120) * 10000 + 2
    finally:
        await conn.close()


async def test_tasks_lifted_to_the_top_of_normal_take_one_class_level(
    empty_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 0030: a bumped project below HIGH whose tasks migration 0029 lifted to the top
    of NORMAL (level 99) goes back to its one class level; its one level where that was
    already higher, a bumped HIGH project's lift, a fairness boost, finished work and an
    unbumped project's rows stay as they were."""
    every = await migrated_before(30, empty_database, monkeypatch)
    conn = await asyncpg.connect(empty_database)
    try:
        task = await rare_task_writer(conn)
        top_of_normal = 99 * 10000 + 2
        low = await task(-120, True, top_of_normal)
        between = await task(-50, True, top_of_normal)
        normal = await task(20, True, 120 * 10000 + 2)
        low_done = await task(-120, True, top_of_normal, "done")
        high = await task(120, True, 220 * 10000 + 2 + 2100 * 10000)
        boosted = await task(-120, True, 100_000_000 + top_of_normal)
        plain = await task(-120, False, (-120) * 10000 + 2)
        monkeypatch.setattr(migrate_module, "available", lambda: [m for m in every if m[0] <= 30])
        assert 30 in await migrate_url(empty_database)
        eff = dict(await conn.fetch("SELECT id, eff_priority FROM tasks"))
        assert eff[low] == (-20) * 10000 + 2
        assert eff[between] == 50 * 10000 + 2
        assert eff[normal] == 120 * 10000 + 2
        assert eff[low_done] == top_of_normal
        assert eff[high] == 220 * 10000 + 2 + 2100 * 10000
        assert eff[boosted] == 100_000_000 + top_of_normal
        assert eff[plain] == (-120) * 10000 + 2
        # what the routing job writes from now on: the same one class level
        lift = "SELECT routing_scarce_lift($1, 2)"
        assert await conn.fetchval(lift, -120) == eff[low]
        assert await conn.fetchval(lift, 20) == eff[normal]
        assert await conn.fetchval(lift, 120) == eff[high]
    finally:
        await conn.close()


async def test_tasks_lifted_into_high_work_stop_under_it(
    empty_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 0031: a bumped project below HIGH whose one class level reached HIGH's (a
    NORMAL project at 20 lifted to 120) goes to the top of NORMAL (99); a LOW project's one
    level, a bumped HIGH project's lift, a fairness boost, finished work and an unbumped
    project's rows stay as they were."""
    every = await migrated_before(31, empty_database, monkeypatch)
    conn = await asyncpg.connect(empty_database)
    try:
        task = await rare_task_writer(conn)
        normal = await task(20, True, 120 * 10000 + 2)
        claimed = await task(0, True, 100 * 10000 + 2, "claimed")
        low = await task(-120, True, (-20) * 10000 + 2)
        normal_done = await task(20, True, 120 * 10000 + 2, "done")
        high = await task(120, True, 220 * 10000 + 2 + 2100 * 10000)
        boosted = await task(20, True, 100_000_000 + 120 * 10000 + 2)
        plain = await task(20, False, 20 * 10000 + 2)
        monkeypatch.setattr(migrate_module, "available", lambda: [m for m in every if m[0] <= 31])
        assert 31 in await migrate_url(empty_database)
        eff = dict(await conn.fetch("SELECT id, eff_priority FROM tasks"))
        assert eff[normal] == 99 * 10000 + 2
        assert eff[claimed] == 99 * 10000 + 2
        assert eff[low] == (-20) * 10000 + 2
        assert eff[normal_done] == 120 * 10000 + 2
        assert eff[high] == 220 * 10000 + 2 + 2100 * 10000
        assert eff[boosted] == 100_000_000 + 120 * 10000 + 2
        assert eff[plain] == 20 * 10000 + 2
        # what the routing job writes from now on, bumped and not
        level = "SELECT routing_eff_priority($1, $2, 2)"
        assert await conn.fetchval(level, 20, True) == eff[normal]
        assert await conn.fetchval(level, -120, True) == eff[low]
        assert await conn.fetchval(level, 120, True) == 220 * 10000 + 2
        assert await conn.fetchval(level, 20, False) == eff[plain]
        assert await conn.fetchval("SELECT routing_scarce_lift(20, 2)") == eff[normal]
    finally:
        await conn.close()
