"""REST: a project's instructions for experts (versioned Markdown)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.resolvers import instructions
from taskroute.resolvers.accounts.credentials import parse_id

from .common import api_route, json_object, services, viewer


def instructions_json(i: instructions.Instructions) -> dict[str, Any]:
    return {
        "version": i.version,
        "markdown": i.markdown,
        "allow_remote_images": i.allow_remote_images,
        "created_at": i.created_at.isoformat(),
    }


async def set_instructions(request: Request) -> Response:
    who = await viewer(request)
    project_id = parse_id(request.path_params["id"], "project")
    body = await json_object(request, {"markdown", "allow_remote_images"}, required={"markdown"})
    found = await instructions.set_instructions(
        services(request).db,
        who,
        project_id,
        body["markdown"],
        body.get("allow_remote_images", False),
    )
    return JSONResponse({"project_id": str(project_id), **instructions_json(found)})


routes = [
    api_route("/v1/projects/{id}/instructions", set_instructions, methods=["PUT"]),
]
