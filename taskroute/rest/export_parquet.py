"""Parquet exports, when the optional `parquet` extra (pyarrow) is installed: one row group
per page of rows, each written out and handed to the client before the next page is read."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from typing import Any

import orjson

from taskroute.errors import BadInput

# JSON-valued fields are JSON text columns: their shape is the customer's, not fixed.
JSON_COLUMNS = ("answer", "answers", "payload")


def available() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


def require() -> None:
    if not available():
        raise BadInput(
            "format=parquet needs pyarrow, which this server does not have (install the"
            " 'parquet' extra: pip install 'taskroute[parquet]'); format=jsonl and format=csv"
            " work here",
            field="format",
        )


class _Sink:
    """A write-only file that keeps what was written until `take()`."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


async def stream(
    pages: AsyncIterator[list[dict[str, Any]]], meta: dict[str, str]
) -> AsyncIterator[bytes]:
    import pyarrow as pa  # noqa: PLC0415 (optional: only this format needs it)
    import pyarrow.parquet as pq  # noqa: PLC0415

    schema = pa.schema(
        [
            ("as_of", pa.string()),
            ("item_id", pa.string()),
            ("external_id", pa.string()),
            ("status", pa.string()),
            ("answer", pa.string()),
            ("confidence", pa.float32()),
            ("agreement", pa.float32()),
            ("method", pa.string()),
            ("version", pa.int32()),
            ("changed_at", pa.string()),
            ("answers", pa.string()),
            ("payload", pa.string()),
            ("payload_url", pa.string()),
            ("payload_deleted", pa.bool_()),
        ],
        metadata={f"taskroute.{k}": v for k, v in meta.items()},
    )
    sink = _Sink()
    writer = pq.ParquetWriter(sink, schema)
    async for rows in pages:
        columns = {
            f.name: [None if r[f.name] is None else orjson.dumps(r[f.name]).decode() for r in rows]
            if f.name in JSON_COLUMNS
            else [r[f.name] for r in rows]
            for f in schema
        }
        writer.write_table(pa.Table.from_pydict(columns, schema=schema))
        yield sink.take()
    writer.close()
    yield sink.take()
