"""Fixtures for the batch tests: the two blob stores (`stores.py`) and servers on them."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ..helpers import Api, InProcessServer, settings_for
from .stores import (
    AWS_ENV,
    SUITE_SETTINGS,
    FolderStore,
    Moto,
    S3Store,
    Serve,
    Served,
    StartServer,
    StoreHandle,
)


@pytest.fixture(scope="session")
def moto() -> Iterator[Moto]:
    saved = {k: os.environ.get(k) for k in [*AWS_ENV, "AWS_ENDPOINT_URL"]}
    # moto's server logs every request at INFO: 20,000 PUTs would go through log capture
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    m = Moto()
    m.start()
    os.environ.update(AWS_ENV)
    os.environ["AWS_ENDPOINT_URL"] = m.endpoint  # the standard variable the server reads
    yield m
    m.stop()
    for k, val in saved.items():
        if val is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = val


@pytest.fixture(params=["folder", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreHandle]:
    if request.param == "folder":
        s: StoreHandle = FolderStore(tmp_path / "blobs")
    else:
        s = S3Store(request.getfixturevalue("moto"))
    yield s
    if isinstance(s, FolderStore) and s.root.is_file():
        s.repair()
    if isinstance(s, S3Store) and s.moto.server is None:
        s.moto.start()


@pytest_asyncio.fixture
async def start_server(
    database_url: str, tmp_path: Path, store: StoreHandle
) -> AsyncIterator[StartServer]:
    """Starts in-process servers on the test's database and store (with overrides)."""
    started: list[InProcessServer] = []

    async def start(**overrides: Any) -> InProcessServer:
        settings = settings_for(
            database_url, tmp_path, **{"blob_url": store.url, **SUITE_SETTINGS, **overrides}
        )
        srv = InProcessServer(settings)
        await srv.start()
        started.append(srv)
        return srv

    yield start
    for srv in reversed(started):
        await srv.stop()


@pytest_asyncio.fixture
async def serve(start_server: StartServer) -> AsyncIterator[Serve]:
    """`srv, api = await serve(**overrides)`: a server as `start_server` starts it and an open
    API client of it; the clients close before the servers stop."""
    clients: list[Api] = []

    async def start(**overrides: Any) -> Served:
        srv = await start_server(**overrides)
        api = await Api(srv.url).__aenter__()
        clients.append(api)
        return Served(srv, api)

    yield start
    for api in reversed(clients):
        await api.__aexit__(None, None, None)
