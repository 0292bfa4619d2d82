"""The blob store on a local folder.

The folder store keeps many blobs per file (a pack per `put_many`), found through an SQLite
index in the same folder (`LocalBlobStore`): a file per blob cost a file creation per payload,
which slows down badly after a mass deletion (retention, a finished batch).

Durability: `put_many` returns once the pack and its name are fsynced and its index entries
are committed (SQLite in WAL mode with synchronous=FULL fsyncs each commit): three fsyncs per
call, whatever its size, and none of the filesystem-wide syncfs of earlier releases (which
flushed whatever else was dirty on the disk, Postgres's files included). An entry commits only
after its pack is durable, so a visible key is a durable blob.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from taskroute.storage.blobs import (
    DEFAULT_CONCURRENCY,
    BlobNotFound,
    BlobStoreError,
    Threaded,
)

log = logging.getLogger(__name__)


_KEY = re.compile(r"[0-9a-f]{64}")
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
PACKS_DIR = "packs"
PACK_SUFFIX = ".pack"
INDEX_FILE = "index.sqlite3"
# How long an index transaction waits for another process's (a put_many commits in ms).
INDEX_BUSY_SECONDS = 30.0
# Keys per SQL statement (SQLite's limit on parameters is 32766 here, 999 in old builds).
_SQL_BATCH = 500
_IOV_MAX = 1024  # buffers per writev(2) (Linux's limit)
# A key is its 32 bytes and a pack its integer id: short entries, so a put_many's thousand
# random keys dirty fewer B-tree pages (each commit writes every page it touched to the WAL).
# No index on `blobs.pack`: nothing reads a pack's entries.
_INDEX_SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (
    key BLOB PRIMARY KEY,
    pack INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS packs (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,   -- packs/<name>.pack
    live INTEGER NOT NULL,       -- blobs of the pack still indexed
    bytes INTEGER NOT NULL,      -- the pack file's size
    live_bytes INTEGER NOT NULL  -- the bytes of those blobs
);
"""
# Pages of WAL between checkpoints (SQLite's default is 1,000): a checkpoint writes each page
# once however many commits changed it, and a put_many touches hundreds.
_WAL_CHECKPOINT_PAGES = 8192
_WAL_SIZE_LIMIT = 64 * 1024 * 1024


def _write_fully(fd: int, parts: list[bytes]) -> None:
    """Write the parts one after the other (writev: no copy of the whole pack in memory)."""
    views = [memoryview(p) for p in parts if p]
    i = 0
    while i < len(views):
        n = os.writev(fd, views[i : i + _IOV_MAX])
        while n:
            if n >= len(views[i]):
                n -= len(views[i])
                i += 1
            else:
                views[i] = views[i][n:]
                n = 0


def _fsync_dir(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | _O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalBlobStore(Threaded):
    """A folder of packs: many blobs per file, found through an SQLite index.

    Layout (see the module's header for why):
    - `packs/<name>.pack`: the blobs of one `put_many`, concatenated; never modified after its
      index entries commit, deleted once none of its blobs is live.
    - `index.sqlite3` (WAL): `blobs(key, pack, offset, length)` and `packs(id, name, live,
      bytes, live_bytes)`, whose live counts say when a pack can go.
    - `<first 2 hex>/<key>.json`: the one-file-per-blob layout of earlier releases, still read
      (and deleted) where the index has no entry, so an upgrade loses nothing.

    Space: a pack's file goes with its last live blob. A pack holds one chunk's payloads (one
    project's) and retention deletes a project's payloads together, so packs mostly empty
    whole; a payload another project shares keeps its pack alive. `packs.live_bytes` against
    `packs.bytes` shows what is held for dead blobs. A compaction (not built) would copy a
    sparse pack's live blobs into a new pack, re-point their entries in one transaction and
    delete the old file; reads already look a key up again when its pack vanishes under them.

    Writes and deletes run on one thread per store (each is one index transaction); reads use
    the pool. Every thread has its own SQLite connection. Processes sharing the folder
    (`serve --workers N`) coordinate through SQLite's locks and `flock(2)` on packs being
    written, so it must be a local filesystem (not NFS)."""

    def __init__(self, root: str | Path, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        super().__init__(concurrency)
        self.root = Path(root)
        self.url = self.root.resolve().as_uri()
        self._root = str(self.root)
        self._packs = f"{self._root}/{PACKS_DIR}"
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="blob-writer")
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._swept = False  # orphan packs are swept once per store, on its first write

    # -- the index ---------------------------------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        """This thread's connection to the index (created, with the schema, on first use).

        Each call checks that the folder still holds the file the connection has open: a
        folder replaced or gone (a remount, a wrong mount, a test's outage) must fail or be
        read afresh, not be served from a stale open file."""
        index = f"{self._root}/{INDEX_FILE}"
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            try:
                st = os.stat(index)
            except OSError as exc:
                raise BlobStoreError(f"cannot open the blob index in {self.root}: {exc}") from exc
            if (st.st_dev, st.st_ino) == self._local.identity:
                return conn
            self._forget(conn)
        try:
            os.makedirs(self._packs, exist_ok=True)
            # autocommit (isolation_level=None): reads see every commit at once; writes say
            # BEGIN IMMEDIATE themselves, so two writers queue on busy_timeout, never deadlock
            conn = sqlite3.connect(
                index,
                timeout=INDEX_BUSY_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                # FULL: a commit fsyncs the WAL, so an index entry is durable once put_many
                # returns (NORMAL would only be durable at the next checkpoint)
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute(f"PRAGMA wal_autocheckpoint={_WAL_CHECKPOINT_PAGES}")
                conn.execute(f"PRAGMA journal_size_limit={_WAL_SIZE_LIMIT}")
                conn.executescript(_INDEX_SCHEMA)
                st = os.stat(index)
            except BaseException:
                conn.close()
                raise
        except (OSError, sqlite3.Error) as exc:
            raise BlobStoreError(f"cannot open the blob index in {self.root}: {exc}") from exc
        self._local.conn = conn
        self._local.identity = (st.st_dev, st.st_ino)
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    def _forget(self, conn: sqlite3.Connection) -> None:
        self._local.conn = None
        with self._conns_lock:
            self._conns.remove(conn)
        conn.close()

    def _locate(self, key: str) -> tuple[str, int, int] | None:
        try:
            row = (
                self._db()
                .execute(
                    "SELECT p.name, b.offset, b.length FROM blobs b JOIN packs p ON p.id = b.pack"
                    " WHERE b.key = ?",
                    (bytes.fromhex(key),),
                )
                .fetchone()
            )
        except sqlite3.Error as exc:
            raise BlobStoreError(f"cannot read the blob index in {self.root}: {exc}") from exc
        return None if row is None else (row[0], row[1], row[2])

    def _indexed(self, conn: sqlite3.Connection, keys: list[str]) -> set[str]:
        found: set[str] = set()
        for i in range(0, len(keys), _SQL_BATCH):
            part = [bytes.fromhex(k) for k in keys[i : i + _SQL_BATCH]]
            marks = ",".join("?" * len(part))
            found.update(
                r[0].hex()
                for r in conn.execute(f"SELECT key FROM blobs WHERE key IN ({marks})", part)
            )
        return found

    # -- writing -----------------------------------------------------------------------------

    def _pack_path(self, pack: str) -> str:
        return f"{self._packs}/{pack}{PACK_SUFFIX}"

    def _create_pack(self) -> tuple[str, int]:
        """A new, empty pack file, locked (flock) until its index entries commit: the sweep
        (`_sweep`) deletes only unlocked packs the index does not know."""
        while True:
            pack = f"{os.getpid()}-{uuid.uuid4().hex}"
            path = self._pack_path(pack)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                # A sweep may have taken the file between our create and our lock (it was an
                # unlocked, unindexed pack then) and deleted it: start again under a new name.
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    return pack, fd
            except FileNotFoundError:
                pass
            os.close(fd)

    def _write_all(self, items: list[tuple[str, bytes]]) -> None:
        try:
            self._write_pack(items)
        except sqlite3.Error as exc:
            raise BlobStoreError(f"cannot index blobs in {self.root}: {exc}") from exc
        except OSError as exc:
            raise BlobStoreError(f"cannot write blobs to {self.root}: {exc}") from exc

    def _write_pack(self, items: list[tuple[str, bytes]]) -> None:
        conn = self._db()
        if not self._swept:
            self._sweep(conn)
            self._swept = True
        for key, _ in items:
            if _KEY.fullmatch(key) is None:
                raise BlobStoreError(f"not a blob key: {key!r}")
        # Content-addressed: a key already indexed is this very blob, durable already (an
        # entry commits only after its pack's fsync). Earlier duplicates in `items` too.
        indexed = self._indexed(conn, [k for k, _ in items])
        fresh: dict[str, bytes] = {}
        for key, data in items:
            if key not in indexed:
                fresh.setdefault(key, data)
        if not fresh:
            return
        name, fd = self._create_pack()
        committed = False
        try:
            spans: list[tuple[bytes, int, int]] = []
            offset = 0
            for key, data in fresh.items():
                spans.append((bytes.fromhex(key), offset, len(data)))
                offset += len(data)
            _write_fully(fd, list(fresh.values()))
            os.fsync(fd)  # the blobs are durable ...
            _fsync_dir(self._packs)  # ... and so is the pack's name, before any entry commits
            conn.execute("BEGIN IMMEDIATE")
            try:
                committed = self._index_pack(conn, name, offset, spans)
                conn.execute("COMMIT")
            except BaseException:
                committed = False
                conn.execute("ROLLBACK")
                raise
        finally:
            if not committed:  # nothing refers to it (a failure, or every key was a duplicate)
                with contextlib.suppress(OSError):
                    os.unlink(self._pack_path(name))
            os.close(fd)  # releases the lock

    @staticmethod
    def _index_pack(
        conn: sqlite3.Connection, name: str, size: int, spans: list[tuple[bytes, int, int]]
    ) -> bool:
        """Record a pack and its blobs (in the caller's transaction); False if none of them
        is new after all (the pack then goes)."""
        pack = conn.execute(
            "INSERT INTO packs (name, live, bytes, live_bytes) VALUES (?, 0, ?, 0) RETURNING id",
            (name, size),
        ).fetchone()[0]
        live = conn.executemany(
            "INSERT OR IGNORE INTO blobs (key, pack, offset, length) VALUES (?, ?, ?, ?)",
            [(key, pack, off, length) for key, off, length in spans],
        ).rowcount
        live_bytes = size
        if live < len(spans):
            # Another process indexed some of these keys since our look (its entries won):
            # those bytes of this pack are dead from the start.
            live_bytes = 0
            for i in range(0, len(spans), _SQL_BATCH):
                part = [key for key, _, _ in spans[i : i + _SQL_BATCH]]
                live_bytes += conn.execute(
                    f"SELECT total(length) FROM blobs WHERE pack = ? AND key IN"
                    f" ({','.join('?' * len(part))})",
                    [pack, *part],
                ).fetchone()[0]
        if live == 0:
            conn.execute("DELETE FROM packs WHERE id = ?", (pack,))
            return False
        conn.execute(
            "UPDATE packs SET live = ?, live_bytes = ? WHERE id = ?", (live, int(live_bytes), pack)
        )
        return True

    async def put_many(self, blobs: Iterable[tuple[str, bytes]]) -> None:
        items = list(blobs)
        if items:
            await asyncio.get_running_loop().run_in_executor(self._writer, self._write_all, items)

    # -- reading -----------------------------------------------------------------------------

    def _read(self, key: str) -> bytes:
        if _KEY.fullmatch(key) is None:
            raise BlobNotFound(f"not a blob key: {key!r}")
        try:
            # Twice at most: a pack deleted between the look-up and the open (its last live
            # blob went) means this key went too, unless it was re-written meanwhile.
            for _ in range(2):
                where = self._locate(key)
                if where is None:
                    return self._read_legacy(key)
                pack, offset, length = where
                try:
                    fd = os.open(self._pack_path(pack), os.O_RDONLY | _O_CLOEXEC)
                except FileNotFoundError:
                    if not os.path.isdir(self._packs):
                        raise
                    continue
                try:
                    data = os.pread(fd, length, offset)
                finally:
                    os.close(fd)
                if len(data) != length:
                    raise BlobStoreError(f"blob {key} is cut short in pack {pack}")
                return data
        except OSError as exc:
            raise BlobStoreError(f"cannot read blob: {exc}") from exc
        raise BlobNotFound(f"no blob {key}")

    def _read_legacy(self, key: str) -> bytes:
        try:
            with open(self._legacy_file(key), "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError) as exc:
            if not os.path.isdir(self._root):
                raise BlobStoreError(f"the blob folder {self.root} is missing") from exc
            raise BlobNotFound(f"no blob {key}") from exc

    def _legacy_file(self, key: str) -> str:
        return f"{self._root}/{key[:2]}/{key}.json"

    async def get(self, key: str) -> bytes:
        return await self._run(self._read, key)

    def _exists(self, key: str) -> bool:
        if _KEY.fullmatch(key) is None:
            return False
        return self._locate(key) is not None or os.path.isfile(self._legacy_file(key))

    async def exists(self, key: str) -> bool:
        return await self._run(self._exists, key)

    # -- deleting and reclaiming -------------------------------------------------------------

    def _delete_all(self, keys: list[str]) -> None:
        try:
            conn = self._db()
            empty: list[str] = []
            for i in range(0, len(keys), _SQL_BATCH):
                empty += self._unindex(conn, keys[i : i + _SQL_BATCH])
            # After the commit: a crash before these unlinks leaves packs the index no longer
            # knows, which the next sweep deletes.
            for pack in empty:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._pack_path(pack))
            for key in keys:  # the earlier layout's file, if this key has one
                with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                    os.unlink(self._legacy_file(key))
        except sqlite3.Error as exc:
            raise BlobStoreError(f"cannot delete blobs from {self.root}: {exc}") from exc
        except OSError as exc:
            raise BlobStoreError(f"cannot delete blobs from {self.root}: {exc}") from exc

    @staticmethod
    def _unindex(conn: sqlite3.Connection, keys: list[str]) -> list[str]:
        """Drop the keys' entries in one transaction; the names of the packs left with no
        live blob."""
        raw = [bytes.fromhex(k) for k in keys]
        marks = ",".join("?" * len(raw))
        conn.execute("BEGIN IMMEDIATE")
        try:
            gone = conn.execute(
                f"SELECT pack, count(*), total(length) FROM blobs WHERE key IN ({marks})"
                " GROUP BY pack",
                raw,
            ).fetchall()
            conn.execute(f"DELETE FROM blobs WHERE key IN ({marks})", raw)
            conn.executemany(
                "UPDATE packs SET live = live - ?, live_bytes = live_bytes - ? WHERE id = ?",
                [(n, int(b), p) for p, n, b in gone],
            )
            touched = [p for p, _, _ in gone]
            emptied = conn.execute(
                "SELECT id, name FROM packs WHERE live <= 0 AND id IN"
                f" ({','.join('?' * len(touched))})",
                touched,
            ).fetchall()
            conn.executemany("DELETE FROM packs WHERE id = ?", [(i,) for i, _ in emptied])
            empty = [name for _, name in emptied]
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return empty

    def _sweep(self, conn: sqlite3.Connection) -> int:
        """Delete the packs the index does not know; return how many went.

        Such a pack is garbage: a crash came between its write and its index commit (none of
        its blobs was ever visible), or between a delete's commit and the unlink. A pack that
        a live writer (this or another process) is still writing is locked and kept."""
        try:
            names = [
                n[: -len(PACK_SUFFIX)] for n in os.listdir(self._packs) if n.endswith(PACK_SUFFIX)
            ]
        except FileNotFoundError:
            return 0
        known: set[str] = set()
        for i in range(0, len(names), _SQL_BATCH):
            part = names[i : i + _SQL_BATCH]
            marks = ",".join("?" * len(part))
            known.update(
                r[0] for r in conn.execute(f"SELECT name FROM packs WHERE name IN ({marks})", part)
            )
        swept = 0
        for pack in names:
            if pack in known:
                continue
            path = self._pack_path(pack)
            try:
                fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # being written
                # Look again under the lock: a writer commits its entries before it unlocks.
                recorded = conn.execute("SELECT 1 FROM packs WHERE name = ?", (pack,)).fetchone()
                if recorded is None and os.stat(path).st_ino == os.fstat(fd).st_ino:
                    os.unlink(path)
                    swept += 1
            except FileNotFoundError:
                pass
            finally:
                os.close(fd)
        if swept:
            log.info("blob store %s: deleted %d packs nothing refers to", self.root, swept)
        return swept

    async def delete_many(self, keys: Iterable[str]) -> None:
        batch = [k for k in keys if _KEY.fullmatch(k) is not None]
        if batch:
            await asyncio.get_running_loop().run_in_executor(self._writer, self._delete_all, batch)

    def presigned_get_url(self, key: str, expires_in: int) -> str | None:
        return None

    # -- inspection --------------------------------------------------------------------------

    def keys_on_disk(self) -> set[str]:
        """Every key the folder holds, packed or in the earlier layout (blocking: for tests
        and operators, not for a request)."""
        if not os.path.isdir(self._root):
            return set()
        found = {r[0].hex() for r in self._db().execute("SELECT key FROM blobs")}
        found.update(p.stem for p in self.root.glob("[0-9a-f][0-9a-f]/*.json"))
        return found

    def read_on_disk(self, key: str) -> bytes:
        """`get`, blocking (for tests and operators)."""
        return self._read(key)

    def close_blocking(self) -> None:
        """`close` from a thread that may block (tests, operators' scripts)."""
        self._writer.shutdown(wait=True, cancel_futures=True)
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._conns_lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()

    async def close(self) -> None:
        # Waits for the threads (a local write or read ends within a chunk's time), then
        # closes their index connections.
        await asyncio.to_thread(self.close_blocking)
