"""uvicorn's sans-I/O WebSocket protocol, with less kept per idle connection.

Ten thousand idle `taskAvailable` subscribers are ten thousand WebSockets, and most of what one
costs is the server's own bookkeeping (bench/RESULTS.md, tracemalloc): after the handshake
uvicorn's protocol keeps the parsed upgrade request and its response (websockets' header
structures, ~3-4 KB, also held by websockets' parser frame for the connection's life), and an
asyncio.Queue plus an asyncio.Event whose four deques are ~760 bytes each even when empty.
This subclass changes only that:

- once the scope is built (its `headers` are the request's headers, as the app reads them),
  the parsed request's headers are emptied, and the response's once it was sent;
- the receive queue and the "writable" flag are a list and a flag that create a future only
  while someone waits.

Everything else (the handshake, ping/pong keepalive, close handshake, back-pressure) is
uvicorn's code. `taskroute serve` passes this class as uvicorn's `ws`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request


class _Mailbox:
    """The part of asyncio.Queue uvicorn uses (put_nowait, get, empty), unbounded, FIFO."""

    __slots__ = ("_items", "_getters")

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._getters: list[asyncio.Future[None]] | None = None

    def empty(self) -> bool:
        return not self._items

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        self._wake_one()

    def _wake_one(self) -> None:
        getters = self._getters
        while getters:
            getter = getters.pop(0)
            if not getter.done():
                getter.set_result(None)
                return

    async def get(self) -> Any:
        while not self._items:
            getter = asyncio.get_running_loop().create_future()
            if self._getters is None:
                self._getters = []
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                if getter in self._getters:
                    self._getters.remove(getter)
                elif self._items:
                    self._wake_one()  # woken, then cancelled: the item goes to the next getter
                raise
        return self._items.pop(0)


class _Flag:
    """The part of asyncio.Event uvicorn uses (set, clear, wait, is_set)."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> bool:
        if self._set:
            return True
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if self._waiters is not None and waiter in self._waiters:
                self._waiters.remove(waiter)
        return True


class SlimSansIOWebSocketProtocol(WebSocketsSansIOProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queue = _Mailbox()  # type: ignore[assignment]
        writable = _Flag()
        writable.set()
        self.writable = writable  # type: ignore[assignment]

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        # The scope carries the headers now; the parsed copy is never read again.
        event.headers.clear()

    async def send(self, message: ASGISendEvent) -> None:
        await super().send(message)
        if message["type"] == "websocket.accept" and self.handshake_complete:
            self.response.headers.clear()  # written to the socket already
