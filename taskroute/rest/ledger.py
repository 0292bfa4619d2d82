"""REST: the payout ledger as CSV (issue 7).

`GET /v1/payouts.csv?project_id=...` (customers: their projects; admins: any) or
`?expert_id=...` (experts: their own; admins: any). Streams every line, oldest first.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from taskroute.auth import parse_id
from taskroute.errors import BadInput
from taskroute.resolvers import ledger

from .common import services, viewer


async def payouts_csv(request: Request) -> Response:
    who = await viewer(request)
    unknown = set(request.query_params) - {"project_id", "expert_id"}
    if unknown:
        raise BadInput(f"unknown parameters: {sorted(unknown)}")
    raw_expert = request.query_params.get("expert_id")
    raw_project = request.query_params.get("project_id")
    db = services(request).db
    scope = await ledger.scope_for(
        db,
        who,
        parse_id(raw_expert, "expert") if raw_expert else None,
        parse_id(raw_project, "project") if raw_project else None,
    )
    name = f"payouts-{scope.project_id or scope.expert_id}.csv"
    return StreamingResponse(
        ledger.csv_lines(db, scope),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


routes = [Route("/v1/payouts.csv", payouts_csv, methods=["GET"])]
