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

from .common import api_route, declared_body, services, viewer
from .contract import (
    BOOLEAN,
    INTEGER,
    STRING,
    TIME,
    UUID,
    Operation,
    Param,
    Reply,
    array,
    nullable,
    obj,
)

PAYOUTS_CSV = Operation(
    "GET",
    "/v1/payouts.csv",
    "The payout ledger as CSV",
    auth="any token",
    tag="payments",
    description="Give project_id (customers: their projects) or expert_id (experts: their "
    "own); admins may read any. Every line, oldest first, then the undecided work as pending.",
    query=(
        Param("project_id", "a project's ledger", UUID),
        Param("expert_id", "an expert's ledger", UUID),
    ),
    replies={200: Reply("CSV with a header row", {"type": "string"}, media="text/csv")},
)
REVIEW = obj(
    {
        "assignment_id": UUID,
        "expert_id": UUID,
        "project_id": UUID,
        "status": STRING,
        "reason": nullable(STRING),
        "reviewed_by": nullable(STRING),
        "reviewed_at": nullable(TIME),
        "submitted_at": nullable(TIME),
        "pay_cents": INTEGER,
        "payment_policy": STRING,
        "override_until": nullable(TIME),
        "candidate_order": {
            **nullable({"enum": ["ab", "ba"]}),
            "description": "PAIRWISE: the order its expert saw the candidates in",
        },
        "changed": {**BOOLEAN, "description": "did this call change the state"},
        "note": {**nullable(STRING), "description": "why nothing changed"},
        "too_fast": {
            **BOOLEAN,
            "description": "answered sooner than the project's min_seconds_per_task",
        },
    }
)
DECISION = obj(
    {"assignment_ids": array(UUID)},
    {"reason": {**STRING, "description": "required to reject"}},
)
REVIEWS = Reply("one review per assignment", obj({"reviews": array(REVIEW)}))
APPROVE = Operation(
    "POST",
    "/v1/assignments/approve",
    "Approve submitted work (batch, idempotent)",
    auth="customer or admin",
    tag="payments",
    body=DECISION,
    errors=(409,),
    replies={200: REVIEWS},
)
REJECT = Operation(
    "POST",
    "/v1/assignments/reject",
    "Reject submitted work with a reason (batch, idempotent)",
    auth="customer or admin",
    tag="payments",
    body=DECISION,
    errors=(409,),
    replies={200: REVIEWS},
)
GET_REVIEW = Operation(
    "GET",
    "/v1/assignments/{id}/review",
    "The review state of one assignment",
    auth="any token",
    tag="payments",
    description="For the expert who did it, the project's customer, and admins.",
    replies={200: Reply("the review", REVIEW)},
)
GRANT_BONUS = Operation(
    "POST",
    "/v1/projects/{id}/bonuses",
    "Grant a bonus to an expert who worked on the project (idempotent per key)",
    auth="customer or admin",
    tag="payments",
    description="One ledger line per (project, idempotency_key), however often it is asked "
    "for; the same key with another expert, amount or reason is 409 CONFLICT. An expert who "
    "never submitted work in the project is 404.",
    body=obj(
        {
            "expert_id": UUID,
            "amount_cents": {
                "type": "integer",
                "minimum": 1,
                "description": "at most TASKROUTE_BONUS_MAX_CENTS",
            },
            "reason": {"type": "string", "minLength": 1, "maxLength": ledger.REASON_MAX},
            "idempotency_key": {"type": "string", "minLength": 1, "maxLength": ledger.KEY_MAX},
        }
    ),
    errors=(409,),
    replies={
        200: Reply(
            "the bonus line (the first one's, for a repeated key)",
            obj(
                {
                    "id": UUID,
                    "kind": {"const": "bonus"},
                    "expert_id": UUID,
                    "project_id": UUID,
                    "amount_cents": INTEGER,
                    "reason": STRING,
                    "idempotency_key": STRING,
                    "created_at": TIME,
                }
            ),
        )
    },
)


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
    body = await declared_body(request, APPROVE if accept else REJECT)
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
    body = await declared_body(request, GRANT_BONUS)
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
    api_route(PAYOUTS_CSV, payouts_csv),
    api_route(APPROVE, approve),
    api_route(REJECT, reject),
    api_route(GET_REVIEW, review),
    api_route(GRANT_BONUS, grant_bonus),
]
