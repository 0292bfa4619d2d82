"""The two blob stores of the batch tests (a folder; S3 over moto's real HTTP server mode)
behind one interface the tests use to inspect, break and repair them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

import asyncpg
import boto3
from moto.server import ThreadedMotoServer

from taskroute.storage.local_folder import LocalBlobStore

from ..helpers import Api, InProcessServer, free_port

AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class Moto:
    """moto's server mode on a loopback port; stop() really closes the socket, so clients
    see refused connections (an object store that is down), and start() brings it back with
    the objects it held (moto keeps them in this process)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.server: ThreadedMotoServer | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            inner = self.server._server
            if inner is not None:
                inner.server_close()
            self.server = None


class StoreHandle:
    """What a test needs to know about the payload store behind the server."""

    kind: str
    url: str

    def keys(self) -> set[str]:
        raise NotImplementedError

    def read(self, key: str) -> bytes:
        raise NotImplementedError

    def break_(self) -> None:
        raise NotImplementedError

    def repair(self) -> None:
        raise NotImplementedError


class FolderStore(StoreHandle):
    kind = "folder"

    def __init__(self, root: Path) -> None:
        # `root` is a symlink, so breaking and repairing the store are single atomic renames:
        # a background write racing the switch sees the folder or the file, never a gap.
        self.root = root
        self.url = root.as_uri()
        self._real = root.with_name(root.name + ".real")
        self._real.mkdir(parents=True, exist_ok=True)
        self._not_a_folder = root.with_name(root.name + ".file")
        self._not_a_folder.write_text("not a folder")
        self._point(self._real)

    def _point(self, target: Path) -> None:
        link = self.root.with_name(self.root.name + ".link")
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        os.replace(link, self.root)

    def keys(self) -> set[str]:
        if not self.root.is_dir():
            return set()
        inspect = LocalBlobStore(self.root)
        try:
            return inspect.keys_on_disk()
        finally:
            inspect.close_blocking()

    def read(self, key: str) -> bytes:
        inspect = LocalBlobStore(self.root)
        try:
            return inspect.read_on_disk(key)
        finally:
            inspect.close_blocking()

    def break_(self) -> None:
        # Tests run as root, so permissions would not stop writes: point the store at a plain
        # file (every write then fails with NotADirectoryError).
        self._point(self._not_a_folder)

    def repair(self) -> None:
        self._point(self._real)


class S3Store(StoreHandle):
    kind = "s3"

    def __init__(self, moto: Moto) -> None:
        self.moto = moto
        self.bucket = f"payloads-{uuid.uuid4().hex[:12]}"
        self.prefix = "tr/blobs"
        self.url = f"s3://{self.bucket}/{self.prefix}"
        self.client = boto3.client("s3", endpoint_url=moto.endpoint)
        self.client.create_bucket(Bucket=self.bucket)

    def keys(self) -> set[str]:
        found: set[str] = set()
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix + "/"
        )
        for page in pages:
            for obj in page.get("Contents", []):
                found.add(obj["Key"].rsplit("/", 1)[1].removesuffix(".json"))
        return found

    def read(self, key: str) -> bytes:
        obj = self.client.get_object(Bucket=self.bucket, Key=f"{self.prefix}/{key[:2]}/{key}.json")
        return obj["Body"].read()

    def break_(self) -> None:
        self.moto.stop()

    def repair(self) -> None:
        self.moto.start()


# Small thresholds so the tests see both delivery modes and quick retries.
SUITE_SETTINGS: dict[str, Any] = {
    "inline_payload_bytes": 200,
    "ingest_chunk_tasks": 100,
    "ingest_poll_interval": 0.2,
    "ingest_retry_base": 0.1,
    "ingest_retry_max": 0.4,
    # long enough for a slow machine; link expiry is tested on a moved clock (LinkClock)
    "payload_url_ttl": 300,
    "max_payload_bytes": 64 * 1024,
}

StartServer = Callable[..., Awaitable[InProcessServer]]


class Served(NamedTuple):
    """A server on the test's database and store, and an API client of it."""

    server: InProcessServer
    api: Api


Serve = Callable[..., Awaitable[Served]]


async def assert_open_tasks_have_payloads(db: asyncpg.Connection, store: StoreHandle) -> int:
    """No task is open (or further along) whose payload is missing from the store."""
    keys = {
        r["payload_key"]
        for r in await db.fetch(
            "SELECT DISTINCT i.payload_key FROM tasks t JOIN items i ON i.id = t.item_id"
        )
    }
    assert None not in keys, "every item references its payload in the store"
    missing = keys - store.keys()
    assert not missing, f"{len(missing)} tasks reference payloads missing from the store"
    return len(keys)
