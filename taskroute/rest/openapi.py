"""The OpenAPI 3.1 document of the REST API, built from the routes' own declarations
(`contract.Operation`, attached to each route by `common.api_route`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from starlette.routing import BaseRoute

from .common import ApiRoute
from .contract import ERROR, ERROR_MEANINGS, UUID, Operation, Reply, Schema

TITLE = "taskroute REST API"
ERROR_REF = {"$ref": "#/components/schemas/Error"}
HEADER_DOCS = {
    "Retry-After": "seconds to wait before asking again",
    "Location": "where the payload is",
    "X-Taskroute-As-Of": "the change-feed position the export reflects (as_of repeats it)",
}


def operations(routes: Iterable[BaseRoute]) -> list[Operation]:
    return [r.operation for r in routes if isinstance(r, ApiRoute)]


def _content(media: str, schema: Schema | None) -> dict[str, Any]:
    return {media: {"schema": schema if schema is not None else {}}}


def _reply(reply: Reply) -> dict[str, Any]:
    out: dict[str, Any] = {"description": reply.description}
    if reply.schema is not None:
        out["content"] = _content(reply.media, reply.schema)
        if reply.line_schema is not None:
            out["content"][reply.media]["x-line-schema"] = reply.line_schema
        for media, schema in reply.other_media:
            out["content"].update(_content(media, schema))
    if reply.headers:
        out["headers"] = {
            h: {"description": HEADER_DOCS[h], "schema": {"type": "string"}} for h in reply.headers
        }
    return out


def _error(status: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": ERROR_MEANINGS[status],
        "content": _content("application/json", ERROR_REF),
    }
    if status == 503:
        out["headers"] = {
            "Retry-After": {"description": HEADER_DOCS["Retry-After"], "schema": {"type": "string"}}
        }
    return out


def _operation(op: Operation) -> dict[str, Any]:
    named = {p.name: p for p in op.path_params}
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": UUID}
        if name not in named
        else {"name": name, "in": "path", "required": True,
              "description": named[name].description, "schema": named[name].schema}
        for name in re.findall(r"{(\w+)}", op.path)
    ]  # fmt: skip
    params += [
        {"name": p.name, "in": "query", "required": False, "description": p.description,
         "schema": p.schema}
        for p in op.query
    ]  # fmt: skip
    out: dict[str, Any] = {
        "operationId": re.sub(r"\W+", "_", f"{op.method.lower()}{op.path}").strip("_"),
        "summary": op.summary,
        "description": (op.description + "\n\n" if op.description else "") + f"Auth: {op.auth}.",
        "tags": [op.tag],
        "x-auth": op.auth,
        "responses": {
            **{str(status): _reply(reply) for status, reply in op.replies.items()},
            **{str(status): _error(status) for status in op.error_statuses()},
        },
    }
    if params:
        out["parameters"] = params
    if op.body is not None:
        out["requestBody"] = {
            "required": op.body_required,
            "content": _content("application/json", op.body),
        }
    return out


def document(routes: Iterable[BaseRoute]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for op in operations(routes):
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": TITLE,
            "version": "1",
            "description": "JSON in snake_case, on the same domain as the GraphQL API at "
            '/graphql. Every refusal is a JSON body {"error": {"code", "message"}}; '
            "unknown body fields and query parameters are refused (422).",
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": {"Error": ERROR},
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "an admin, customer or expert token",
                }
            },
        },
    }
