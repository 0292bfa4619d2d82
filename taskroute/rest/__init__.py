"""The original REST contract (JSON, snake_case), on the same domain functions as GraphQL."""

from starlette.routing import BaseRoute

from . import (
    batches,
    claims,
    dashboard,
    exports,
    instructions,
    ledger,
    projects,
    quality,
    realtime,
    webhooks,
    workbench,
)
from .common import error_response

routes: list[BaseRoute] = [
    *claims.routes,
    *projects.routes,
    *instructions.routes,
    *batches.routes,
    *quality.routes,
    *exports.routes,
    *ledger.routes,
    *dashboard.routes,
    *workbench.routes,
    *realtime.routes,
    *webhooks.routes,
]

__all__ = ["error_response", "routes"]
