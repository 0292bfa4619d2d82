"""Per-request context: an X-Request-ID in and out, an access log line, request metrics."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from taskroute.observability import metrics
from taskroute.observability.logs import request_id_var

log = logging.getLogger("taskroute.access")

# A caller's id is kept only if it is short and plain (it ends up in logs and headers).
_VALID_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _route_template(scope: Scope) -> str:
    """The matched route's path template ("/v1/assignments/{id}/submit"), never a raw path."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


_INTERNAL_JSON = json.dumps({"error": {"code": "INTERNAL", "message": "Unexpected error."}})
_INTERNAL_START: Message = {
    "type": "http.response.start",
    "status": 500,
    "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(_INTERNAL_JSON)).encode()),
    ],
}
_INTERNAL_BODY: Message = {"type": "http.response.body", "body": _INTERNAL_JSON.encode()}


class RequestContext:
    """Outermost middleware: every response carries X-Request-ID; every request is logged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        incoming = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        rid = incoming if _VALID_ID.match(incoming) else uuid.uuid4().hex
        token = request_id_var.set(rid)
        start = time.perf_counter()
        # WebSockets: 101 once accepted; 403 if closed before the handshake completed (the
        # ASGI server answers 403 then), so refused sockets are not counted as upgrades.
        status = 500 if scope["type"] == "http" else 101
        accepted = False

        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started
            nonlocal accepted
            if message["type"] == "websocket.accept":
                accepted = True
            elif message["type"] == "websocket.close" and not accepted:
                status = 403  # refused before the handshake (Origin, auth): not an upgrade
            elif message["type"] == "websocket.http.response.start":
                status = message["status"]
            if message["type"] == "http.response.start":
                started = True
                status = message["status"]
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"
                ]
                headers.append((b"x-request-id", rid.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # An unexpected exception: logged with its trace and the request id; the client
            # gets a JSON 500 with neither (REST's error shape), if nothing was sent yet.
            log.exception("unhandled error in %s %s", scope.get("method", "WS"), scope.get("path"))
            if scope["type"] != "http" or started:
                raise
            await send_with_id(_INTERNAL_START)
            await send_with_id(_INTERNAL_BODY)
        finally:
            elapsed = time.perf_counter() - start
            route = _route_template(scope)
            method = scope.get("method", "WS")
            if route != "/metrics":
                metrics.HTTP_REQUESTS.labels(method, route, str(status)).inc()
                metrics.HTTP_SECONDS.labels(method, route).observe(elapsed)
            log.info(
                "%s %s %s",
                method,
                scope.get("path", ""),
                status,
                extra={"status": status, "route": route, "ms": round(elapsed * 1000, 2)},
            )
            request_id_var.reset(token)
