"""The expert workbench: a static labeling page and its script, served by the app.

Same rules as the dashboard (`dashboard.py`): no build step, no script from elsewhere (the
Markdown renderer and sanitizer are vendored files, static/VENDORED.md), and a
Content-Security-Policy that keeps the pasted token away from anything but this origin.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from .dashboard import HEADERS, STATIC

ASSETS = ("work.js", "work.css", "marked.umd.js", "purify.min.js")
# Instructions may show images from other origins when the project allows them: the
# sanitizer (work.js: renderInstructions) decides which images stay, so the policy lets
# https images through on this page only. Scripts and connections stay same-origin.
WORK_HEADERS = {
    **HEADERS,
    "Content-Security-Policy": HEADERS["Content-Security-Policy"] + " https:",
}


async def workbench(request: Request) -> Response:
    return FileResponse(STATIC / "work.html", headers=WORK_HEADERS)


async def workbench_asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in ASSETS:
        return Response("not found", status_code=404)
    return FileResponse(STATIC / name, headers=WORK_HEADERS)


routes = [
    Route("/work", workbench, methods=["GET"]),
    Route("/work/{name}", workbench_asset, methods=["GET"]),
]
