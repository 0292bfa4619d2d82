"""The pages around the APIs: `/` (links), `/openapi.json`, `/docs/api` (Swagger UI on it) and
the static assets those pages and GraphiQL load (`/static/...`, vendored: no CDN, no
third-party script; `static/vendor/README.md` says what and from where)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .dashboard import STATIC
from .openapi import document

# Swagger UI and GraphiQL set inline styles on their elements: styles may be inline, scripts
# only from this origin.
EXPLORER_CSP = (
    "default-src 'self'; connect-src 'self' ws: wss:; script-src 'self'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:"
)
PAGE_HEADERS = {
    "Content-Security-Policy": EXPLORER_CSP,
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
}
# What /static/ serves: the explorers' own scripts and styles and the vendored bundles.
ASSETS = frozenset(
    str(p.relative_to(STATIC))
    for p in STATIC.rglob("*")
    if p.is_file() and p.suffix in (".js", ".css") and p.parent.name in ("static", "vendor")
)


def graphiql_page() -> Response:
    """GraphiQL from the vendored bundle, replacing strawberry's page (which loads it from a
    CDN: a blank page offline)."""
    return FileResponse(STATIC / "graphiql.html", headers=PAGE_HEADERS)


async def home(request: Request) -> Response:
    return FileResponse(STATIC / "home.html", headers=PAGE_HEADERS)


async def api_reference(request: Request) -> Response:
    return FileResponse(STATIC / "api-reference.html", headers=PAGE_HEADERS)


async def asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in ASSETS:
        return Response("not found", status_code=404)
    return FileResponse(
        STATIC / name, headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    )


def routes_for(api_routes: Iterable[BaseRoute]) -> list[BaseRoute]:
    """The pages, with /openapi.json documenting `api_routes` (built once)."""
    spec: dict[str, Any] = document(api_routes)

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(spec)

    return [
        Route("/", home, methods=["GET"]),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/docs/api", api_reference, methods=["GET"]),
        Route("/static/{name:path}", asset, methods=["GET"]),
    ]
