"""Structured logging: one JSON object per line, carrying the current request id.

`TASKROUTE_LOG_FORMAT=text` switches to plain lines for a terminal.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from typing import Any

from taskroute.config import read_setting

# The id of the HTTP request or WebSocket being served, if any (set by RequestContext).
request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "taskroute_request_id", default=None
)

# Attributes every LogRecord has; anything else passed via `extra=` is emitted as a field.
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = request_id_var.get()
        if rid is not None:
            entry["request_id"] = rid
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            # Stack traces go to the log (operators), never to clients.
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        rid = request_id_var.get()
        return f"{line} [request_id={rid}]" if rid else line


def configure_logging(level: str | int = "INFO", fmt: str | None = None) -> None:
    """Route every logger (ours, uvicorn's, asyncpg's) through one stderr handler."""
    # JSON for log collectors; plain lines when a person reads stderr in a terminal.
    default = "text" if sys.stderr.isatty() else "json"
    fmt = (fmt or read_setting("log_format") or default).lower()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextFormatter() if fmt == "text" else JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper() if isinstance(level, str) else level)
    for name in ("uvicorn", "uvicorn.error"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
    # RequestContext writes one access line per request, with its id; uvicorn's would repeat it.
    logging.getLogger("uvicorn.access").disabled = True
