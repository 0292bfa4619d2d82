"""An embedded Postgres (pgserver's wheel binaries) for `taskroute serve` without DATABASE_URL."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def start_embedded_postgres(data_dir: str) -> tuple[str, Any]:
    """Start (or reuse) Postgres in `data_dir/pg`; return its URL and the server handle."""
    folder = Path(data_dir).resolve() / "pg"
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, sudo) and falls back
        # to /tmp: harmless here, and it would bury the admin commands' one line of output
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        # imported here: only needed when no DATABASE_URL is given
        from pgserver.postgres_server import get_server

        server = get_server(folder, cleanup_mode="stop")
    url = server.get_uri()
    # the documented default for a first run, not a problem: info, not a warning
    log.info("DATABASE_URL is not set: using embedded Postgres in %s (%s)", folder, url)
    return url, server
