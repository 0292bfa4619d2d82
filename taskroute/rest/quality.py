"""REST: a project's results as a JSON Lines stream, their change feed, adjudication context."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from taskroute.db.pool import Database
from taskroute.errors import BadInput
from taskroute.resolvers import answer_schema, batches, projects
from taskroute.resolvers.accounts.credentials import parse_id
from taskroute.resolvers.quality import adjudication, gold, policy, result_feed

from .common import api_route, json_body, json_object, page_info, page_size, services, viewer

STREAM_PAGE = 500  # rows per database round trip while streaming


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
    body = await json_body(request)
    if not isinstance(body, dict):
        raise BadInput("the body must be a JSON object")
    row = await policy.set_policy(services(request).db, project_id, body)
    return JSONResponse({"policy": _policy_json(row)})


async def add_gold(request: Request) -> Response:
    project_id = await owned_project(request)
    body = await json_object(request, {"tasks"}, required={"tasks"})
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
    api_route("/v1/projects/{id}/results", results, methods=["GET"], query=("after",)),
    api_route(
        "/v1/projects/{id}/result-changes",
        result_changes,
        methods=["GET"],
        query=("first", "limit", "after"),
    ),
    api_route("/v1/projects/{id}/quality", get_policy, methods=["GET"]),
    api_route("/v1/projects/{id}/quality", put_policy, methods=["PUT"]),
    api_route("/v1/projects/{id}/gold", add_gold, methods=["POST"]),
    api_route("/v1/tasks/{id}/prior-answers", prior_answers, methods=["GET"]),
]
