"""REST: the realtime hub's state, for operators (admin only)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from taskroute.errors import Unavailable

from .common import services, viewer


async def realtime_status(request: Request) -> Response:
    (await viewer(request)).require_admin()
    hub = services(request).extras.get("hub")
    if hub is None:
        raise Unavailable("realtime is not running on this server")
    return JSONResponse(hub.health())


routes = [Route("/v1/realtime/status", realtime_status, methods=["GET"])]
