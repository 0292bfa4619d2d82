"""The schema: numbered migrations for tables (`migrations/NNNN_name.sql`, recorded in a table),
and the functions and triggers of `functions/*.sql`, reinstalled whenever their text changes.

Tables change only through numbered migrations (DDL and backfills), applied once each in
number order after the baseline (0001). Functions and triggers are code: every one of them is
declared once in `functions/*.sql`, with the named blocks of `queries/*.sql` spliced in, so they
never drift from the statements the application and its EXPLAIN tests run.

One run, in one transaction (callers see the old schema or the new one, never a mix):

1. every function, `CREATE OR REPLACE` with bodies unchecked, before the migrations: tables'
   defaults and index expressions may call them (taskroute_now()), and replacing in place keeps
   those and the triggers attached. A function that cannot be created yet (its signature names
   a table's row type, or its SQL-standard body reads a table) waits for step 3;
2. the pending migrations;
3. the functions that waited, then every trigger (`CREATE OR REPLACE TRIGGER`);
4. the functions and triggers no longer declared are dropped (a function whose signature
   changed counts as no longer declared under its old signature).

Nothing runs when no migration is pending and the functions' digest is the recorded one.
A function name is declared once (no overloads). A rolling deploy whose function signatures
change must not mix old and new processes. Safe when several processes start at once: the
whole run holds an advisory lock.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from taskroute.db.queries import BLOCKS, splice

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
FUNCTIONS = Path(__file__).parent / "functions"
# Arbitrary constant identifying "taskroute migrations" among advisory locks.
_LOCK_KEY = 0x7A5C0001

# The migrations squashed into 0001_baseline.sql, as databases migrated before the squash
# record them. A database that ran all of them has exactly the baseline's tables.
SQUASHED: dict[int, str] = {
    1: "init",
    2: "batches",
    3: "quality",
    4: "routing",
    5: "ledger",
    6: "queue_table_hygiene",
    7: "credential_invalidation",
    8: "accounts",
    9: "quality_decisions",
    10: "liveness_and_pace",
    11: "answer_schemas",
    12: "payment_policy",
    13: "project_completion",
    14: "payload_retention",
    15: "forecast_counters",
    17: "clock",
    18: "wake_tickets",
    20: "routing_scarcity_work",
    21: "ingest_requests_in_blob_store",
    22: "quality_clear_evidence",
    23: "gold_decided_with_real_work",
    24: "pace_merge_plan_cache",
    25: "result_feed_without_lock",
    26: "pace_fast_path",
    27: "task_counts_gold",
    28: "pace_cycle_ingredients",
    29: "routing_scarce_lift",
    30: "routing_bump_one_level",
    31: "routing_bump_below_high",
}
BASELINE = (1, "baseline")

_STATEMENT = re.compile(r"^CREATE OR REPLACE (FUNCTION|TRIGGER) (\w+)\b", re.MULTILINE)
_TRIGGER_TABLE = re.compile(r"\bON\s+(\w+)")
_COMMENT_OR_BLANK = re.compile(r"^\s*(--.*)?$")
# What creating a function before the migrations may fail on: a table, column, type or another
# function that does not exist yet.
_NOT_YET = (
    asyncpg.UndefinedTableError,
    asyncpg.UndefinedColumnError,
    asyncpg.UndefinedObjectError,
    asyncpg.UndefinedFunctionError,
)
_OURS = "pronamespace = current_schema()::regnamespace"


class MigrationError(RuntimeError):
    """The database cannot be migrated as it is (said why)."""


@dataclass(frozen=True)
class Statement:
    kind: str  # 'function' | 'trigger'
    name: str
    table: str | None  # a trigger's table
    sql: str

    @property
    def key(self) -> str:
        """How schema_functions records it: a function's name, 'trigger ON table'."""
        return self.name if self.table is None else f"{self.name} ON {self.table}"


def available() -> list[tuple[int, str, Path]]:
    found = []
    for path in sorted(MIGRATIONS.glob("*.sql")):
        number, _, name = path.stem.partition("_")
        found.append((int(number), name, path))
    return found


def functions_sql() -> str:
    """Every `functions/*.sql` file, spliced, in name order."""
    texts = [splice(path.read_text(), BLOCKS) for path in sorted(FUNCTIONS.glob("*.sql"))]
    return "\n\n".join(texts)


def _trim(chunk: str) -> str:
    """A statement without the comment lines (the next statement's) that follow it."""
    lines = chunk.rstrip().split("\n")
    while lines and _COMMENT_OR_BLANK.match(lines[-1]):
        lines.pop()
    return "\n".join(lines)


def statements(sql: str | None = None) -> list[Statement]:
    """The functions' SQL as statements. Each starts at a line `CREATE OR REPLACE FUNCTION` or
    `CREATE OR REPLACE TRIGGER`; only comments may stand outside them."""
    sql = functions_sql() if sql is None else sql
    heads = list(_STATEMENT.finditer(sql))
    stray = [line for line in sql[: heads[0].start() if heads else None].split("\n")]
    if not all(_COMMENT_OR_BLANK.match(line) for line in stray):
        raise MigrationError("functions/*.sql holds only CREATE OR REPLACE FUNCTION | TRIGGER")
    found: list[Statement] = []
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        text = _trim(sql[head.start() : after.start() if after else None])
        kind, name = head.group(1).lower(), head.group(2)
        table = None
        if kind == "trigger":
            on = _TRIGGER_TABLE.search(text)
            if on is None:
                raise MigrationError(f"trigger {name}: no ON <table>")
            table = on.group(1)
        found.append(Statement(kind, name, table, text))
    keys = [s.key for s in found]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise MigrationError(f"declared more than once in functions/*.sql: {', '.join(twice)}")
    return found


async def migrate(conn: asyncpg.Connection) -> list[int]:
    """Apply every migration not yet recorded, then (re)install the functions and triggers if
    anything changed; return the versions applied."""
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await _bookkeeping(conn)
        await _adopt_squashed(conn)
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        pending = [m for m in available() if m[0] not in done]
        await _install(conn, pending)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return [version for version, _, _ in pending]


async def _bookkeeping(conn: asyncpg.Connection) -> None:
    await conn.execute(
        """CREATE TABLE IF NOT EXISTS schema_migrations (
               version integer PRIMARY KEY,
               name text NOT NULL,
               applied_at timestamptz NOT NULL DEFAULT now());
           CREATE TABLE IF NOT EXISTS schema_functions (
               singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
               digest text NOT NULL,
               names text[] NOT NULL,
               installed_at timestamptz NOT NULL DEFAULT now());
           ALTER TABLE schema_functions
               ADD COLUMN IF NOT EXISTS triggers text[] NOT NULL DEFAULT '{}'"""
    )


async def _adopt_squashed(conn: asyncpg.Connection) -> None:
    """A database migrated through the squashed chain has the baseline's tables: record it as
    at the baseline (its functions are then reinstalled as changed). Part of the chain: refused."""
    recorded = {
        r["version"]: r["name"] for r in await conn.fetch("SELECT * FROM schema_migrations")
    }
    if recorded.get(1) != SQUASHED[1]:
        return
    missing = [f"{v:04d}_{n}" for v, n in SQUASHED.items() if recorded.get(v) != n]
    extra = [f"{v:04d}_{n}" for v, n in sorted(recorded.items()) if SQUASHED.get(v) != n]
    if missing or extra:
        raise MigrationError(
            "this database was migrated with migrations that were since squashed into"
            f" {BASELINE[0]:04d}_{BASELINE[1]}.sql, but not through all of them"
            f" (missing: {', '.join(missing) or 'none'}; not in that chain:"
            f" {', '.join(extra) or 'none'}). Only a database at the chain's end can be moved"
            " onto the baseline: recreate this one, or migrate it with a checkout from before"
            " the squash first."
        )
    async with conn.transaction():
        await conn.execute("DELETE FROM schema_migrations")
        await conn.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", *BASELINE
        )
    log.info("recorded the squashed migrations as %04d_%s", *BASELINE)


async def _install(conn: asyncpg.Connection, pending: list[tuple[int, str, Path]]) -> bool:
    sql = functions_sql()
    digest = hashlib.sha256(sql.encode()).hexdigest()
    current = await conn.fetchrow("SELECT digest, names, triggers FROM schema_functions")
    if not pending and current is not None and current["digest"] == digest:
        return False
    declared = statements(sql)
    functions = [s for s in declared if s.kind == "function"]
    triggers = [s for s in declared if s.kind == "trigger"]
    names = sorted({f.name for f in functions})
    old_names = set(current["names"]) if current is not None else set()
    old_triggers = set(current["triggers"]) if current is not None else set()
    async with conn.transaction():
        await conn.execute("SET LOCAL check_function_bodies = off")
        before = {
            r["oid"]
            for r in await conn.fetch(
                f"SELECT oid FROM pg_proc WHERE {_OURS} AND proname = ANY ($1::text[])",
                sorted(set(names) | old_names),
            )
        }
        waiting = await _create_functions(conn, functions, set(names), before, final=False)
        for version, name, path in pending:
            await conn.execute(path.read_text())
            await conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
            )
            log.info("applied migration %04d_%s", version, name)
        await _create_functions(conn, waiting, set(names), before, final=True)
        for trigger in triggers:
            await conn.execute(trigger.sql)
        for key in sorted(old_triggers - {t.key for t in triggers}):
            name, _, table = key.partition(" ON ")
            await conn.execute(f'DROP TRIGGER IF EXISTS "{name}" ON "{table}"')
        await _drop_undeclared(conn, names, old_names, before)
        await conn.execute(
            """INSERT INTO schema_functions (digest, names, triggers) VALUES ($1, $2, $3)
               ON CONFLICT (singleton) DO UPDATE
               SET digest = EXCLUDED.digest, names = EXCLUDED.names,
                   triggers = EXCLUDED.triggers, installed_at = now()""",
            digest,
            names,
            sorted(t.key for t in triggers),
        )
    log.info("installed %d database functions and %d triggers", len(names), len(triggers))
    return True


async def _create_functions(
    conn: asyncpg.Connection,
    todo: list[Statement],
    ours: set[str],
    before: set[int],
    *,
    final: bool,
) -> list[Statement]:
    """Creates (or replaces) what it can of `todo`, retrying while that makes progress (a
    SQL-standard body needs the functions it calls); returns the rest, or raises when `final`."""
    by_name = {f.name: f for f in todo}
    redefined: set[str] = set()
    progress = True
    while todo and progress:
        progress = False
        waiting: list[Statement] = []
        for function in todo:
            try:
                async with conn.transaction():
                    await conn.execute(function.sql)
                progress = True
            except asyncpg.InvalidFunctionDefinitionError:
                # Its return type, parameter names or defaults changed: CREATE OR REPLACE
                # cannot, so it is dropped (with the functions of ours built on it) and made anew.
                if function.name in redefined:
                    raise
                dropped = await _drop_for_redefinition(conn, function.name, ours, final=final)
                waiting.append(function)
                if dropped is not None:
                    redefined.add(function.name)
                    waiting.extend(
                        by_name[n] for n in dropped if n in by_name and n != function.name
                    )
                    progress = True
            except asyncpg.AmbiguousFunctionError as exc:
                # A call in a SQL-standard body matches both a function's new signature and
                # its old one (a parameter added with a default): the old one goes now.
                dropped = await _drop_replaced_overloads(conn, exc, ours, before)
                if dropped is None:
                    raise
                waiting.append(function)
                waiting.extend(by_name[n] for n in dropped if n in by_name and n != function.name)
                progress = True
            except _NOT_YET:
                waiting.append(function)
        todo = waiting
    if todo and final:
        await conn.execute(todo[0].sql)  # raises what keeps it from being created
    return todo


async def _drop_for_redefinition(
    conn: asyncpg.Connection, name: str, ours: set[str], *, final: bool
) -> list[str] | None:
    """Drops function `name` and our functions that depend on it; returns their names. None
    (or, when `final`, an error) if anything else depends on it (a default, index or trigger)."""
    oid = await conn.fetchval(f"SELECT oid FROM pg_proc WHERE {_OURS} AND proname = $1", name)
    return await _drop_with_our_dependents(conn, oid, name, ours, final=final)


async def _drop_with_our_dependents(
    conn: asyncpg.Connection, oid: int, name: str, ours: set[str], *, final: bool
) -> list[str] | None:
    rows = await conn.fetch(
        """WITH RECURSIVE dep (classid, objid) AS (
               SELECT classid, objid FROM pg_depend
               WHERE refclassid = 'pg_proc'::regclass AND refobjid = $1 AND deptype IN ('n', 'a')
               UNION
               SELECT d.classid, d.objid FROM pg_depend d
               JOIN dep ON d.refclassid = dep.classid AND d.refobjid = dep.objid
               WHERE d.deptype IN ('n', 'a'))
           SELECT pg_describe_object(dep.classid, dep.objid, 0) AS what, p.proname
           FROM dep
           LEFT JOIN pg_proc p ON dep.classid = 'pg_proc'::regclass AND p.oid = dep.objid""",
        oid,
    )
    others = [r["what"] for r in rows if r["proname"] not in ours]
    if others:
        if final:
            raise MigrationError(
                f"function {name} must be dropped to change its signature, but"
                f" {', '.join(others)} use it: change those in a migration first"
            )
        return None
    signature = await conn.fetchval("SELECT $1::oid::regprocedure::text", oid)
    await conn.execute(f"DROP FUNCTION {signature} CASCADE")
    return [name, *(r["proname"] for r in rows)]


async def _drop_replaced_overloads(
    conn: asyncpg.Connection, exc: asyncpg.AmbiguousFunctionError, ours: set[str], before: set[int]
) -> list[str] | None:
    """Drops the old signatures of the function an ambiguous call names, once this run has
    created its new one, with our functions built on them; returns the names dropped (to be
    created again), None when there is nothing such to drop."""
    found = re.search(r"function (\w+)\(", str(exc))
    if found is None or found.group(1) not in ours:
        return None
    name = found.group(1)
    rows = await conn.fetch(f"SELECT oid FROM pg_proc WHERE {_OURS} AND proname = $1", name)
    old = [r["oid"] for r in rows if r["oid"] in before]
    if not old or len(old) == len(rows):
        return None
    dropped: list[str] = []
    for oid in old:
        names = await _drop_with_our_dependents(conn, oid, name, ours, final=True)
        dropped.extend(names or ())
    log.info("dropped the old signatures of %s", name)
    return dropped


async def _drop_undeclared(
    conn: asyncpg.Connection, names: list[str], old_names: set[str], before: set[int]
) -> None:
    """Drops our functions not declared any more: names gone from functions/*.sql, and the old
    signature of a declared name that now has a new one (it was created under a new oid)."""
    rows = await conn.fetch(
        f"SELECT oid, proname, oid::regprocedure::text AS sig FROM pg_proc"
        f" WHERE {_OURS} AND proname = ANY ($1::text[])",
        sorted(set(names) | old_names),
    )
    declared = set(names)
    renewed = {r["proname"] for r in rows if r["proname"] in declared and r["oid"] not in before}
    stale = [
        r["sig"]
        for r in rows
        if r["proname"] not in declared or (r["proname"] in renewed and r["oid"] in before)
    ]
    if stale:
        await conn.execute("DROP FUNCTION " + ", ".join(stale))
        log.info("dropped database functions %s", ", ".join(stale))


async def migrate_url(dsn: str) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        return await migrate(conn)
    finally:
        await conn.close()
