"""The container the app's lifespan builds: the shared services plus what only the server reads."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from taskroute.resolvers.services import Services
from taskroute.server.drain import Drain

# True when ready; /readyz runs every check of `ServerServices.readiness`
ReadinessCheck = Callable[[], Awaitable[bool]]


@dataclass
class ServerServices(Services):
    """`Services`, which requests read, and the process's own lifecycle state."""

    # SIGTERM handling: WebSockets closed with 1001, jobs stopped, readiness off
    drain: Drain | None = None
    # name -> check, besides the database's own (the listener, the drain)
    readiness: dict[str, ReadinessCheck] = field(default_factory=dict)
