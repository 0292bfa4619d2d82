"""REST: the realtime hub's state, for operators (admin only)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.errors import Unavailable

from .common import api_route, services, viewer
from .contract import Operation, Reply

REALTIME_STATUS = Operation(
    "GET",
    "/v1/realtime/status",
    "The realtime hub's state, for operators",
    auth="admin",
    tag="operations",
    replies={
        200: Reply(
            "the LISTEN connection, subscribers and credential cache",
            {
                "type": "object",
                "required": ["listener", "reconnects", "task_waiters"],
                "properties": {
                    "listener": {"enum": ["ok", "down"]},
                    "reconnects": {"type": "integer"},
                    "task_waiters": {"type": "integer"},
                    "credential_cache": {"type": "object"},
                },
            },
        )
    },
)


async def realtime_status(request: Request) -> Response:
    (await viewer(request)).require_admin()
    hub = services(request).hub
    if hub is None:
        raise Unavailable("realtime is not running on this server")
    body = hub.health()
    cache = services(request).credentials
    if cache is not None and cache.max_entries > 0:  # size 0: it only watches streams
        body["credential_cache"] = cache.stats()
    return JSONResponse(body)


routes = [api_route(REALTIME_STATUS, realtime_status)]
