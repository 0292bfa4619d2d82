"""Graceful restarts: what SIGTERM does in a server process, beyond what uvicorn does itself.

uvicorn, on SIGTERM, stops accepting connections, lets in-flight HTTP requests finish (keep-alive
connections are closed after their response), then runs the lifespan shutdown. What it lacks:

- WebSockets: uvicorn closes them with 1012 ("service restart") at the moment it stops
  accepting. We close them first, with 1001 ("going away"), which clients (and load
  balancers) treat as "reconnect elsewhere"; a socket that opens during the drain is
  accepted and closed with 1001 at once.
- Background jobs stop at a safe point (jobs.py) instead of being cancelled mid-pass.
- `/readyz` answers 503 from the first moment, for load balancers that probe it.

The drain runs when the process gets SIGTERM (or SIGINT): the handler the lifespan installs
wraps the server's own (uvicorn's), runs the drain, then hands the signal on, so uvicorn's
shutdown follows. A second signal goes straight through (uvicorn: force exit on a second
Ctrl-C).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

GOING_AWAY = 1001
_CLOSE: Message = {"type": "websocket.close", "code": GOING_AWAY, "reason": "server restarting"}


class _Socket:
    """One WebSocket's send side, shared by the app and the drain (one lock, so a close never
    interleaves with a frame the app is writing)."""

    def __init__(self, send: Send, drain: Drain) -> None:
        self._send = send
        self._drain = drain
        self._lock = asyncio.Lock()
        self.accepted = False
        self.closed = False

    async def send(self, message: Message) -> None:
        async with self._lock:
            if self.closed:
                # closed by the drain: the app learns it from the disconnect it receives next
                return
            kind = message["type"]
            await self._send(message)
            if kind == "websocket.accept":
                self.accepted = True
                if self._drain.draining:  # accepted while draining: tell it to go at once
                    await self._close_locked()
            elif kind == "websocket.close":
                self.closed = True

    async def going_away(self) -> None:
        async with self._lock:
            if self.accepted and not self.closed:
                await self._close_locked()

    async def _close_locked(self) -> None:
        self.closed = True
        with contextlib.suppress(Exception):  # the client may be gone already
            await self._send(_CLOSE)


class Drain:
    def __init__(self, close_timeout: float = 5.0) -> None:
        # how long the WebSocket closes may take before uvicorn's shutdown goes on anyway
        self.close_timeout = close_timeout
        self.draining = False
        self.sockets: set[_Socket] = set()
        self._on_drain: list[Callable[[], None]] = []
        self._signalled = False
        self._task: asyncio.Task[None] | None = None  # the running drain (kept referenced)

    def on_drain(self, callback: Callable[[], None]) -> None:
        """Called when the drain begins (e.g. background jobs: stop at the next safe point)."""
        self._on_drain.append(callback)

    async def ready(self) -> bool:
        """A readiness check: not ready once draining."""
        return not self.draining

    async def begin(self) -> None:
        """Stop taking work: readiness down, jobs told to stop, WebSockets closed with 1001."""
        if not self.draining:
            self.draining = True
            log.info("draining: closing %d WebSocket(s) with 1001", len(self.sockets))
            for callback in self._on_drain:
                callback()
        sockets = list(self.sockets)
        if sockets:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.close_timeout):
                    await asyncio.gather(*(s.going_away() for s in sockets))

    # --- signals ------------------------------------------------------------------------

    def hook_signals(self) -> None:
        """From the lifespan's startup, inside the server's signal handling: wrap its SIGTERM
        and SIGINT handlers so the drain runs first. Without such a handler (not the main
        thread, or a server that installs none) there is nothing to wrap."""
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)
            if callable(previous):
                signal.signal(sig, self._handler(loop, previous))

    def _handler(
        self, loop: asyncio.AbstractEventLoop, previous: Callable[[int, FrameType | None], Any]
    ) -> Callable[[int, FrameType | None], None]:
        def handle(signum: int, frame: FrameType | None) -> None:
            if self._signalled:  # a second signal: no more waiting
                previous(signum, frame)
                return
            self._signalled = True
            # A signal handler may run between any two bytecodes of the loop's own code:
            # schedule the drain through the loop's thread-safe door.
            loop.call_soon_threadsafe(self._start, previous, signum, frame)

        return handle

    def _start(
        self, previous: Callable[[int, FrameType | None], Any], signum: int, frame: Any
    ) -> None:
        async def drain_then_pass_on() -> None:
            try:
                await self.begin()
            finally:
                previous(signum, frame)  # uvicorn: stop accepting, finish requests, shut down

        self._task = asyncio.get_running_loop().create_task(drain_then_pass_on(), name="drain")


class DrainWebSockets:
    """ASGI middleware: every WebSocket is known to the drain, which can close it (1001)."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        sock = _Socket(send, self.drain)
        self.drain.sockets.add(sock)
        try:
            await self.app(scope, receive, sock.send)
        finally:
            self.drain.sockets.discard(sock)
