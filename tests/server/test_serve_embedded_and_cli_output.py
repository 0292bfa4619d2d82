"""`taskroute serve` on a fresh machine: no DATABASE_URL -> embedded Postgres in the data dir."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..helpers import Api, tasks_of
from ..procs import ROOT, ServeProcess


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not under pytest's tmp_path: embedded Postgres runs as an unprivileged user when we are
    # root, and pytest keeps its own tmp root private (0700), so that user could not enter it.
    path = Path(tempfile.mkdtemp(prefix="taskroute-embedded-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_serve_without_database_url_uses_embedded_postgres(data_dir: Path) -> None:
    server = ServeProcess("", data_dir / "server.log", TASKROUTE_DATA_DIR=str(data_dir),
                          TASKROUTE_LOG_FORMAT="text")  # fmt: skip
    await server.astart(90)
    try:
        assert (data_dir / "pg" / "PG_VERSION").exists()
        assert "embedded Postgres" in server.log_path.read_text()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TASKROUTE_DATA_DIR": str(data_dir)}
        env.pop("DATABASE_URL", None)
        out = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "taskroute", "admin", "create-customer", "acme"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        token = json.loads(out.stdout)["token"]
        assert out.stderr == f"database: embedded Postgres in {data_dir.resolve()}\n"
        # from another folder, naming the data folder: the same database, not a new empty one
        env.pop("TASKROUTE_DATA_DIR")
        listed = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "taskroute", "admin", "list-customers", "--data-dir",
             str(data_dir)],
            env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=60,
            check=True,
        )  # fmt: skip
        assert [c["name"] for c in json.loads(listed.stdout)] == ["acme"]
        async with Api(server.url) as api:
            created = await api.create_project(token, tasks_of("grading", 2))
            assert created["project"]["status"] == "active"
    finally:
        server.stop()
    # the embedded Postgres stops with the server (no stray postmaster left behind)
    assert not (data_dir / "pg" / "postmaster.pid").exists()


def test_admin_commands_print_their_result_only(database_url: str) -> None:
    """One JSON line on stdout; on stderr only the line saying which database (no JSON log
    lines around it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": database_url}
    out = subprocess.run(
        [sys.executable, "-m", "taskroute.server.cli", "admin", "create-customer", "acme"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert out.stderr == f"database: {database_url}\n"
    assert set(json.loads(out.stdout)) >= {"id", "token"}
    help_text = subprocess.run(
        [sys.executable, "-m", "taskroute.server.cli", "serve", "--help"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    for shown in ("(default: 127.0.0.1)", "(default: 8000)", "(default: 1)"):
        assert shown in help_text
