"""Run `taskroute serve` as a real subprocess (for multi-process and fault tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from .helpers import ADMIN_TOKEN

ROOT = Path(__file__).resolve().parents[1]


class ServerProcess:
    def __init__(
        self, database_url: str, port: int, data_dir: Path, workers: int = 1, **env: str
    ) -> None:
        self.port = port
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),  # run this checkout's code
            "DATABASE_URL": database_url,
            "TASKROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
            "TASKROUTE_DATA_DIR": str(data_dir),
            "TASKROUTE_SWEEP_INTERVAL": "0.5",
            **env,
        }
        self.workers = workers
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir / f"server-{port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "taskroute",
                    "serve",
                    "--port",
                    str(self.port),
                    "--workers",
                    str(self.workers),
                    "--log-level",
                    "warning",
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"server did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
