"""Where payloads live: the blob store (a local folder or S3) and the signed links to them.

`open_blob_store` picks the backend from `TASKROUTE_BLOB_URL`.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from taskroute.storage.blobs import DEFAULT_CONCURRENCY, BlobStore
from taskroute.storage.local_folder import LocalBlobStore
from taskroute.storage.s3 import S3BlobStore


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
