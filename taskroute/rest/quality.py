"""REST: a project's results as a JSON Lines stream, their change feed, adjudication context."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from taskroute.db.pool import Database
from taskroute.resolvers import answer_schema, batches, projects
from taskroute.resolvers.accounts.credentials import parse_id
from taskroute.resolvers.quality import adjudication, gold, policy, result_feed

from .common import api_route, declared_body, page_info, page_size, services, viewer
from .contract import (
    ANY_JSON,
    BOOLEAN,
    CURSOR,
    INTEGER,
    PAGE_INFO,
    PAGE_SIZE,
    STRING,
    TASK_INPUT,
    TIME,
    Operation,
    Param,
    Reply,
    Schema,
    array,
    nullable,
    obj,
)
from .contract import UUID as ID

STREAM_PAGE = 500  # rows per database round trip while streaming

RESULT_LINE = obj(
    {
        "item_id": ID,
        "external_id": nullable(STRING),
        "answer": ANY_JSON,
        "agreement": nullable({"type": "number"}),
        "answers": INTEGER,
        "method": STRING,
        "version": INTEGER,
        "confidence": nullable({"type": "number"}),
        "updated_at": TIME,
    }
)
RESULTS = Operation(
    "GET",
    "/v1/projects/{id}/results",
    "Resolved items as JSON Lines",
    auth="customer or admin",
    tag="results",
    description="One JSON object per line, in item-id order; `after` (an item id, or a cursor "
    "of GraphQL's itemResults) resumes.",
    query=(Param("after", "resume after this item"),),
    replies={
        200: Reply(
            "a stream of JSON objects, one per line",
            {"type": "string"},
            media="application/x-ndjson",
            line_schema=RESULT_LINE,
        )
    },
)
RESULT_CHANGES = Operation(
    "GET",
    "/v1/projects/{id}/result-changes",
    "A page of the result change feed",
    auth="customer or admin",
    tag="results",
    query=(
        Param("first", "page size (default 100)", PAGE_SIZE),
        Param("limit", "deprecated: first", PAGE_SIZE),
        Param("after", "a page_info.end_cursor (or the deprecated cursor)"),
    ),
    replies={
        200: Reply(
            "a page, oldest change first",
            obj(
                {
                    "changes": array(
                        obj(
                            {
                                "cursor": {**CURSOR, "deprecated": True},
                                "item_id": ID,
                                "external_id": nullable(STRING),
                                "version": INTEGER,
                                "change": STRING,
                                "answer": ANY_JSON,
                                "agreement": nullable({"type": "number"}),
                                "at": TIME,
                            }
                        )
                    ),
                    "page_info": PAGE_INFO,
                    "cursor": {**nullable(CURSOR), "deprecated": True},
                    "has_more": {**BOOLEAN, "deprecated": True},
                }
            ),
        )
    },
)


def _policy_schema(required: bool) -> Schema:
    """The quality policy, from the bounds policy.set_policy checks."""
    fields: dict[str, Schema] = {
        name: {"type": kind, "minimum": lo, "maximum": hi}
        for name, (kind, lo, hi) in policy.POLICY_FIELDS.items()
    }
    fields.update({name: {"enum": list(allowed)} for name, allowed in policy.CHOICES.items()})
    fields["answer_field"] = {**STRING, "maxLength": 200, "description": '"": whole answers'}
    fields["adjudicate"] = BOOLEAN
    if required:  # as stored: a field may be unset (null)
        return obj({k: nullable(s) for k, s in fields.items()})
    return obj({}, fields)


GOLD_POOL = array(
    obj(
        {
            "skill": STRING,
            "active": INTEGER,
            "retired": INTEGER,
            "exposures": INTEGER,
            "low": BOOLEAN,
        }
    )
)
GET_POLICY = Operation(
    "GET",
    "/v1/projects/{id}/quality",
    "A project's quality policy and gold pool",
    auth="customer or admin",
    tag="quality",
    replies={
        200: Reply("the policy", obj({"policy": _policy_schema(True), "gold_pool": GOLD_POOL}))
    },
)
PUT_POLICY = Operation(
    "PUT",
    "/v1/projects/{id}/quality",
    "Change a project's quality policy (the fields given)",
    auth="customer or admin",
    tag="quality",
    body=_policy_schema(False),
    replies={200: Reply("the policy now", obj({"policy": _policy_schema(True)}))},
)
ADD_GOLD = Operation(
    "POST",
    "/v1/projects/{id}/gold",
    "Add gold items (known answers, never sent as real work)",
    auth="customer or admin",
    tag="quality",
    body=obj({"tasks": {**array(TASK_INPUT), "minItems": 1}}),
    errors=(409,),
    replies={201: Reply("stored", obj({"added": INTEGER}))},
)
PRIOR_ANSWERS = Operation(
    "GET",
    "/v1/tasks/{id}/prior-answers",
    "The answers an adjudication task weighs",
    auth="expert",
    tag="quality",
    description="Only while the expert holds the adjudication's live lease: null for any other "
    "task or holder.",
    replies={200: Reply("the earlier answers", obj({"prior_answers": nullable(array(ANY_JSON))}))},
)


def _result_line(r: Any) -> str:
    row = {
        "item_id": str(r["item_id"]),
        "external_id": r["external_id"],
        "answer": r["answer"],
        "agreement": r["agreement"],
        "answers": r["answers"],
        "method": r["method"],
        "version": r["version"],
        "confidence": r["confidence"],
        "updated_at": r["updated_at"].isoformat(),
    }
    return json.dumps(row, separators=(",", ":")) + "\n"


async def owned_project(request: Request) -> UUID:
    who = await viewer(request)
    asked = parse_id(request.path_params["id"], "project")
    row = await projects.visible_project(services(request).db, who, asked)
    project_id: UUID = row["id"]
    return project_id


async def results(request: Request) -> Response:
    """Resolved items, one JSON object per line, in item-id order; `?after=<item_id>` (or a
    cursor of `itemResults`) resumes."""
    project_id = await owned_project(request)
    db = services(request).db
    after = request.query_params.get("after")
    result_feed.result_after(after)  # a bad cursor is a 422 before the stream starts

    async def lines(db: Database, after: str | None) -> AsyncIterator[str]:
        # One short connection per page: a slow reader never pins a pooled connection.
        while True:
            page = await result_feed.results_page(db, project_id, after, STREAM_PAGE)
            for r in page.rows:
                yield _result_line(r)
            if not page.has_next:
                return
            after = page.end_cursor

    return StreamingResponse(lines(db, after), media_type="application/x-ndjson")


async def result_changes(request: Request) -> Response:
    """A page of the change feed: `?first=&after=` and `page_info`, as GraphQL's
    itemResultChanges; `limit`, `cursor`, `has_more` and each change's `cursor` (raw numbers)
    are the deprecated forms."""
    project_id = await owned_project(request)
    first, field = page_size(request)
    after = request.query_params.get("after")
    page = await result_feed.changes_page(services(request).db, project_id, after, first, field)
    changes = [
        {
            "cursor": str(r["seq"]),
            "item_id": str(r["item_id"]),
            "external_id": r["external_id"],
            "version": r["version"],
            "change": r["change"],
            "answer": r["answer"],
            "agreement": r["agreement"],
            "at": r["at"].isoformat(),
        }
        for r in page.rows
    ]
    return JSONResponse(
        {
            "changes": changes,
            "page_info": page_info(page),
            "cursor": result_feed.change_seq_cursor(page, after),
            "has_more": page.has_next,
        }
    )


def _policy_json(row: Any) -> dict[str, Any]:
    return {
        k: row[k] for k in (*policy.POLICY_FIELDS, *policy.CHOICES, "answer_field", "adjudicate")
    }


async def get_policy(request: Request) -> Response:
    project_id = await owned_project(request)
    db = services(request).db
    pool = [dict(r) for r in await gold.gold_pool(db, project_id)]
    current = _policy_json(await policy.get_policy(db, project_id))
    return JSONResponse({"policy": current, "gold_pool": pool})


async def put_policy(request: Request) -> Response:
    """Partial update of the quality policy (snake_case fields, as in GraphQL's input)."""
    project_id = await owned_project(request)
    body = await declared_body(request, PUT_POLICY)
    row = await policy.set_policy(services(request).db, project_id, body)
    return JSONResponse({"policy": _policy_json(row)})


async def add_gold(request: Request) -> Response:
    project_id = await owned_project(request)
    body = await declared_body(request, ADD_GOLD)
    s = services(request)
    project = await projects.get_project(s.db, project_id, None)  # owned: checked above
    answer_schema.check_gold_items(body["tasks"], project["answer_schema"])
    added = await gold.add_gold_items(
        s.db,
        batches.blobs_of(s),
        project_id,
        body["tasks"],
        gold.GoldLimits(
            s.settings.max_tasks_per_request,
            s.settings.max_payload_bytes,
            s.settings.inline_payload_bytes,
        ),
    )
    return JSONResponse({"added": added}, status_code=201)


async def prior_answers(request: Request) -> Response:
    expert_id = (await viewer(request)).require_expert()
    task_id = parse_id(request.path_params["id"], "task")
    answers = await adjudication.prior_answers(services(request).db, expert_id, task_id)
    return JSONResponse({"prior_answers": answers})


routes = [
    api_route(RESULTS, results),
    api_route(RESULT_CHANGES, result_changes),
    api_route(GET_POLICY, get_policy),
    api_route(PUT_POLICY, put_policy),
    api_route(ADD_GOLD, add_gold),
    api_route(PRIOR_ANSWERS, prior_answers),
]
