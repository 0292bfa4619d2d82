"""The original REST contract (JSON, snake_case), on the same domain functions as GraphQL,
with its OpenAPI document and the pages around the APIs (`pages.py`)."""

from starlette.routing import BaseRoute

from . import (
    batches,
    claims,
    dashboard,
    exports,
    instructions,
    ledger,
    pages,
    projects,
    quality,
    realtime,
    webhooks,
    workbench,
)
from .common import error_response

# the /v1 API: each route carries its declaration (contract.Operation)
api_routes: list[BaseRoute] = [
    *claims.routes,
    *projects.routes,
    *instructions.routes,
    *batches.routes,
    *quality.routes,
    *exports.routes,
    *ledger.routes,
    *realtime.routes,
    *webhooks.routes,
]
routes: list[BaseRoute] = [
    *api_routes,
    *dashboard.routes,
    *workbench.routes,
    *pages.routes_for(api_routes),
]

__all__ = ["api_routes", "error_response", "routes"]
