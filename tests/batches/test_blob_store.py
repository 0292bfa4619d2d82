"""The folder store's pack layout (issue 16): many blobs per file behind an SQLite index,
shared by several processes, readable in the earlier one-file-per-blob layout, and leaving
only reclaimable garbage after a crash."""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from taskroute.storage.blobs import BlobNotFound, BlobStoreError, blob_key
from taskroute.storage.local_folder import INDEX_FILE, PACK_SUFFIX, PACKS_DIR, LocalBlobStore

ROOT = Path(__file__).resolve().parents[2]


def _batch(n: int, tag: str = "") -> list[tuple[str, bytes]]:
    texts = [f'{{"n":{i},"t":"{tag}"}}' for i in range(n)]
    return [(blob_key(t), t.encode()) for t in texts]


def _packs(root: Path) -> set[str]:
    return {p.name.removesuffix(PACK_SUFFIX) for p in (root / PACKS_DIR).glob(f"*{PACK_SUFFIX}")}


def _index(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / INDEX_FILE)


def _assert_counts_agree(root: Path) -> None:
    """Each pack's live counts are its indexed blobs; every pack on disk is recorded."""
    with _index(root) as db:
        counted = {
            r[0]: (r[1], r[2])
            for r in db.execute(
                "SELECT p.name, count(*), sum(b.length) FROM blobs b"
                " LEFT JOIN packs p ON p.id = b.pack GROUP BY p.name"
            )
        }
        recorded = {
            r[0]: (r[1], r[2]) for r in db.execute("SELECT name, live, live_bytes FROM packs")
        }
    assert recorded == counted
    assert _packs(root) == set(recorded)


async def _child(script: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


async def test_a_batch_is_one_pack_read_back_by_key(tmp_path: Path) -> None:
    root = tmp_path / "blobs"
    store = LocalBlobStore(root, concurrency=4)
    try:
        batch = _batch(300)
        await store.put_many(batch)
        for key, data in batch:
            assert await store.get(key) == data
            assert await store.exists(key)
        assert len(_packs(root)) == 1
        # Only the index and the pack: no file per blob, no temp file.
        files = {p.relative_to(root).parts[0] for p in root.rglob("*") if p.is_file()}
        assert files <= {PACKS_DIR, INDEX_FILE, f"{INDEX_FILE}-wal", f"{INDEX_FILE}-shm"}
        # Content-addressed: writing it again (a retry) writes nothing.
        await store.put_many(batch)
        await store.put_many(batch[:10] + _batch(5, "more") + batch[:3])
        assert len(_packs(root)) == 2
        unknown = blob_key("{}")
        assert not await store.exists(unknown)
        with pytest.raises(BlobNotFound):
            await store.get(unknown)
        _assert_counts_agree(root)
    finally:
        await store.close()


async def test_a_failing_write_fails_the_batch(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    store = LocalBlobStore(not_a_folder, concurrency=4)
    try:
        with pytest.raises(BlobStoreError):
            await store.put_many(_batch(50))
        with pytest.raises(BlobStoreError):
            await store.get(_batch(1)[0][0])
    finally:
        await store.close()


async def test_a_pack_goes_once_no_blob_in_it_is_live(tmp_path: Path) -> None:
    root = tmp_path / "blobs"
    store = LocalBlobStore(root, concurrency=4)
    try:
        first, second = _batch(100, "a"), _batch(100, "b")
        await store.put_many(first)
        (pack_a,) = _packs(root)
        await store.put_many(second)
        await store.delete_many([k for k, _ in first[:60]] + [blob_key('"never written"')])
        assert pack_a in _packs(root), "40 of its blobs are still live"
        for key, _ in first[:60]:
            assert not await store.exists(key)
            with pytest.raises(BlobNotFound):
                await store.get(key)
        for key, data in first[60:] + second:
            assert await store.get(key) == data
        _assert_counts_agree(root)

        await store.delete_many(k for k, _ in first[60:])
        assert pack_a not in _packs(root) and len(_packs(root)) == 1
        _assert_counts_agree(root)
        # A deleted blob written again is a new pack's, readable again.
        await store.put_many(first[:1])
        assert await store.get(first[0][0]) == first[0][1]
        _assert_counts_agree(root)
    finally:
        await store.close()


async def test_the_earlier_layout_stays_readable(tmp_path: Path) -> None:
    root = tmp_path / "blobs"
    old = _batch(20, "old")
    for key, data in old:
        (root / key[:2]).mkdir(parents=True, exist_ok=True)
        (root / key[:2] / f"{key}.json").write_bytes(data)
    store = LocalBlobStore(root, concurrency=4)
    try:
        for key, data in old:
            assert await store.exists(key)
            assert await store.get(key) == data
        new = _batch(20, "new")
        await store.put_many(new + old[:5])  # old blobs re-sent: harmless
        assert store.keys_on_disk() == {k for k, _ in old + new}
        gone = [k for k, _ in old[:10]]
        await store.delete_many(gone)
        for key in gone:
            assert not await store.exists(key)
            assert not (root / key[:2] / f"{key}.json").exists()
        for key, data in old[10:] + new:
            assert await store.get(key) == data
    finally:
        await store.close()


# A child that dies (SIGKILL-like: os._exit) right after the pack is durable, before its
# index entries commit.
CRASH_BEFORE_INDEX = """
import asyncio, os, sys
import taskroute.storage.local_folder as b
from tests.batches.test_blob_store import _batch
b._fsync_dir = lambda folder: os._exit(9)
store = b.LocalBlobStore(sys.argv[1])
asyncio.run(store.put_many(_batch(50, "crash")))
"""

# A child that dies after a delete's commit, before it unlinks the pack left empty.
CRASH_BEFORE_UNLINK = """
import asyncio, os, sys
import taskroute.storage.local_folder as b
from tests.batches.test_blob_store import _batch
async def main():
    store = b.LocalBlobStore(sys.argv[1])
    await store.put_many(_batch(50, "doomed"))
    os.unlink = lambda path, **kw: os._exit(9)
    await store.delete_many(k for k, _ in _batch(50, "doomed"))
asyncio.run(main())
"""


@pytest.mark.parametrize("script", [CRASH_BEFORE_INDEX, CRASH_BEFORE_UNLINK])
async def test_a_crash_leaves_no_visible_blob_and_only_reclaimable_garbage(
    tmp_path: Path, script: str
) -> None:
    root = tmp_path / "blobs"
    child = await _child(script, str(root))
    assert await child.wait() == 9
    assert len(_packs(root)) == 1, "the crash left its pack behind"
    lost = _batch(50, "crash" if script is CRASH_BEFORE_INDEX else "doomed")
    store = LocalBlobStore(root, concurrency=4)
    try:
        for key, _ in lost:
            assert not await store.exists(key)
            with pytest.raises(BlobNotFound):
                await store.get(key)
        # The first write sweeps what no index entry refers to.
        await store.put_many(_batch(10))
        assert len(_packs(root)) == 1
        _assert_counts_agree(root)
    finally:
        await store.close()


async def test_the_sweep_keeps_a_pack_being_written(tmp_path: Path) -> None:
    """A pack another process is still writing (it holds the pack's flock) is not garbage."""
    root = tmp_path / "blobs"
    (root / PACKS_DIR).mkdir(parents=True)
    in_flight = root / PACKS_DIR / f"other-writer{PACK_SUFFIX}"
    fd = os.open(in_flight, os.O_WRONLY | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    store = LocalBlobStore(root, concurrency=4)
    try:
        await store.put_many(_batch(10))
        assert in_flight.exists()
    finally:
        os.close(fd)
        await store.close()
    # Its writer gone (the lock released) with nothing indexed, the next store's sweep takes it.
    again = LocalBlobStore(root, concurrency=4)
    try:
        await again.put_many(_batch(10, "x"))
        assert not in_flight.exists()
        _assert_counts_agree(root)
    finally:
        await again.close()


# Writes `rounds` batches: `per` blobs of its own and `per` shared with the other child (both
# race to write them), printing each round's number once put_many returned; then, told on
# stdin that the other child is done too, reads every blob the other child wrote.
WRITER = """
import asyncio, sys
from taskroute.storage.local_folder import LocalBlobStore
from tests.batches.test_blob_store import _batch
root, me, other = sys.argv[1:4]
rounds, per = int(sys.argv[4]), int(sys.argv[5])
async def main():
    store = LocalBlobStore(root)
    for r in range(rounds):
        await store.put_many(_batch(per, f"{me}-{r}") + _batch(per, f"shared-{r}"))
        print(r, flush=True)
    sys.stdin.readline()
    for r in range(rounds):
        for key, data in _batch(per, f"{other}-{r}"):
            assert await store.get(key) == data
    await store.close()
asyncio.run(main())
"""


async def test_two_processes_share_one_folder(tmp_path: Path) -> None:
    root = tmp_path / "blobs"
    rounds, per = 20, 50
    children = {
        name: await _child(WRITER, str(root), name, other, str(rounds), str(per))
        for name, other in (("a", "b"), ("b", "a"))
    }
    reader = LocalBlobStore(root, concurrency=4)
    try:

        async def follow(name: str, child: asyncio.subprocess.Process) -> None:
            # A blob one process wrote is readable by another as soon as put_many returned.
            assert child.stdout is not None
            for r in range(rounds):
                line = await child.stdout.readline()
                assert int(line) == r
                for key, data in _batch(per, f"{name}-{r}") + _batch(per, f"shared-{r}"):
                    assert await reader.get(key) == data

        await asyncio.gather(*(follow(n, c) for n, c in children.items()))
        for child in children.values():
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            await child.stdin.drain()
        for child in children.values():
            assert await child.wait() == 0
        _assert_counts_agree(root)
        with _index(root) as db:
            assert db.execute("SELECT count(*) FROM blobs").fetchone()[0] == 3 * rounds * per
    finally:
        await reader.close()
        for child in children.values():
            if child.returncode is None:
                child.kill()
                await child.wait()


async def test_concurrent_calls_on_one_store(tmp_path: Path) -> None:
    """Writes, reads and deletes in flight together on one store's threads (and a second
    store on the same folder, as a second process would be)."""
    root = tmp_path / "blobs"
    store = LocalBlobStore(root, concurrency=8)
    other = LocalBlobStore(root, concurrency=8)
    try:
        base = _batch(200, "base")
        await store.put_many(base)
        doomed = [k for k, _ in base[:100]]

        async def reads() -> None:
            for key, data in base[100:]:
                assert await other.get(key) == data

        writes = [s.put_many(_batch(100, f"w{i}")) for i, s in enumerate([store, other] * 5)]
        await asyncio.gather(*writes, store.delete_many(doomed), *(reads() for _ in range(4)))
        for i in range(10):
            for key, data in _batch(100, f"w{i}"):
                assert await store.get(key) == data
        for key in doomed:
            assert not await other.exists(key)
        _assert_counts_agree(root)
    finally:
        await store.close()
        await other.close()


async def test_a_writer_that_loses_a_race_counts_only_its_own_blobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes may both find a key missing and both write it: the first entry wins, and
    the loser's pack counts as live only the blobs it indexed (and goes if that is none)."""
    root = tmp_path / "blobs"
    first, late = LocalBlobStore(root, concurrency=2), LocalBlobStore(root, concurrency=2)
    try:
        shared, own = _batch(30, "shared"), _batch(20, "own")
        await first.put_many(shared)
        # `late` looked before `first` committed: it saw none of the shared keys.
        monkeypatch.setattr(late, "_indexed", lambda conn, keys: set())
        await late.put_many(shared[:10] + own)
        assert len(_packs(root)) == 2
        _assert_counts_agree(root)
        with _index(root) as db:
            live = sorted(db.execute("SELECT live, bytes > live_bytes FROM packs").fetchall())
        assert live == [(20, 1), (30, 0)]
        await late.put_many(shared[:5])  # nothing new at all: its pack does not stay
        assert len(_packs(root)) == 2
        for key, data in shared + own:
            assert await late.get(key) == data
        _assert_counts_agree(root)
    finally:
        await first.close()
        await late.close()
