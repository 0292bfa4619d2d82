"""A real webhook receiver for tests: an HTTP/1.1 server on 127.0.0.1 in the test's event loop
that records every request (headers, raw body) and answers with the status the test sets;
`down()` closes its socket (connections refused) and `up()` listens again on the same port.
`gate` (when set) holds answers until the test opens it, to keep attempts in flight."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from ..helpers import free_port

SECRET_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    port: int = field(default_factory=free_port)
    status: int = 200
    received: list[Received] = field(default_factory=list)  # every request, answered or not
    in_flight: int = 0
    most_in_flight: int = 0
    gate: asyncio.Event | None = None
    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def down(self) -> None:
        if self._server is not None:
            self._server.close()
            for w in list(self._writers):  # kept-alive connections too: the receiver is gone
                w.close()
            await self._server.wait_closed()
            self._server = None

    def ok_ids(self) -> list[str]:
        """Ids of the requests answered 2xx, in arrival order (duplicates kept)."""
        return [r.id for r in self.received if r.headers.get("x-answered") == "2xx"]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, _, v = line.partition(":")
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                got = Received(headers, body)
                self.received.append(got)
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
                try:
                    if self.gate is not None:
                        await self.gate.wait()
                finally:
                    self.in_flight -= 1
                status = self.status
                if 200 <= status < 300:
                    headers["x-answered"] = "2xx"
                reply = b"ok" if status < 300 else b"nope"
                writer.write(
                    f"HTTP/1.1 {status} X\r\ncontent-length: {len(reply)}\r\n\r\n".encode() + reply
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
