"""REST: a project's results as a file for a training pipeline (JSON Lines, CSV, Parquet),
streamed page by page, as of a change-feed position (resolvers/exports.py); and the payload
behind an export's signed item link."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse

from taskroute.errors import BadInput
from taskroute.resolvers import exports
from taskroute.resolvers.accounts.credentials import parse_id
from taskroute.resolvers.batches import blobs_of

from . import export_parquet
from .common import api_route, services, viewer
from .contract import (
    ANY_JSON,
    BOOLEAN,
    CURSOR,
    INTEGER,
    NUMBER,
    STRING,
    TIME,
    UUID,
    Operation,
    Param,
    Reply,
    array,
    nullable,
    obj,
)
from .quality import owned_project

FORMATS = {
    "jsonl": ("application/x-ndjson", "jsonl"),
    "csv": ("text/csv; charset=utf-8", "csv"),
    "parquet": ("application/vnd.apache.parquet", "parquet"),
}
CSV_COLUMNS = (
    "as_of", "item_id", "external_id", "status", "answer", "confidence", "agreement", "method",
    "version", "changed_at", "answers", "payload", "payload_url", "payload_deleted",
)  # fmt: skip
CSV_JSON = frozenset({"answer", "answers", "payload"})  # cells holding JSON text
EXPERT_IDS = ("pseudonymous", "real")

# One exported item (resolvers/exports.row): a JSON line, a CSV row (JSON cells as JSON text).
EXPORT_ROW = obj(
    {
        "as_of": {**CURSOR, "description": "the position this export reflects"},
        "item_id": UUID,
        "external_id": nullable(STRING),
        "status": {"enum": ["resolved", "retracted"]},
        "answer": ANY_JSON,
        "confidence": nullable(NUMBER),
        "agreement": nullable(NUMBER),
        "method": nullable(STRING),
        "version": INTEGER,
        "changed_at": TIME,
        "answers": nullable(
            array(
                obj(
                    {
                        "expert": {
                            **STRING,
                            "description": "a per-project pseudonym, or the expert's id with "
                            "expert_ids=real",
                        },
                        "answer": ANY_JSON,
                        "kind": STRING,
                        "retracted": BOOLEAN,
                    }
                )
            )
        ),
        "payload": {**ANY_JSON, "description": "null when payload_url is given or it was deleted"},
        "payload_url": {
            **nullable(STRING),
            "description": "a signed link (/v1/items/{id}/payload) to a blob-store payload",
        },
        "payload_deleted": BOOLEAN,
    }
)
EXPORT = Operation(
    "GET",
    "/v1/projects/{id}/export",
    "A project's results as a file for a training pipeline",
    auth="customer or admin",
    tag="results",
    description="Streamed page by page as of one change-feed position; every check runs "
    "before the first byte (a bad request is an error, never a truncated file).",
    query=(
        Param("format", "the file's format", {"enum": list(FORMATS), "default": "jsonl"}),
        Param(
            "as_of",
            "a position of the change feed (an export's as_of, a result-changes cursor); "
            "default: now",
            CURSOR,
        ),
        Param(
            "expert_ids",
            "experts as per-project pseudonyms or their real ids",
            {"enum": list(EXPERT_IDS), "default": "pseudonymous"},
        ),
    ),
    replies={
        200: Reply(
            "JSON Lines (one item per line), CSV with a header row, or Parquet (the "
            "server needs the parquet extra)",
            {"type": "string"},
            media="application/x-ndjson",
            line_schema=EXPORT_ROW,
            headers=("X-Taskroute-As-Of",),
            other_media=(
                ("text/csv", {"type": "string"}),
                ("application/vnd.apache.parquet", {"type": "string", "format": "binary"}),
            ),
        )
    },
)
ITEM_PAYLOAD = Operation(
    "GET",
    "/v1/items/{id}/payload",
    "The payload behind an export's signed item link",
    auth="customer or admin",
    tag="results",
    description="For a token that sees the item's project; `id` is the item.",
    query=(Param("exp", "the link's expiry"), Param("sig", "the link's signature")),
    errors=(410,),
    replies={
        200: Reply("the payload", ANY_JSON),
        307: Reply("the payload's address in the blob store", headers=("Location",)),
    },
)


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in rows)


def _csv_header() -> bytes:
    out = io.StringIO()
    csv.writer(out).writerow(CSV_COLUMNS)
    return out.getvalue().encode()


def _csv(rows: list[dict[str, Any]]) -> bytes:
    out = io.StringIO()
    w = csv.writer(out)
    for r in rows:
        w.writerow(
            "" if r[c] is None else orjson.dumps(r[c]).decode() if c in CSV_JSON else r[c]
            for c in CSV_COLUMNS
        )
    return out.getvalue().encode()


async def export(request: Request) -> Response:
    """`?format=jsonl|csv|parquet` (default jsonl), `&as_of=<cursor>` (default: now),
    `&expert_ids=pseudonymous|real` (default pseudonymous). Every check runs before the first
    byte, so a bad request is a clean error, never a truncated file."""
    project_id = await owned_project(request)
    q = request.query_params
    fmt = q.get("format", "jsonl")
    if fmt not in FORMATS:
        raise BadInput(f"format must be one of {sorted(FORMATS)}", field="format")
    if fmt == "parquet":
        export_parquet.require()
    real = q.get("expert_ids", "pseudonymous")
    if real not in EXPERT_IDS:
        raise BadInput(f"expert_ids must be one of {list(EXPERT_IDS)}", field="expert_ids")
    s = services(request)
    at = await exports.position(s.db, project_id, q.get("as_of"))
    name = exports.expert_naming(s.payload_urls, project_id, real == "real")
    as_of, urls, ttl = at.cursor, s.payload_urls, s.settings.export_link_ttl

    async def dicts() -> AsyncIterator[list[dict[str, Any]]]:
        async for page in exports.pages(s.db, project_id, at):
            now = time.time()
            yield [exports.row(r, as_of, name, urls, ttl, now) for r in page]

    body: AsyncIterator[bytes]
    if fmt == "parquet":
        body = export_parquet.stream(dicts(), {"as_of": as_of, "project_id": str(project_id)})
    else:
        body = _encoded(dicts(), _jsonl if fmt == "jsonl" else _csv, fmt == "csv")
    media, ext = FORMATS[fmt]
    headers = {
        "X-Taskroute-As-Of": as_of,
        "Content-Disposition": f'attachment; filename="{project_id}-{at.seq}.{ext}"',
    }
    return StreamingResponse(body, media_type=media, headers=headers)


async def _encoded(
    pages: AsyncIterator[list[dict[str, Any]]],
    encode: Callable[[list[dict[str, Any]]], bytes],
    csv_header: bool,
) -> AsyncIterator[bytes]:
    if csv_header:
        yield _csv_header()
    async for rows in pages:
        yield encode(rows)


async def item_payload(request: Request) -> Response:
    """The payload behind an export's link (`/v1/items/{id}/payload?exp=&sig=`), with a token
    that sees the item's project: the JSON, or a redirect to a short presigned URL on S3."""
    who = await viewer(request)
    s = services(request)
    item_id = parse_id(request.path_params["id"], "item")
    q = request.query_params
    got = await exports.item_payload(
        s.db, blobs_of(s), s.payload_urls, who, item_id, q.get("exp"), q.get("sig")
    )
    if got.redirect is not None:
        return RedirectResponse(got.redirect, status_code=307)
    return Response(got.data, media_type="application/json")


routes = [
    api_route(EXPORT, export),
    api_route(ITEM_PAYLOAD, item_payload),
]
