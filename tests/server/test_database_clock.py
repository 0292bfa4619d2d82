"""One database clock: every statement reads taskroute_now(), which tests move and production
gets for free (it is now(), inlined)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import asyncpg
import pytest

from taskroute.db.migrate import FUNCTIONS
from taskroute.db.queries import QUERIES

from ..clock import DbClock
from ..helpers import Api, GraphQLError, tasks_of

# Every way SQL reads the wall clock, except through taskroute_now().
_WALL_CLOCK = re.compile(
    r"(?<![\w.])(now\(\)|current_timestamp|localtimestamp|clock_timestamp\(\)"
    r"|statement_timestamp\(\)|transaction_timestamp\(\)|current_time\b|localtime\b)",
    re.IGNORECASE,
)


def test_every_statement_reads_the_clock_tests_control() -> None:
    offenders = []
    for folder in (QUERIES, FUNCTIONS):
        for path in sorted(folder.glob("*.sql")):
            if path == FUNCTIONS / "clock.sql":
                continue  # taskroute_now() itself: the one place the wall clock is read
            for number, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("--", 1)[0]
                if _WALL_CLOCK.search(code):
                    offenders.append(f"{path.parent.name}/{path.name}:{number}: {line.strip()}")
    assert not offenders, (
        "read the time with taskroute_now() (functions/clock.sql), not now(), so tests can move "
        "the clock:\n" + "\n".join(offenders)
    )


async def test_column_defaults_follow_the_clock(db: asyncpg.Connection) -> None:
    rows = await db.fetch(
        "SELECT c.relname || '.' || a.attname AS col FROM pg_attrdef d"
        " JOIN pg_class c ON c.oid = d.adrelid"
        " JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum"
        " WHERE c.relnamespace = current_schema()::regnamespace"
        "   AND pg_get_expr(d.adbin, d.adrelid) ~* '(^|[^_])now\\(\\)|current_timestamp'"
        "   AND c.relname NOT IN ('schema_migrations', 'schema_functions')"
    )
    assert [r["col"] for r in rows] == [], "write DEFAULT taskroute_now() in new migrations"


async def test_production_clock_is_inlined_to_now(db: asyncpg.Connection) -> None:
    """What production pays: the planner replaces taskroute_now() by now() (no function call)."""
    rows = await db.fetch(
        "EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM tasks WHERE lease_until < taskroute_now()"
    )
    plan = "\n".join(r[0] for r in rows)
    assert "now()" in plan and "taskroute_now" not in plan, plan
    assert await db.fetchval("SELECT taskroute_now() = now()")


async def test_moving_the_clock_reaches_the_servers_connections(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    customer = await api.create_customer()
    first = await api.create_expert(["grading"], "first")
    second = await api.create_expert(["grading"], "second")
    await api.create_project(customer["token"], tasks_of("grading", 2), leaseSeconds=600)
    held = await api.claim(first["token"])
    assert held is not None

    await clock.advance(3600)
    # The held lease (600 s) ended an hour ago on the moved clock ...
    with pytest.raises(GraphQLError) as err:
        await api.heartbeat(first["token"], held["assignmentId"])
    assert err.value.code == "LEASE_EXPIRED"
    # ... and a new claim's lease starts from the moved clock, not the wall clock.
    taken = await api.claim(second["token"])
    assert taken is not None
    lease_until = datetime.fromisoformat(taken["leaseUntil"])
    wall = await db.fetchval("SELECT now()")
    assert timedelta(seconds=4100) < lease_until - wall < timedelta(seconds=4300)
    # Rows written by default carry the moved time too.
    claimed_at = await db.fetchval(
        "SELECT claimed_at FROM assignments WHERE id = $1::text::uuid", taken["assignmentId"]
    )
    assert claimed_at - wall > timedelta(seconds=3500)


async def test_the_clock_only_moves_forward(clock: DbClock) -> None:
    with pytest.raises(ValueError):
        await clock.advance(-1)
