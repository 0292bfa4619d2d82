"""Migrations: ordered, recorded, idempotent, safe when processes start together."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio

from taskroute.db.migrate import available, migrate_url
from taskroute.db.queries import Q

from .helpers import Dropper, dsn_for


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
