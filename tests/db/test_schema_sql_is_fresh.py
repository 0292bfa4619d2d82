"""schema.sql is what a fresh migrate produces (a reviewer reads one file, not every migration)."""

from __future__ import annotations

import difflib
import importlib.util
from typing import Any

from ..procs import ROOT

REGENERATE = ".venv/bin/python scripts/schema_sql.py"


def _script() -> Any:
    path = ROOT / "scripts" / "schema_sql.py"
    spec = importlib.util.spec_from_file_location("schema_sql", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_checked_in_schema_sql_matches_a_fresh_migrate(pg_admin_dsn: str) -> None:
    script = _script()
    fresh = await script.dump_migrated(pg_admin_dsn)
    checked_in = script.SCHEMA_SQL.read_text() if script.SCHEMA_SQL.exists() else ""
    if fresh != checked_in:
        diff = "".join(
            difflib.unified_diff(
                checked_in.splitlines(True), fresh.splitlines(True), "schema.sql", "migrated", n=1
            )
        )
        raise AssertionError(
            "schema.sql is stale (a migration, or a db/functions or db/queries file, changed);"
            f" regenerate it with:\n    {REGENERATE}\nand commit it."
            f" First differences:\n{diff[:3000]}"
        )
