"""Postgres reads a table's CHECK constraints, and the WHEN conditions of its row triggers,
back from their stored node text in every statement that writes the table; a domain's
constraints it reads once per session. The value lists of the columns every claim and submit
writes are domains (migrations/0013_status_domains.sql); the WHEN conditions on those tables
hold value lists as one array constant, not IN lists (a node per value, folded again per
statement; `tasks_finished`, functions/projects.sql). The rules themselves still hold."""

from __future__ import annotations

import asyncpg
import pytest

from ..helpers import Api, tasks_of

CYCLE_TABLES = [
    "tasks",
    "assignments",
    "payouts",
    "item_results",
    "result_changes",
    "experts",
    "expert_skills",
]

VALUE_LISTS = [
    ("tasks", "status", "id"),
    ("tasks", "kind", "id"),
    ("assignments", "status", "id"),
    ("assignments", "review_status", "id"),
    ("payouts", "kind", "id"),
    ("item_results", "status", "item_id"),
    ("result_changes", "change", "seq"),
    ("experts", "status", "id"),
    ("expert_skills", "status", "expert_id"),
]


async def test_the_cycles_value_lists_are_domains_not_table_checks(
    db: asyncpg.Connection,
) -> None:
    kinds = await db.fetch(
        "SELECT c.relname AS tbl, a.attname AS col, t.typtype::text AS kind"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " JOIN pg_type t ON t.oid = a.atttypid"
        " WHERE (c.relname, a.attname) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
        [t for t, _, _ in VALUE_LISTS],
        [c for _, c, _ in VALUE_LISTS],
    )
    assert sorted((r["tbl"], r["col"], r["kind"]) for r in kinds) == sorted(
        (t, c, "d") for t, c, _ in VALUE_LISTS
    )
    # what is left as table checks spans columns (payouts' kind against its references)
    single_column = await db.fetch(
        "SELECT conrelid::regclass::text AS tbl, conname FROM pg_constraint"
        " WHERE contype = 'c' AND conrelid::regclass::text = ANY ($1::text[])"
        " AND cardinality(conkey) = 1",
        CYCLE_TABLES,
    )
    assert [dict(r) for r in single_column] == []
    conditions = await db.fetch(
        "SELECT tgname FROM pg_trigger WHERE tgrelid::regclass::text = ANY ($1::text[])"
        " AND tgqual LIKE '%{ARRAYEXPR%'",
        CYCLE_TABLES,
    )
    assert [r["tgname"] for r in conditions] == []


@pytest.mark.parametrize(("table", "column", "key"), VALUE_LISTS)
async def test_a_value_outside_a_list_is_refused(
    api: Api, db: asyncpg.Connection, table: str, column: str, key: str
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("grading", 1), payCents=5)
    claim = await api.claim(expert["token"])
    assert claim is not None
    await api.submit(expert["token"], claim["assignmentId"], {"grade": 1})
    row = await db.fetchval(f"SELECT {key} FROM {table} LIMIT 1")
    assert row is not None, f"the cycle wrote no {table} row"
    with pytest.raises(asyncpg.CheckViolationError):
        if table == "payouts":  # append-only (a trigger refuses updates): a new line instead
            await db.execute(
                "INSERT INTO payouts (expert_id, project_id, amount_cents, kind)"
                " SELECT expert_id, project_id, 1, 'bogus' FROM payouts WHERE id = $1",
                row,
            )
        else:
            await db.execute(f"UPDATE {table} SET {column} = 'bogus' WHERE {key} = $1", row)
