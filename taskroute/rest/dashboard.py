"""The customer dashboard: a static page and its script, served by the app."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

STATIC = Path(__file__).resolve().parent.parent / "static"
# The page stores a bearer token in localStorage: no third-party script may run on it.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; connect-src 'self' ws: wss:; "
    "style-src 'self'; script-src 'self'; img-src 'self' data:",
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
}


async def dashboard(request: Request) -> Response:
    return FileResponse(STATIC / "dashboard.html", headers=HEADERS)


async def dashboard_asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in ("dashboard.js", "charts.js", "dashboard.css"):
        return Response("not found", status_code=404)
    return FileResponse(STATIC / name, headers=HEADERS)


routes = [
    Route("/dashboard", dashboard, methods=["GET"]),
    Route("/dashboard/{name}", dashboard_asset, methods=["GET"]),
]
