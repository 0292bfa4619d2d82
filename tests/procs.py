"""Processes for fault tests: `taskroute serve` subprocesses, a private Postgres cluster and a
private PgBouncer.

The private cluster exists so a test can restart Postgres without touching the shared one
other tests (and other people) use. It needs /usr/lib/postgresql/<v>/bin and, when running as
root, the `postgres` OS user (initdb refuses root); otherwise the test is skipped.

The private PgBouncer (transaction mode, its own config and port in a temporary folder) sits
in front of a Postgres given by URL; tests that run through it are skipped, saying so, only
when the pgbouncer binary is absent (`.ci/run` installs it).
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import httpx
import pytest

from .helpers import ADMIN_TOKEN, free_port

ROOT = Path(__file__).resolve().parent.parent


class ServeProcess:
    """`python -m taskroute serve` on a fixed loopback port (kept across restarts).

    `database_url=""` leaves DATABASE_URL unset: the server starts its embedded Postgres.
    """

    def __init__(self, database_url: str, log_path: Path, workers: int = 1, **env: str) -> None:
        self.port = free_port()
        self.database_url = database_url
        self.log_path = log_path
        self.workers = workers
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> None:
        # A bound, not a wait: it returns once /healthz answers. Starting took over 30 s on a
        # 2-core machine shared with four other test suites.
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),  # this checkout's code
            "TASKROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
            "TASKROUTE_LOG_FORMAT": "json",
            # Payloads in the test's folder, never the checkout's ./.taskroute/blobs (where a
            # developer's own server keeps its data); servers started side by side share it.
            "TASKROUTE_BLOB_URL": f"file://{self.log_path.parent / 'blobs'}",
            **self.env,
        }
        env.pop("DATABASE_URL", None)
        if self.database_url:
            env["DATABASE_URL"] = self.database_url
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()/kill()
        cmd = [sys.executable, "-m", "taskroute", "serve", "--port", str(self.port),
               "--workers", str(self.workers)]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd, env=env, cwd=str(ROOT), stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"server not up in {timeout}s: {self.log_path.read_text()[-3000:]}")

    async def astart(self, timeout: float = 120) -> None:
        """`start` off the event loop, so in-process servers keep serving meanwhile."""
        await asyncio.to_thread(self.start, timeout)

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, no draining, like a crashed machine."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._close_log()

    def sigterm(self, timeout: float = 60) -> int:
        """A graceful stop (what a process manager sends on a restart): SIGTERM, then wait
        for the process to drain and exit; its exit code."""
        assert self.proc is not None
        self.proc.terminate()
        code = self.proc.wait(timeout=timeout)
        self._close_log()
        return code

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


class PrivatePostgres:
    """A throwaway Postgres cluster on a free loopback port, ours to stop and restart."""

    def __init__(self) -> None:
        bindir = _pg_bin()
        if bindir is None:
            pytest.skip("no Postgres binaries under /usr/lib/postgresql")
        self.bin = bindir
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="taskroute_pg_"))
        self.data = self.dir / "data"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                pytest.skip("running as root without runuser: cannot run initdb")
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.dir, "postgres", "postgres")
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                   "--auth=trust", "-E", "UTF8"], timeout=120)  # fmt: skip

    def _run(self, cmd: list[str], timeout: float = 60) -> None:
        subprocess.run(
            self.as_user + cmd, check=True, timeout=timeout, capture_output=True, cwd=self.dir
        )

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        opts = f"-p {self.port} -h 127.0.0.1 -k {self.dir} -c fsync=off"
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts,
                   "-l", str(self.dir / "log"), "-w", "-t", "60", "start"])  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def destroy(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


PGBOUNCER_CANDIDATES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")


def _pgbouncer_bin() -> str | None:
    return shutil.which("pgbouncer") or next(
        (p for p in PGBOUNCER_CANDIDATES if os.access(p, os.X_OK)), None
    )


class PrivatePgBouncer:
    """PgBouncer in transaction mode on a free loopback port, in front of `target_dsn`'s server.

    Every database name is forwarded (`*`), logging in as the target's user (`auth_type =
    any`: the client's name is ignored), with `pool_size` server connections per database:
    fewer than the clients' connections, so transactions of different clients really share
    server connections, which is what breaks session state and named prepared statements."""

    def __init__(self, target_dsn: str, pool_size: int = 6) -> None:
        binary = _pgbouncer_bin()
        if binary is None:
            pytest.skip(
                "pgbouncer is not installed (looked for `pgbouncer` on PATH and in "
                f"{', '.join(PGBOUNCER_CANDIDATES)}; `apt-get install -y pgbouncer`): "
                "the tests through PgBouncer cannot run"
            )
        self.binary = binary
        target = urlsplit(target_dsn)
        self.user = target.username or "postgres"
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="taskroute_pgbouncer_"))
        self.config = self.dir / "pgbouncer.ini"
        self.log = self.dir / "pgbouncer.log"
        self.pidfile = self.dir / "pgbouncer.pid"
        lines = [
            "[databases]",
            f"* = host={target.hostname or '127.0.0.1'} port={target.port or 5432}"
            f" user={self.user}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {self.port}",
            "unix_socket_dir =",
            "auth_type = any",
            "pool_mode = transaction",
            f"default_pool_size = {pool_size}",
            "max_client_conn = 2000",
            f"logfile = {self.log}",
            f"pidfile = {self.pidfile}",
        ]
        if os.geteuid() == 0:
            # PgBouncer refuses to run as root; it switches to this user after startup.
            lines.append("user = postgres")
            shutil.chown(self.dir, "postgres", "postgres")
        self.config.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def url_for(self, dsn: str) -> str:
        """`dsn`'s database, through this PgBouncer."""
        dbname = urlsplit(dsn).path.lstrip("/")
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def start(self, timeout: float = 15) -> None:
        self.proc = subprocess.Popen(
            [self.binary, str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {self._log_tail()}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"pgbouncer not listening in {timeout}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        return self.log.read_text()[-2000:] if self.log.exists() else "(no log)"

    def sigterm(self, timeout: float = 60) -> int:
        """A graceful stop (what a process manager sends on a restart): SIGTERM, then wait
        for the process to drain and exit; its exit code."""
        assert self.proc is not None
        self.proc.terminate()
        code = self.proc.wait(timeout=timeout)
        self._close_log()
        return code

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)
