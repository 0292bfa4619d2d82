"""/healthz (the process answers) and /readyz (it can serve: database and listeners connected).

Besides the database's own, readyz runs the checks of `services.readiness` (name -> async
callable returning True when ready; the lifespan adds the listener's and the drain's).
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.server.services import ReadinessCheck, ServerServices

CHECK_TIMEOUT = 2.0


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _run(check: ReadinessCheck) -> str:
    try:
        ok = await asyncio.wait_for(check(), timeout=CHECK_TIMEOUT)
    except Exception as exc:  # any failure means not ready; the name is enough for operators
        return type(exc).__name__
    return "ok" if ok else "not ready"


async def readyz(request: Request) -> Response:
    services: ServerServices = request.state.services

    async def database() -> bool:
        return bool(await services.db.fetchval("SELECT 1") == 1)

    checks: dict[str, ReadinessCheck] = {"database": database}
    checks.update(services.readiness)
    results = await asyncio.gather(*(_run(c) for c in checks.values()))
    report = dict(zip(checks, results, strict=True))
    ready = all(r == "ok" for r in results)
    return JSONResponse(
        {"status": "ready" if ready else "unavailable", "checks": report},
        status_code=200 if ready else 503,
    )
