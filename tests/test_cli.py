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

from .conftest import free_port
from .helpers import Api, tasks_of
from .processes import ROOT, ServerProcess


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not under pytest's tmp_path: embedded Postgres runs as an unprivileged user when we are
    # root, and pytest keeps its own tmp root private (0700), so that user could not enter it.
    path = Path(tempfile.mkdtemp(prefix="taskroute-embedded-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_serve_without_database_url_uses_embedded_postgres(data_dir: Path) -> None:
    tmp_path = data_dir
    server = ServerProcess("", free_port(), tmp_path)
    server.env.pop("DATABASE_URL")
    await asyncio.to_thread(server.start, 90)
    try:
        assert (tmp_path / "pg" / "PG_VERSION").exists()
        assert "embedded Postgres" in server.log.read_text()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TASKROUTE_DATA_DIR": str(tmp_path)}
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
        async with Api(server.url) as api:
            created = await api.create_project(token, tasks_of("grading", 2))
            assert created["project"]["status"] == "active"
    finally:
        server.stop()
    # the embedded Postgres stops with the server (no stray postmaster left behind)
    assert not (tmp_path / "pg" / "postmaster.pid").exists()
