"""schema.graphql at the repository root is the live schema (see taskroute/schema/sdl.py)."""

from __future__ import annotations

import subprocess
import sys

from taskroute.schema.sdl import export_sdl

from ..procs import ROOT

REGENERATE = "python -m taskroute schema -o schema.graphql"


def test_checked_in_schema_matches_live_schema() -> None:
    published = (ROOT / "schema.graphql").read_text()
    assert published == export_sdl(), f"schema.graphql is stale: run `{REGENERATE}`"
    assert "type Mutation" in published and "claimNextTask" in published


def test_cli_prints_the_same_sdl() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "taskroute", "schema"],
        capture_output=True, text=True, check=True, timeout=60, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert out.stdout == export_sdl()
