"""Real Postgres for every test: one migrated template per run, one copy per test (dropped in
the background, see helpers.Dropper)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from taskroute.db.migrate import migrate_url
from taskroute.db.pool import Database, create_pool

from .clock import DbClock
from .helpers import (
    Api,
    DbRoute,
    Dropper,
    InProcessServer,
    copy_database,
    dsn_for,
    settings_for,
)
from .procs import PrivatePgBouncer

CANDIDATE_ADMIN_DSNS = [
    os.environ.get("TASKROUTE_TEST_PG", ""),
    "postgresql://postgres@127.0.0.1:5432/postgres",
    "postgresql://root@127.0.0.1:5432/postgres",
]


CHECKOUT_BLOBS = Path(__file__).resolve().parent.parent / ".taskroute" / "blobs"


def _blob_entries() -> set[str]:
    return {p.name for p in CHECKOUT_BLOBS.iterdir()} if CHECKOUT_BLOBS.is_dir() else set()


@pytest.fixture(scope="session", autouse=True)
def tests_leave_the_checkouts_blobs_alone() -> Iterator[None]:
    """./.taskroute/blobs is where a developer's own server keeps payloads: tests write theirs
    into temporary folders. Fails the run if a test wrote there."""
    before = _blob_entries()
    yield
    added = _blob_entries() - before
    assert not added, f"tests wrote {len(added)} blob folders into {CHECKOUT_BLOBS}"


@pytest_asyncio.fixture(scope="session")
async def pg_admin_dsn() -> str:
    errors = []
    for dsn in filter(None, CANDIDATE_ADMIN_DSNS):
        try:
            conn = await asyncpg.connect(dsn, timeout=5)
        except (OSError, asyncpg.PostgresError) as exc:
            errors.append(f"{dsn}: {exc}")
            continue
        await conn.close()
        return dsn
    pytest.exit("no Postgres reachable for tests: " + "; ".join(errors), returncode=3)


@pytest.fixture(scope="session")
def dropper(pg_admin_dsn: str) -> Iterator[Dropper]:
    d = Dropper(pg_admin_dsn)
    yield d
    d.close()


@pytest_asyncio.fixture(scope="session")
async def template_db(pg_admin_dsn: str) -> AsyncIterator[str]:
    name = f"taskroute_tpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    conn = await asyncpg.connect(pg_admin_dsn)
    await conn.execute(f'CREATE DATABASE "{name}"')
    try:
        await migrate_url(dsn_for(pg_admin_dsn, name))
        yield name
    finally:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


@pytest_asyncio.fixture
async def database_url(pg_admin_dsn: str, template_db: str, dropper: Dropper) -> AsyncIterator[str]:
    """A fresh copy of the template for one test; dropped in the background afterwards (the
    drop forces its connections out, so nothing of the test outlives it)."""
    name = await copy_database(pg_admin_dsn, template_db)
    try:
        yield dsn_for(pg_admin_dsn, name)
    finally:
        dropper.drop(name)


@pytest_asyncio.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A direct connection for checking invariants in the database."""
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


@pytest_asyncio.fixture
async def jobs_db(database_url: str) -> AsyncIterator[Database]:
    """The app's Database on a small pool of its own, for running a background job's pass
    (sweep_once, routing_once, ...) from the test, at the moment the test chooses."""
    pool = await create_pool(database_url, min_size=1, max_size=4)
    try:
        yield Database(pool, timeout=30)
    finally:
        await pool.close()


@pytest.fixture(scope="session")
def pgbouncer(pg_admin_dsn: str) -> Iterator[PrivatePgBouncer]:
    """One private PgBouncer (transaction mode) per test run, in front of the test Postgres;
    each test's own database is reached through it by name."""
    bouncer = PrivatePgBouncer(pg_admin_dsn)
    bouncer.start()
    yield bouncer
    bouncer.stop()


@pytest.fixture(params=["direct", "pgbouncer"])
def db_route(request: pytest.FixtureRequest, database_url: str) -> DbRoute:
    """Run the test twice: straight to Postgres, and with the pool through PgBouncer."""
    if request.param == "direct":
        return DbRoute("direct", database_url, database_url)
    bouncer: PrivatePgBouncer = request.getfixturevalue("pgbouncer")
    return DbRoute("pgbouncer", bouncer.url_for(database_url), database_url)


@pytest_asyncio.fixture
async def clock(db: asyncpg.Connection) -> DbClock:
    """The test database's clock (`taskroute_now()`): `await clock.advance(seconds)` ends
    leases, windows and deadlines at once instead of waiting for them."""
    return DbClock(db)


@pytest_asyncio.fixture
async def server(database_url: str, tmp_path: Path) -> AsyncIterator[InProcessServer]:
    srv = InProcessServer(settings_for(database_url, tmp_path))
    await srv.start()
    yield srv
    await srv.stop()


@pytest_asyncio.fixture
async def api(server: InProcessServer) -> AsyncIterator[Api]:
    async with Api(server.url) as client:
        yield client
