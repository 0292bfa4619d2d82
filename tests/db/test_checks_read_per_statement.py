"""Postgres reads a table's CHECK constraints, and the WHEN conditions of its row triggers,
back from their stored node text in every statement that writes the table. On the tables every
claim and submit writes, value lists are one array constant, not IN lists (a node per value,
folded again per statement): migrations/0011_checks_as_array_constants.sql and the
`tasks_finished` trigger (functions/projects.sql). The rules themselves still hold."""

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


async def test_the_cycles_tables_check_value_lists_as_one_constant(db: asyncpg.Connection) -> None:
    in_lists = await db.fetch(
        "SELECT conrelid::regclass::text AS tbl, conname FROM pg_constraint"
        " WHERE contype = 'c' AND conrelid::regclass::text = ANY ($1::text[])"
        " AND conbin::text LIKE '%{ARRAYEXPR%'",
        CYCLE_TABLES,
    )
    assert [dict(r) for r in in_lists] == []
    conditions = await db.fetch(
        "SELECT tgname FROM pg_trigger WHERE tgrelid::regclass::text = ANY ($1::text[])"
        " AND tgqual LIKE '%{ARRAYEXPR%'",
        CYCLE_TABLES,
    )
    assert [r["tgname"] for r in conditions] == []


@pytest.mark.parametrize(
    ("table", "column", "key"),
    [
        ("tasks", "status", "id"),
        ("tasks", "kind", "id"),
        ("assignments", "status", "id"),
        ("assignments", "review_status", "id"),
        ("payouts", "kind", "id"),
        ("item_results", "status", "item_id"),
        ("result_changes", "change", "seq"),
        ("experts", "status", "id"),
        ("expert_skills", "status", "expert_id"),
    ],
)
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
