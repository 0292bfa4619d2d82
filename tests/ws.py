"""A small GraphQL-over-WebSocket client (both `graphql-transport-ws` and legacy `graphql-ws`)
on the `websockets` package, for subscription tests and the wake bench."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

TRANSPORT_WS = "graphql-transport-ws"
LEGACY_WS = "graphql-ws"

TASK_AVAILABLE = (
    "subscription($s: [String!]) { taskAvailable(skills: $s) { skill projectId recheck } }"
)
PROJECT_PROGRESS = (
    "subscription($p: ID!) { projectProgress(projectId: $p) {"
    " total open claimed done failed canceled } }"
)


class Rejected(Exception):
    """The server refused `connection_init` (closed the socket or sent connection_error)."""

    def __init__(self, code: int | None, payload: Any = None) -> None:
        super().__init__(f"connection refused (close code {code}, payload {payload})")
        self.code = code
        self.payload = payload


class WsClient:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        protocol: str = TRANSPORT_WS,
        timeout: float = 10,
        headers: dict[str, str] | None = None,
        compression: str | None = None,
    ) -> None:
        self.headers = headers
        # None: no permessage-deflate offer; "deflate": offer it, as browsers do
        self.compression = compression
        self.url = base_url.replace("http://", "ws://") + "/graphql"
        self.token = token
        self.protocol = protocol
        self.timeout = timeout
        self.ws: ClientConnection | None = None
        self._ids = itertools.count(1)
        self.completed: set[str] = set()

    async def __aenter__(self) -> WsClient:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        self.ws = await connect(
            self.url,
            additional_headers=self.headers,
            subprotocols=[self.protocol],
            ping_interval=None,
            compression=self.compression,  # type: ignore[arg-type]
        )
        payload = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        await self._send({"type": "connection_init", "payload": payload})
        try:
            msg = await self._recv()
        except Exception as exc:
            close = getattr(self.ws, "close_code", None)
            raise Rejected(close) from exc
        if msg["type"] == "connection_error":
            raise Rejected(None, msg.get("payload"))
        assert msg["type"] == "connection_ack", msg

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def _send(self, msg: dict[str, Any]) -> None:
        assert self.ws is not None
        await self.ws.send(json.dumps(msg))

    async def _recv(self) -> dict[str, Any]:
        assert self.ws is not None
        while True:
            msg = json.loads(await asyncio.wait_for(self.ws.recv(), self.timeout))
            if msg["type"] in ("ka", "ping", "pong"):
                if msg["type"] == "ping":
                    await self._send({"type": "pong"})
                continue
            return msg

    async def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> str:
        op = str(next(self._ids))
        kind = "subscribe" if self.protocol == TRANSPORT_WS else "start"
        await self._send(
            {"id": op, "type": kind, "payload": {"query": query, "variables": variables or {}}}
        )
        return op

    async def message(self) -> dict[str, Any]:
        """The next protocol message as sent (`next`, `error`, `complete`, ...), pings answered."""
        return await self._recv()

    async def next(self, timeout: float | None = None) -> dict[str, Any]:
        """The next result: `{"id", "data"}` or `{"id", "errors"}`; `complete` raises."""
        saved = self.timeout
        if timeout is not None:
            self.timeout = timeout
        try:
            msg = await self._recv()
            while msg["type"] == "complete":  # an operation ended (after its error, say)
                self.completed.add(msg["id"])
                msg = await self._recv()
        finally:
            self.timeout = saved
        if msg["type"] in ("next", "data"):
            return {"id": msg["id"], **msg["payload"]}
        if msg["type"] == "error":
            errors = msg["payload"]
            return {"id": msg["id"], "errors": errors if isinstance(errors, list) else [errors]}
        raise AssertionError(f"unexpected message {msg}")
