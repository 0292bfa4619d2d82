"""What every REST handler shares: errors as JSON, the viewer, the body."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from taskroute.errors import BadInput, TaskrouteError, Unavailable
from taskroute.resolvers.accounts.authentication import authenticate
from taskroute.resolvers.accounts.credentials import Viewer
from taskroute.resolvers.paging import Page
from taskroute.resolvers.services import Services

from .contract import Operation


def error_response(exc: TaskrouteError) -> Response:
    body: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.details:
        body["details"] = exc.details
    # A retryable refusal (busy, overloaded, restarting) says when to come back, like GraphQL.
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Unavailable) else None
    # ASCII JSON: a message may quote the client's own input, lone surrogates included (a
    # body key "\ud800"), which JSONResponse's UTF-8 encoding refused with a 500.
    content = json.dumps({"error": body}, separators=(",", ":")).encode()
    return Response(
        content, status_code=exc.http_status, headers=headers, media_type="application/json"
    )


def services(request: Request) -> Services:
    services: Services = request.state.services
    return services


async def viewer(request: Request) -> Viewer:
    s = services(request)
    who = await authenticate(
        s.db, s.settings.admin_token, request.headers.get("authorization"), cache=s.credentials
    )
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        who.require_write()  # read-only tokens (dashboards) never change anything
    return who


async def json_body(request: Request, required: bool = True) -> Any:
    raw = await request.body()
    if not raw.strip():
        if required:
            raise BadInput("a JSON body is required")
        return {}
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadInput(f"malformed JSON at line {exc.lineno} column {exc.colno}") from exc
    except (ValueError, RecursionError) as exc:
        # >4300-digit integers, bad UTF-8, absurd nesting: say what, not Python's words
        raise BadInput("malformed JSON: a number too long, bad UTF-8 or nesting too deep") from exc


async def json_object(
    request: Request, fields: set[str], required: set[str] | frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The body as a JSON object of the named fields: every route refuses unknown fields and
    names the missing ones the same way (422 BAD_INPUT). No body reads as {} when nothing is
    required."""
    body = await json_body(request, required=bool(required))
    if not isinstance(body, dict):
        raise BadInput("the body must be a JSON object")
    unknown = set(body) - fields
    if unknown:
        raise BadInput(f"unknown fields: {sorted(unknown)}", field=sorted(unknown)[0])
    for name in sorted(required):
        if name not in body:
            raise BadInput(f"{name} is required", field=name)
    return body


Endpoint = Callable[[Request], Awaitable[Response]]


class ApiRoute(Route):
    """A /v1 route and its declaration (what `openapi.py` documents)."""

    operation: Operation


def api_route(operation: Operation, endpoint: Endpoint) -> ApiRoute:
    """The route `operation` declares, taking the query parameters it names and no others: an
    unknown one is refused (422 BAD_INPUT naming it), as unknown body fields are
    (`declared_body`), instead of being ignored (a misspelt `frist=10` silently gave the
    default page)."""
    allowed = frozenset(operation.query_names)

    async def checked(request: Request) -> Response:
        unknown = set(request.query_params) - allowed
        if unknown:
            raise BadInput(
                f"unknown query parameters: {sorted(unknown)}"
                + (f" (this route takes {sorted(allowed)})" if allowed else ""),
                field=sorted(unknown)[0],
            )
        return await endpoint(request)

    route = ApiRoute(operation.path, checked, methods=[operation.method])
    route.operation = operation
    return route


async def declared_body(request: Request, operation: Operation) -> dict[str, Any]:
    """The body as `operation` declares it: its fields and no others, the required ones
    present (`json_object`)."""
    return await json_object(
        request,
        operation.body_fields,
        required=operation.required_fields if operation.body_required else frozenset(),
    )


def page_size(request: Request) -> tuple[str, str]:
    """A listing's `first` (or the deprecated `limit`) as sent, and which of the two it was."""
    query = request.query_params
    if "first" in query and "limit" in query:
        raise BadInput("give first or limit, not both", field="limit")
    if "limit" in query:
        return query["limit"], "limit"
    return query.get("first", "100"), "first"


def page_info(page: Page[Any]) -> dict[str, Any]:
    """GraphQL's pageInfo for REST: pass `end_cursor` as `after` while `has_next_page`."""
    return {"has_next_page": page.has_next, "end_cursor": page.end_cursor}
