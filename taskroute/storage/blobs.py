"""Payload storage: the content-addressed blob store both backends implement.

Keys are `sha256(canonical JSON)` hex digests, so writing the same payload twice (a retry, a
re-sent batch) writes the same object. Both stores make an object visible only once it is
complete: the folder store (`local_folder.py`) indexes a blob only after its pack is written;
S3 PUTs are atomic (`s3.py`). `TASKROUTE_BLOB_URL` picks the store (`open_blob_store` in
this package's `__init__`).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

# Blocking I/O (files, boto3) runs on this many threads per store.
DEFAULT_CONCURRENCY = 16


class BlobStoreError(Exception):
    """The store could not read or write (down, full, denied): worth retrying later."""


class BlobNotFound(BlobStoreError):
    pass


def blob_key(canonical: str) -> str:
    return hashlib.sha256(canonical.encode()).hexdigest()


class BlobStore(Protocol):
    url: str

    async def put_many(self, blobs: Iterable[tuple[str, bytes]]) -> None:
        """Write every (key, data); returns once all are durable. Raises BlobStoreError."""

    async def get(self, key: str) -> bytes: ...

    async def exists(self, key: str) -> bool: ...

    async def delete_many(self, keys: Iterable[str]) -> None:
        """Delete every key; a key already gone is not an error. Raises BlobStoreError."""

    def presigned_get_url(self, key: str, expires_in: int) -> str | None:
        """A URL anyone can GET for `expires_in` seconds, or None if the store has none."""

    async def close(self) -> None: ...


class Threaded:
    """Runs blocking calls on a private pool: bounded concurrency, off the event loop."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="blobs")

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _run_all(self, fn: Callable[..., Any], items: list[Any]) -> None:
        """`fn(*item)` for every item on up to `concurrency` threads; raises the first error.

        Each thread drains a shared iterator (one executor job per thread, not per item), so a
        chunk of a thousand payloads costs the event loop a handful of wake-ups. After an
        error the threads stop taking new items."""
        if not items:
            return
        source = iter(items)
        lock = threading.Lock()
        failed = threading.Event()

        def drain() -> None:
            while not failed.is_set():
                with lock:
                    item = next(source, None)
                if item is None:
                    return
                try:
                    fn(*item)
                except BaseException:
                    failed.set()
                    raise

        workers = min(self.concurrency, len(items))
        results = await asyncio.gather(
            *(self._run(drain) for _ in range(workers)), return_exceptions=True
        )
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
