"""The expert workbench: a static labeling page and its script, served by the app.

Same rules as the dashboard (`dashboard.py`): no build step, no third-party script, and a
Content-Security-Policy that keeps the pasted token away from anything but this origin.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from .dashboard import HEADERS, STATIC

ASSETS = ("work.js", "work.css")


async def workbench(request: Request) -> Response:
    return FileResponse(STATIC / "work.html", headers=HEADERS)


async def workbench_asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in ASSETS:
        return Response("not found", status_code=404)
    return FileResponse(STATIC / name, headers=HEADERS)


routes = [
    Route("/work", workbench, methods=["GET"]),
    Route("/work/{name}", workbench_asset, methods=["GET"]),
]
