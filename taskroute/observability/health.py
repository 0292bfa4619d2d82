"""/healthz (the process answers) and /readyz (it can serve: database and listeners connected).

Other parts of the app register readiness checks in `services.extras["readiness"]`, a dict of
name -> async callable returning True when ready (the realtime listener registers its own).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

if TYPE_CHECKING:
    from taskroute.services import Services

ReadinessCheck = Callable[[], Awaitable[bool]]
CHECK_TIMEOUT = 2.0


def register_readiness(services: Services, name: str, check: ReadinessCheck) -> None:
    services.extras.setdefault("readiness", {})[name] = check


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _run(check: ReadinessCheck) -> str:
    try:
        ok = await asyncio.wait_for(check(), timeout=CHECK_TIMEOUT)
    except Exception as exc:  # any failure means not ready; the name is enough for operators
        return type(exc).__name__
    return "ok" if ok else "not ready"


async def readyz(request: Request) -> Response:
    services: Services = request.state.services

    async def database() -> bool:
        return bool(await services.db.fetchval("SELECT 1") == 1)

    checks: dict[str, ReadinessCheck] = {"database": database}
    checks.update(services.extras.get("readiness", {}))
    results = await asyncio.gather(*(_run(c) for c in checks.values()))
    report = dict(zip(checks, results, strict=True))
    ready = all(r == "ok" for r in results)
    return JSONResponse(
        {"status": "ready" if ready else "unavailable", "checks": report},
        status_code=200 if ready else 503,
    )
