"""Migrations and functions: ordered, recorded, idempotent, safe when processes start together;
functions and triggers reinstalled in place when their text changes; a database migrated before
the squash moved onto the baseline unchanged."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from taskroute.db import migrate as migrate_module
from taskroute.db.migrate import (
    BASELINE,
    FUNCTIONS,
    MIGRATIONS,
    SQUASHED,
    MigrationError,
    available,
    migrate_url,
    statements,
)
from taskroute.db.queries import Q

from ..helpers import Dropper, dsn_for

AT_SQUASH = Path(__file__).parent / "fixtures" / "schema_at_0031.sql"


async def _new_database(admin_dsn: str, dropper: Dropper) -> AsyncIterator[str]:
    name = f"taskroute_m_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield dsn_for(admin_dsn, name)
    finally:
        dropper.drop(name)


@pytest_asyncio.fixture
async def empty_database(pg_admin_dsn: str, dropper: Dropper) -> AsyncIterator[str]:
    async for dsn in _new_database(pg_admin_dsn, dropper):
        yield dsn


@pytest_asyncio.fixture
async def other_empty_database(pg_admin_dsn: str, dropper: Dropper) -> AsyncIterator[str]:
    async for dsn in _new_database(pg_admin_dsn, dropper):
        yield dsn


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


async def test_migrations_start_at_the_baseline_unique_and_ascending() -> None:
    """Numbers are handed out to work done in parallel, so a later number may land before an
    earlier one (a gap for a while); each is recorded once and files apply in number order."""
    found = available()
    assert (found[0][0], found[0][1]) == BASELINE
    versions = [v for v, _, _ in found]
    assert len(set(versions)) == len(versions)
    assert versions == sorted(versions)


def test_migrations_hold_no_functions_or_triggers() -> None:
    """Functions and triggers have one home, db/functions/ (installed by digest)."""
    pattern = re.compile(r"\bCREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|TRIGGER|PROCEDURE)\b", re.I)
    offenders = [p.name for p in sorted(MIGRATIONS.glob("*.sql")) if pattern.search(p.read_text())]
    assert offenders == []


async def test_every_function_and_trigger_is_declared_once(db: asyncpg.Connection) -> None:
    declared = statements()
    functions = sorted(s.name for s in declared if s.kind == "function")
    triggers = sorted(s.key for s in declared if s.kind == "trigger")
    in_db = await db.fetch(
        "SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace ORDER BY 1"
    )
    assert [r["proname"] for r in in_db] == functions
    in_db = await db.fetch(
        "SELECT tgname || ' ON ' || tgrelid::regclass::text AS key FROM pg_trigger"
        " WHERE NOT tgisinternal ORDER BY 1"
    )
    assert [r["key"] for r in in_db] == triggers
    assert sorted(await db.fetchval("SELECT triggers FROM schema_functions")) == triggers


# Upgrading a database migrated before the squash ---------------------------------------------


def _schema_dump(dsn: str) -> str:
    out = subprocess.run(
        ["pg_dump", "--schema-only", "--no-owner", "--no-privileges", dsn],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return "\n".join(line for line in out.splitlines() if not line.startswith("\\"))


async def _load_at_squash(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(AT_SQUASH.read_text())
    finally:
        await conn.close()


async def test_a_database_at_the_squashed_chains_end_moves_onto_the_baseline(
    empty_database: str, other_empty_database: str
) -> None:
    """Its tables are the baseline's already: the records are rewritten, the functions and
    triggers reinstalled, and the schema is then exactly a fresh database's; its rows stay."""
    old, fresh = empty_database, other_empty_database
    await _load_at_squash(old)
    conn = await asyncpg.connect(old)
    try:
        customer = await conn.fetchval("INSERT INTO customers (name) VALUES ('c') RETURNING id")
        project = await conn.fetchval(
            "INSERT INTO projects (customer_id, name, priority, deadline_bumped)"
            " VALUES ($1, 'p', 20, true) RETURNING id",
            customer,
        )
        item = await conn.fetchval(
            "INSERT INTO items (project_id, skill) VALUES ($1, 'rare') RETURNING id", project
        )
        task = await conn.fetchval(
            "INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, status)"
            " VALUES ($1, $2, 'rare', 2, 990002, 'open') RETURNING id",
            item,
            project,
        )

        # the baseline is recorded as applied; only the migrations after it run
        assert await migrate_url(old) == [v for v, _, _ in available() if v > BASELINE[0]]
        assert await migrate_url(fresh) == [v for v, _, _ in available()]
        old_dump, fresh_dump = await asyncio.gather(
            asyncio.to_thread(_schema_dump, old), asyncio.to_thread(_schema_dump, fresh)
        )
        assert old_dump == fresh_dump

        recorded = await conn.fetch("SELECT version, name FROM schema_migrations ORDER BY 1")
        assert [tuple(r) for r in recorded] == [(v, n) for v, n, _ in available()]
        assert await conn.fetchval("SELECT status FROM tasks WHERE id = $1", task) == "open"
        assert await conn.fetchval("SELECT eff_priority FROM tasks WHERE id = $1", task) == 990002
        # the rows the old triggers wrote are there, and the new triggers write on
        assert await conn.fetchval("SELECT count(*) FROM project_quality") == 1
        assert await conn.fetchval("SELECT sum(n) FROM task_count_deltas") == 1
        await conn.execute("UPDATE tasks SET status = 'done' WHERE id = $1", task)
        assert await conn.fetchval("SELECT finished_at FROM tasks WHERE id = $1", task)
        assert (
            await conn.fetchval("SELECT sum(n) FROM task_count_deltas WHERE status = 'open'") == 0
        )
        assert await migrate_url(old) == []  # and it stays at the baseline
    finally:
        await conn.close()


@pytest.mark.parametrize(
    "recorded",
    [
        pytest.param([v for v in SQUASHED if v <= 20], id="stopped-at-0020"),
        pytest.param([v for v in SQUASHED if v != 27], id="one-missing"),
        pytest.param([*SQUASHED, 32], id="one-more-from-a-branch"),
    ],
)
async def test_a_database_part_way_through_the_squashed_chain_is_refused(
    empty_database: str, recorded: list[int]
) -> None:
    conn = await asyncpg.connect(empty_database)
    try:
        await conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        await conn.executemany(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            [(v, SQUASHED.get(v, "from_a_branch")) for v in recorded],
        )
        with pytest.raises(MigrationError, match="not through all of them"):
            await migrate_url(empty_database)
        assert await conn.fetchval("SELECT count(*) FROM schema_migrations") == len(recorded)
        assert await conn.fetchval("SELECT to_regclass('tasks')") is None
    finally:
        await conn.close()


# Reinstalling the functions ------------------------------------------------------------------


async def _oid(conn: asyncpg.Connection, name: str) -> int:
    oid: int = await conn.fetchval("SELECT oid FROM pg_proc WHERE proname = $1", name)
    return oid


async def _signatures(conn: asyncpg.Connection, *names: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT oid::regprocedure::text AS sig FROM pg_proc WHERE proname = ANY ($1::text[])"
        " ORDER BY 1",
        list(names),
    )
    return [r["sig"] for r in rows]


@pytest.fixture
def functions_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of db/functions the test edits, installed instead of the real one."""
    folder = tmp_path / "functions"
    shutil.copytree(FUNCTIONS, folder)
    monkeypatch.setattr(migrate_module, "FUNCTIONS", folder)
    return folder


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


async def test_unchanged_functions_are_not_reinstalled(empty_database: str) -> None:
    await migrate_url(empty_database)
    conn = await asyncpg.connect(empty_database)
    try:
        before = await conn.fetchrow("SELECT digest, installed_at FROM schema_functions")
        claim = await conn.fetchval(
            "SELECT xmin::text FROM pg_proc WHERE proname = 'taskroute_claim'"
        )
        assert await migrate_url(empty_database) == []
        assert await conn.fetchrow("SELECT digest, installed_at FROM schema_functions") == before
        assert (
            await conn.fetchval("SELECT xmin::text FROM pg_proc WHERE proname = 'taskroute_claim'")
            == claim
        )
    finally:
        await conn.close()


async def test_changed_functions_are_replaced_in_place_and_undeclared_ones_dropped(
    empty_database: str, functions_copy: Path
) -> None:
    """A changed body is replaced in place (column defaults and triggers stay attached); a
    function or trigger no longer declared is dropped; a new signature replaces the old one."""
    await migrate_url(empty_database)
    conn = await asyncpg.connect(empty_database)
    try:
        clock, finished = (
            await _oid(conn, "taskroute_now"),
            await _oid(conn, "taskroute_task_finished"),
        )
        _edit(
            functions_copy / "clock.sql",
            "AS $$ SELECT now() $$",
            "AS $$ SELECT now() + interval '1 day' $$",
        )
        # a signature change (one more parameter) and a trigger and its function gone
        _edit(
            functions_copy / "routing.sql",
            "routing_class(project_priority integer) RETURNS text",
            "routing_class(project_priority integer, spare integer DEFAULT 0) RETURNS text",
        )
        ledger = functions_copy / "ledger.sql"
        ledger.write_text("-- nothing left here\n")
        await migrate_url(empty_database)

        assert await _oid(conn, "taskroute_now") == clock
        assert await _oid(conn, "taskroute_task_finished") == finished
        assert await conn.fetchval("SELECT taskroute_now() > now() + interval '23 hours'")
        # the default calls the new body: it was never detached
        at = await conn.fetchval("INSERT INTO customers (name) VALUES ('c') RETURNING created_at")
        assert at > await conn.fetchval("SELECT now() + interval '23 hours'")
        assert await _signatures(conn, "routing_class") == ["routing_class(integer,integer)"]
        assert await _signatures(conn, "payouts_append_only") == []
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_trigger WHERE tgname = 'payouts_no_update_delete'"
            )
            == 0
        )
        assert "payouts_no_update_delete ON payouts" not in await conn.fetchval(
            "SELECT triggers FROM schema_functions"
        )
    finally:
        await conn.close()


async def test_a_function_that_cannot_be_replaced_is_recreated_with_its_dependents(
    empty_database: str, functions_copy: Path
) -> None:
    """A renamed parameter cannot be replaced in place: the function is dropped and made anew,
    and so are the functions whose SQL-standard bodies call it."""
    await migrate_url(empty_database)
    quality = functions_copy / "quality.sql"
    text = quality.read_text()
    start = text.index("CREATE OR REPLACE FUNCTION taskroute_answer_key")
    end = text.index("CREATE OR REPLACE FUNCTION taskroute_gold_correct")
    quality.write_text(text[:start] + text[start:end].replace("p_field", "p_key") + text[end:])
    await migrate_url(empty_database)
    conn = await asyncpg.connect(empty_database)
    try:
        args = await conn.fetchval(
            "SELECT proargnames FROM pg_proc WHERE proname = 'taskroute_answer_key'"
        )
        assert args == ["p_answer", "p_key"]
        assert await conn.fetchval(
            """SELECT taskroute_gold_correct('{"a": 1, "b": 2}', '{"a": 1, "b": 3}', 'a')"""
        )
    finally:
        await conn.close()


async def test_a_later_migration_and_the_functions_it_needs_or_that_need_it(
    empty_database: str, functions_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration after the baseline may call a new function in a column default (installed
    before it); a new function returning its table's row type, and a trigger on that table,
    are installed after it. All in the one run."""
    await migrate_url(empty_database)
    migrations = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS, migrations)
    shipped = [v for v, _, _ in available()]
    nxt = shipped[-1] + 1
    (migrations / f"{nxt:04d}_widgets.sql").write_text(
        "CREATE TABLE widgets (id integer PRIMARY KEY, code text NOT NULL DEFAULT widget_code(),"
        " touched boolean NOT NULL DEFAULT false);\n"
    )
    monkeypatch.setattr(migrate_module, "MIGRATIONS", migrations)
    (functions_copy / "widgets.sql").write_text(
        "-- Test functions around a table a later migration adds.\n"
        "CREATE OR REPLACE FUNCTION widget_code() RETURNS text\n"
        "LANGUAGE sql IMMUTABLE AS $$ SELECT 'w' $$;\n\n"
        "CREATE OR REPLACE FUNCTION widgets_all() RETURNS SETOF widgets\n"
        "LANGUAGE sql STABLE AS $$ SELECT * FROM widgets ORDER BY id $$;\n\n"
        "CREATE OR REPLACE FUNCTION widgets_touch() RETURNS trigger\n"
        "LANGUAGE plpgsql AS $fn$ BEGIN NEW.touched := true; RETURN NEW; END $fn$;\n\n"
        "CREATE OR REPLACE TRIGGER widgets_touch BEFORE INSERT ON widgets\n"
        "    FOR EACH ROW EXECUTE FUNCTION widgets_touch();\n"
    )
    assert await migrate_url(empty_database) == [nxt]
    conn = await asyncpg.connect(empty_database)
    try:
        await conn.execute("INSERT INTO widgets (id) VALUES (1)")
        rows = await conn.fetch("SELECT * FROM widgets_all()")
        assert [tuple(r) for r in rows] == [(1, "w", True)]
        recorded = await conn.fetch("SELECT version, name FROM schema_migrations ORDER BY 1")
        assert [tuple(r) for r in recorded][0] == BASELINE
        assert [tuple(r) for r in recorded][-1] == (nxt, "widgets")
    finally:
        await conn.close()
    # and on a new database, where the baseline and the later ones run in the same install
    conn = await asyncpg.connect(empty_database)
    try:
        await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    finally:
        await conn.close()
    assert await migrate_url(empty_database) == [*shipped, nxt]
