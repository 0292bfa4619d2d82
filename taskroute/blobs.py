"""Payload storage: a content-addressed blob store on a local folder or on S3.

Keys are `sha256(canonical JSON)` hex digests, so writing the same payload twice (a retry, a
re-sent batch) writes the same object. Both stores make an object visible only once it is
complete: the folder store writes a temp file, fsyncs it and renames it into place; S3 PUTs
are atomic. `TASKROUTE_BLOB_URL` picks the store (see `open_blob_store`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

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

    def presigned_get_url(self, key: str, expires_in: int) -> str | None:
        """A URL anyone can GET for `expires_in` seconds, or None if the store has none."""

    async def close(self) -> None: ...


class _Threaded:
    """Runs blocking calls on a private pool: bounded concurrency, off the event loop."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="blobs")

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _run_all(self, fn: Any, items: list[Any]) -> None:
        # The pool bounds how many run at once; gather waits for all and raises the first error.
        results = await asyncio.gather(*(self._run(fn, *i) for i in items), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class LocalBlobStore(_Threaded):
    """A folder: `<root>/<first 2 hex>/<key>.json`."""

    def __init__(self, root: str | Path, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        super().__init__(concurrency)
        self.root = Path(root)
        self.url = self.root.resolve().as_uri()

    def path(self, key: str) -> Path:
        if len(key) != 64 or not all(c in "0123456789abcdef" for c in key):
            raise BlobNotFound(f"not a blob key: {key!r}")
        return self.root / key[:2] / f"{key}.json"

    def _write(self, key: str, data: bytes) -> Path | None:
        final = self.path(key)
        try:
            if final.exists():  # content-addressed: an existing blob is this blob, complete
                return None
            final.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, final)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise BlobStoreError(f"cannot write blob to {self.root}: {exc}") from exc
        return final.parent

    @staticmethod
    def _fsync_dir(folder: Path) -> None:
        try:
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise BlobStoreError(f"cannot sync {folder}: {exc}") from exc

    async def put_many(self, blobs: Iterable[tuple[str, bytes]]) -> None:
        items = list(blobs)
        if not items:
            return
        folders: set[Path] = set()

        def write(key: str, data: bytes) -> None:
            folder = self._write(key, data)
            if folder is not None:
                folders.add(folder)

        await self._run_all(write, items)
        # The renames are durable once their folders are synced (once per folder, not per file).
        await self._run_all(self._fsync_dir, [(f,) for f in folders])

    def _read(self, key: str) -> bytes:
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError as exc:
            raise BlobNotFound(f"no blob {key}") from exc
        except OSError as exc:
            raise BlobStoreError(f"cannot read blob: {exc}") from exc

    async def get(self, key: str) -> bytes:
        return await self._run(self._read, key)

    async def exists(self, key: str) -> bool:
        return await self._run(lambda: self.path(key).is_file())

    def presigned_get_url(self, key: str, expires_in: int) -> str | None:
        return None


class S3BlobStore(_Threaded):
    """`s3://bucket/prefix` through boto3; endpoint, region and credentials come from the
    standard AWS environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_DEFAULT_REGION, ...)."""

    def __init__(self, bucket: str, prefix: str, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        super().__init__(concurrency)
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}"
        custom_endpoint = bool(
            os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        )
        config = Config(
            # one pooled connection per worker thread
            max_pool_connections=concurrency,
            retries={"max_attempts": 2, "mode": "standard"},
            connect_timeout=3,
            read_timeout=20,
            # S3-compatible servers (MinIO, moto, ...) on a custom endpoint want path style
            s3={"addressing_style": "path" if custom_endpoint else "auto"},
        )
        # A client is thread safe; a session is not, so build the client once, here.
        self._client = boto3.session.Session().client("s3", config=config)

    def object_key(self, key: str) -> str:
        return f"{self.prefix}/{key[:2]}/{key}.json" if self.prefix else f"{key[:2]}/{key}.json"

    def _put(self, key: str, data: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.put_object(
                Bucket=self.bucket,
                Key=self.object_key(key),
                Body=data,
                ContentType="application/json",
            )
        except (BotoCoreError, ClientError) as exc:
            raise BlobStoreError(f"cannot write blob to {self.url}: {exc}") from exc

    async def put_many(self, blobs: Iterable[tuple[str, bytes]]) -> None:
        await self._run_all(self._put, list(blobs))

    def _get(self, key: str) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            obj = self._client.get_object(Bucket=self.bucket, Key=self.object_key(key))
            return obj["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise BlobNotFound(f"no blob {key}") from exc
            raise BlobStoreError(f"cannot read blob: {exc}") from exc
        except BotoCoreError as exc:
            raise BlobStoreError(f"cannot read blob: {exc}") from exc

    async def get(self, key: str) -> bytes:
        return await self._run(self._get, key)

    def _exists(self, key: str) -> bool:
        try:
            self._get_head(key)
        except BlobNotFound:
            return False
        return True

    def _get_head(self, key: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.head_object(Bucket=self.bucket, Key=self.object_key(key))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                raise BlobNotFound(f"no blob {key}") from exc
            raise BlobStoreError(f"cannot read blob: {exc}") from exc
        except BotoCoreError as exc:
            raise BlobStoreError(f"cannot read blob: {exc}") from exc

    async def exists(self, key: str) -> bool:
        return await self._run(self._exists, key)

    def presigned_get_url(self, key: str, expires_in: int) -> str | None:
        # Signing is local computation (no request), so it may run on the event loop.
        return self._client.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.bucket, "Key": self.object_key(key)},
            ExpiresIn=expires_in,
        )


def open_blob_store(url: str, data_dir: str, concurrency: int = DEFAULT_CONCURRENCY) -> BlobStore:
    """`file:///abs/path`, `file://./rel/path`, a bare path, `s3://bucket/prefix`, or empty
    (the default folder `<data_dir>/blobs`)."""
    if not url:
        return LocalBlobStore(Path(data_dir) / "blobs", concurrency)
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise ValueError(f"TASKROUTE_BLOB_URL {url!r} names no bucket")
        return S3BlobStore(parsed.netloc, parsed.path, concurrency)
    if parsed.scheme == "file":
        # file:///abs -> /abs ; file://./rel -> ./rel (a common relative spelling)
        path = (
            unquote(parsed.netloc + parsed.path) if parsed.netloc == "." else unquote(parsed.path)
        )
        return LocalBlobStore(path, concurrency)
    if parsed.scheme == "":
        return LocalBlobStore(url, concurrency)
    raise ValueError(f"TASKROUTE_BLOB_URL {url!r}: use file:///path or s3://bucket/prefix")
