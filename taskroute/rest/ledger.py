"""REST: the payout ledger as CSV.

`GET /v1/payouts.csv?project_id=...` (customers: their projects; admins: any) or
`?expert_id=...` (experts: their own; admins: any). Streams every line, oldest first, then
the undecided work as `pending` rows.

Reviews: `POST /v1/assignments/approve` and `POST /v1/assignments/reject` with
`{"assignment_ids": [...], "reason": "..."}` (customers; batch, idempotent; a rejection needs a
reason), `GET /v1/assignments/{id}/review` (the expert who did it, the customer, admins).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from taskroute.errors import BadInput
from taskroute.resolvers import acceptance, ledger
from taskroute.resolvers.accounts.credentials import parse_id

from .common import api_route, json_object, services, viewer


async def payouts_csv(request: Request) -> Response:
    who = await viewer(request)
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


def _review_json(r: acceptance.Review) -> dict[str, Any]:
    def at(value: Any) -> str | None:
        return None if value is None else value.isoformat()

    return {
        "assignment_id": str(r.assignment_id),
        "expert_id": str(r.expert_id),
        "project_id": str(r.project_id),
        "status": r.status,
        "reason": r.reason,
        "reviewed_by": r.reviewed_by,
        "reviewed_at": at(r.reviewed_at),
        "submitted_at": at(r.submitted_at),
        "pay_cents": r.pay_cents,
        "payment_policy": r.payment_policy,
        "override_until": at(r.override_until),
        "candidate_order": r.candidate_order,
        "changed": r.changed,
        "note": r.note,
        "too_fast": r.too_fast,
    }


async def _decide(request: Request, accept: bool) -> Response:
    who = await viewer(request)
    body = await json_object(request, {"assignment_ids", "reason"})
    raw = body.get("assignment_ids")
    if not isinstance(raw, list) or not all(isinstance(i, str) for i in raw):
        raise BadInput("assignment_ids must be a list of ids", field="assignment_ids")
    ids = [parse_id(i, "assignment") for i in raw]
    db = services(request).db
    if accept:
        reviews = await acceptance.approve(db, who, ids, body.get("reason"))
    else:
        reviews = await acceptance.reject(db, who, ids, body.get("reason"))
    return JSONResponse({"reviews": [_review_json(r) for r in reviews]})


async def approve(request: Request) -> Response:
    return await _decide(request, True)


async def reject(request: Request) -> Response:
    return await _decide(request, False)


async def review(request: Request) -> Response:
    who = await viewer(request)
    found = await acceptance.review_of(
        services(request).db, who, parse_id(request.path_params["id"], "assignment")
    )
    return JSONResponse(_review_json(found))


async def grant_bonus(request: Request) -> Response:
    who = await viewer(request)
    body = await json_object(
        request,
        {"expert_id", "amount_cents", "reason", "idempotency_key"},
        required={"expert_id", "amount_cents", "reason", "idempotency_key"},
    )
    raw_expert = body["expert_id"]
    if not isinstance(raw_expert, str):
        raise BadInput("expert_id must be a string", field="expert_id")
    s = services(request)
    row = await ledger.grant_bonus(
        s.db,
        who,
        parse_id(request.path_params["id"], "project"),
        parse_id(raw_expert, "expert"),
        body["amount_cents"],
        body["reason"],
        body["idempotency_key"],
        s.settings.bonus_max_cents,
    )
    return JSONResponse(
        {
            "id": str(row["id"]),
            "kind": row["kind"],
            "expert_id": str(row["expert_id"]),
            "project_id": str(row["project_id"]),
            "amount_cents": row["amount_cents"],
            "reason": row["reason"],
            "idempotency_key": row["idempotency_key"],
            "created_at": row["created_at"].isoformat(),
        }
    )


routes = [
    api_route("/v1/payouts.csv", payouts_csv, methods=["GET"], query=("project_id", "expert_id")),
    api_route("/v1/assignments/approve", approve, methods=["POST"]),
    api_route("/v1/assignments/reject", reject, methods=["POST"]),
    api_route("/v1/assignments/{id}/review", review, methods=["GET"]),
    api_route("/v1/projects/{id}/bonuses", grant_bonus, methods=["POST"]),
]
