"""The folder store's write path (issue 16): both durability policies leave complete blobs
only, and a failing write fails the batch with BlobStoreError."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskroute.blobs import _SYNCFS, BlobStoreError, LocalBlobStore, blob_key


def _batch(n: int) -> list[tuple[str, bytes]]:
    texts = [f'{{"n":{i}}}' for i in range(n)]
    return [(blob_key(t), t.encode()) for t in texts]


@pytest.mark.parametrize("policy", ["syncfs", "fsync"])
async def test_a_batch_is_written_completely_and_only_once(tmp_path: Path, policy: str) -> None:
    if policy == "syncfs" and _SYNCFS is None:
        pytest.skip("no syncfs(2) on this platform")
    syncs: list[int] = []

    def counting_syncfs(fd: int) -> int:
        syncs.append(fd)
        assert _SYNCFS is not None
        return _SYNCFS(fd)

    store = LocalBlobStore(
        tmp_path / "blobs", concurrency=4, syncfs=counting_syncfs if policy == "syncfs" else None
    )
    try:
        batch = _batch(300)
        await store.put_many(batch)
        for key, data in batch:
            assert await store.get(key) == data
        # Only complete blobs under their keys: no temp file survives a batch.
        files = sorted(p.name for p in (tmp_path / "blobs").rglob("*") if p.is_file())
        assert files == sorted(f"{k}.json" for k, _ in batch)
        # One flush per batch under syncfs, also for a batch whose blobs all exist.
        first = (tmp_path / "blobs" / batch[0][0][:2] / f"{batch[0][0]}.json").stat()
        await store.put_many(batch)
        again = (tmp_path / "blobs" / batch[0][0][:2] / f"{batch[0][0]}.json").stat()
        assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
        assert len(syncs) == (2 if policy == "syncfs" else 0)
    finally:
        await store.close()


async def test_a_failing_write_fails_the_batch(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    store = LocalBlobStore(not_a_folder, concurrency=4)
    try:
        with pytest.raises(BlobStoreError):
            await store.put_many(_batch(50))
    finally:
        await store.close()
